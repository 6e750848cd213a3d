/**
 * What a replica's checks tell the other replicas (the health board, Redis
 * mode): a backend down only because it was never seen healthy here is this
 * replica's finding alone. Regression (review): after the first failed check
 * took an unconfirmed backend down, a replica whose first probe met a blip
 * published a down verdict, and every replica, its own checks passing, took
 * the backend out of routing and readiness. A real BackendMonitor on a real
 * model route, a node:http backend on port 0 answering /health from a
 * script, and a board that records what it is told; each check's outcome
 * has been applied once the next check arrives.
 */
import { createServer } from 'node:http'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { createMetrics } from '../../src/metrics/registry.js'
import { BackendMonitor } from '../../src/routing/backend-monitor.js'
import type { SharedVerdict } from '../../src/routing/health-state.js'
import { buildModelRoutes } from '../../src/routing/model-route.js'
import type { HealthBoard } from '../../src/state/health-board.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { configFrom } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const cleanups = cleanupsAfterEach()

type Told = readonly ['publish', boolean] | readonly ['clear']

/** A board that records what the monitor tells it and tells it nothing back. */
function recordingBoard(): HealthBoard & { readonly told: Told[] } {
  const told: Told[] = []
  return {
    told,
    publish: (_model: string, _backend: string, verdict: SharedVerdict) => void told.push(['publish', verdict.up]),
    clear: () => void told.push(['clear']),
    watch: () => undefined,
    close: () => undefined,
  }
}

/**
 * Runs a monitor whose backend answers its /health checks with `statuses`
 * in turn (200 after them), until every one of them has been applied.
 */
async function monitorThrough(statuses: readonly number[], unhealthyAfter: number): Promise<Told[]> {
  let checks = 0
  const backend = createServer((request, response) => {
    request.resume()
    if (request.url !== '/health') return void response.writeHead(404, { 'content-length': 0 }).end()
    const status = statuses[checks++] ?? 200
    response.writeHead(status, { 'content-length': 0 }).end()
  })
  const url = await listenForTest(backend, cleanups)
  const config = configFrom({ models: [{ name: 'm', health: { interval_ms: 100, unhealthy_after: unhealthyAfter }, backends: [{ url, name: 'b0' }] }] })
  const models = buildModelRoutes(config.models)
  const board = recordingBoard()
  const quiet = new Writable({ write: (_chunk, _encoding, done) => done() })
  const monitor = new BackendMonitor(models, { now: () => Date.now() }, createMetrics(), createLogger('info', quiet), { wake: () => undefined, unavailable: () => undefined, board })
  cleanups.push(() => Promise.all([...models.values()].map((route) => route.close())))
  cleanups.push(() => monitor.stop())
  monitor.start()
  // The check after the scripted ones has arrived: all of theirs were applied, and one 200 after them.
  await until(() => checks >= statuses.length + 2, `${statuses.length + 2} health checks`)
  return board.told
}

describe('the verdicts a replica shares', () => {
  it('a backend never seen healthy, down at its first failed check, is not shared; nor is its recovery', async () => {
    expect(await monitorThrough([503], 3)).toEqual([])
    expect(await monitorThrough([503, 503], 3)).toEqual([])
  })

  it('unhealthy_after failed checks are shared, seen healthy or not, and so is the recovery', async () => {
    expect(await monitorThrough([503, 503, 503], 3)).toEqual([['publish', false], ['clear']])
    expect(await monitorThrough([200, 503, 503, 503], 3)).toEqual([['publish', false], ['clear']])
  })

  it('with unhealthy_after 1 the first failed check is shared, as before', async () => {
    expect(await monitorThrough([503], 1)).toEqual([['publish', false], ['clear']])
  })
})
