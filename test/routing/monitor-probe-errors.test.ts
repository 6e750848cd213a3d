/**
 * A health check whose consequence throws (here the `unavailable` hook)
 * does not end the backend's probing, and is logged rather than left as an
 * unhandled rejection (which ends the process). A real BackendMonitor on a
 * real model route, in front of a node:http backend on port 0 whose health
 * check fails.
 */
import { createServer } from 'node:http'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { createMetrics } from '../../src/metrics/registry.js'
import { BackendMonitor } from '../../src/routing/backend-monitor.js'
import { buildModelRoutes } from '../../src/routing/model-route.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { deferred } from '../support/deferred.js'
import { configFrom } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'

const cleanups = cleanupsAfterEach()

describe('a backend monitor whose verdict hook throws', () => {
  it('logs the error and probes the backend again', async () => {
    const secondCheck = deferred()
    let checks = 0
    const backend = createServer((request, response) => {
      if (request.url === '/health' && ++checks === 2) secondCheck.resolve()
      response.writeHead(500).end()
    })
    const url = await listenForTest(backend, cleanups)
    const config = configFrom({ models: [{ name: 'm', health: { interval_ms: 100, unhealthy_after: 1 }, backends: [{ url, name: 'b0' }] }] })
    const models = buildModelRoutes(config.models)
    const lines: Record<string, unknown>[] = []
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>)
        done()
      },
    })
    let unavailableCalls = 0
    const monitor = new BackendMonitor(models, { now: () => Date.now() }, createMetrics(), createLogger('info', sink), {
      wake: () => undefined,
      unavailable: () => {
        unavailableCalls++
        throw new Error('hook failed')
      },
    })
    cleanups.push(() => Promise.all([...models.values()].map((route) => route.close())))
    cleanups.push(() => monitor.stop())

    monitor.start()
    await secondCheck.promise

    expect(unavailableCalls).toBeGreaterThanOrEqual(1)
    expect(lines).toContainEqual(expect.objectContaining({ level: 50, model: 'm', backend: 'b0', err: expect.objectContaining({ message: 'hook failed' }) }))
  })
})
