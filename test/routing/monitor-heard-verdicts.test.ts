/**
 * What a replica does with the verdicts other replicas share (the health
 * board, Redis mode). Regression: one replica with a broken path to a
 * backend (a partition, a firewall rule) published its down verdict, and
 * every replica took the backend out, their own checks passing, for as long
 * as the partition lasted. A verdict on a backend this replica finds healthy
 * is now held only once this replica's own check, run as it arrives, fails
 * too. A real BackendMonitor on a real model route, a node:http backend on
 * port 0 whose /health answers what the test says, and a board through
 * which the test delivers verdicts; checks run once a minute, so every check
 * after the first is one the monitor ran because a verdict arrived.
 */
import { createServer } from 'node:http'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { createMetrics } from '../../src/metrics/registry.js'
import { BackendMonitor } from '../../src/routing/backend-monitor.js'
import type { Backend } from '../../src/routing/backend.js'
import type { SharedVerdict } from '../../src/routing/health-state.js'
import { buildModelRoutes } from '../../src/routing/model-route.js'
import type { HealthBoard } from '../../src/state/health-board.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { configFrom } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const cleanups = cleanupsAfterEach()

interface Replica {
  readonly backend: Backend
  /** /health checks the backend has received. */
  readonly checks: () => number
  /** What /health answers from now on. */
  setHealth(status: number): void
  /** Another replica's verdict (null: its withdrawal) arrives. */
  hear(verdict: SharedVerdict | null): void
  /** What the monitor has told the board. */
  readonly told: string[]
  readonly logMessages: () => string[]
}

async function replica(): Promise<Replica> {
  let status = 200
  let checks = 0
  const server = createServer((request, response) => {
    request.resume()
    if (request.url === '/health') checks++
    response.writeHead(request.url === '/health' ? status : 404, { 'content-length': 0 }).end()
  })
  const url = await listenForTest(server, cleanups)
  const config = configFrom({ models: [{ name: 'm', health: { interval_ms: 60_000, unhealthy_after: 3 }, backends: [{ url, name: 'b0' }] }] })
  const models = buildModelRoutes(config.models)
  let deliver: ((backend: string, verdict: SharedVerdict | null) => void) | undefined
  const told: string[] = []
  const board: HealthBoard = {
    publish: () => void told.push('publish'),
    clear: () => void told.push('clear'),
    watch: (_model, _backends, onVerdict) => void (deliver = onVerdict),
    close: () => undefined,
  }
  const lines: string[] = []
  const log = new Writable({ write: (chunk: Buffer, _encoding, done) => done(void lines.push(...chunk.toString('utf8').trim().split('\n'))) })
  const monitor = new BackendMonitor(models, { now: () => Date.now() }, createMetrics(), createLogger('info', log), { wake: () => undefined, unavailable: () => undefined, board })
  cleanups.push(() => Promise.all([...models.values()].map((route) => route.close())))
  cleanups.push(() => monitor.stop())
  monitor.start()
  const backend = models.get('m')!.backends[0]!
  await until(() => backend.health.confirmed, 'the first check to pass')
  return {
    backend,
    checks: () => checks,
    setHealth: (next) => void (status = next),
    hear: (verdict) => deliver!('b0', verdict),
    told,
    logMessages: () => lines.map((line) => String((JSON.parse(line) as { msg?: unknown }).msg)),
  }
}

const downFor = (ms: number): SharedVerdict => ({ up: false, ejectedUntil: 0, expiresAt: Date.now() + ms })
const ejectedFor = (ms: number): SharedVerdict => ({ up: true, ejectedUntil: Date.now() + ms, expiresAt: Date.now() + ms })
const SETS_ASIDE = 'another replica finds this backend down; this replica’s own check passes, so it keeps using it'
const usable = (r: Replica) => r.backend.usable(Date.now())

describe('the verdicts a replica hears', () => {
  it('a verdict on a backend whose own check passes is checked at once and set aside: the backend stays in use', async () => {
    const r = await replica()
    r.hear(downFor(60_000))
    await until(() => r.logMessages().includes(SETS_ASIDE), 'the verdict set aside')
    expect(r.checks()).toBe(2)
    expect(usable(r)).toBe(true)
    expect(r.logMessages()).not.toContain('backend down')
    expect(r.told).toEqual([])
  })

  it('so is an ejection verdict', async () => {
    const r = await replica()
    r.hear(ejectedFor(60_000))
    await until(() => r.logMessages().includes(SETS_ASIDE), 'the verdict set aside')
    expect(usable(r)).toBe(true)
  })

  it('a verdict whose own check fails too is held until it is withdrawn; this replica shares nothing of its own', async () => {
    const r = await replica()
    r.setHealth(503)
    r.hear(downFor(60_000))
    await until(() => !usable(r), 'the verdict held')
    expect(r.checks()).toBe(2)
    r.setHealth(200)
    r.hear(null)
    expect(usable(r)).toBe(true)
    expect(r.told).toEqual([])
  })

  it('a held verdict is let go when its refresh is checked and the backend passes', async () => {
    const r = await replica()
    r.setHealth(503)
    r.hear(downFor(60_000))
    await until(() => !usable(r), 'the verdict held')
    r.setHealth(200)
    r.hear(downFor(60_000))
    // Held while its refresh is being checked: no flapping in and out of routing.
    expect(usable(r)).toBe(false)
    await until(() => usable(r), 'the refresh set aside')
    expect(r.checks()).toBe(3)
    expect(r.logMessages().filter((message) => message === 'backend down')).toHaveLength(1)
  })
})
