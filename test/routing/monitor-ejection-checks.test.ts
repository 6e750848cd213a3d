/**
 * Health checks against a backend that real traffic has ejected: a real
 * BackendMonitor in front of a node:http backend on port 0, on a clock the
 * test sets, so whether a check lands inside the ejection is decided by the
 * test, not by timing.
 *
 * Regression (ops review, session 26): a dead backend, ejected by a refused
 * connection, took requests and counted for /readyz again when its ejection
 * ran out, though the check run inside the ejection had failed.
 */
import { createServer } from 'node:http'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { createMetrics } from '../../src/metrics/registry.js'
import { BackendMonitor } from '../../src/routing/backend-monitor.js'
import { buildModelRoutes } from '../../src/routing/model-route.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { configFrom } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const cleanups = cleanupsAfterEach()
const T0 = 1_700_000_000_000
const INTERVAL_MS = 100

/** A monitor on one backend seen healthy, whose later checks the test makes fail or pass, on a clock at `clock.now`. */
async function monitored() {
  let healthStatus = 200
  const server = createServer((request, response) => {
    response.writeHead(request.url === '/health' ? healthStatus : 404, { 'content-length': 0 }).end()
  })
  const url = await listenForTest(server, cleanups)
  const config = configFrom({ models: [{ name: 'm', health: { interval_ms: INTERVAL_MS, unhealthy_after: 5 }, backends: [{ url, name: 'b0' }] }] })
  const models = buildModelRoutes(config.models)
  const clock = { now: T0 }
  const quiet = new Writable({ write: (_chunk, _encoding, done) => done() })
  const monitor = new BackendMonitor(models, { now: () => clock.now }, createMetrics(), createLogger('info', quiet), { wake: () => undefined, unavailable: () => undefined })
  cleanups.push(() => Promise.all([...models.values()].map((route) => route.close())))
  cleanups.push(() => monitor.stop())
  const route = models.get('m')!
  const backend = route.backends[0]!
  monitor.start()
  await until(() => backend.health.confirmed, 'the first check passed')
  return {
    clock,
    route,
    backend,
    monitor,
    failChecks: () => void (healthStatus = 503),
    passChecks: () => void (healthStatus = 200),
  }
}

describe('a backend ejected by real traffic', () => {
  it('whose check fails during the ejection stays out after it, until a check passes', async () => {
    const m = await monitored()
    // Every check fails from here on, so none that passed can end the ejection below first.
    m.failChecks()
    await until(() => m.backend.health.activeFailures >= 1, 'a failed check')
    expect(m.backend.usable(m.clock.now)).toBe(true)
    m.monitor.reportFailure(m.route, m.backend, 'connect')
    const ejectedUntil = m.backend.health.ejectedUntil
    expect(ejectedUntil).toBeGreaterThan(T0)

    await until(() => m.backend.health.activeFailures >= 2, 'a check failed inside the ejection')
    m.clock.now = ejectedUntil + 100 * INTERVAL_MS
    expect(m.backend.usable(m.clock.now)).toBe(false)

    m.passChecks()
    await until(() => m.backend.usable(m.clock.now), 'a passing check brings it back')
  })

  it('whose check fails only after the ejection ran out is still up: one failed check of unhealthy_after', async () => {
    const m = await monitored()
    m.failChecks()
    await until(() => m.backend.health.activeFailures >= 1, 'a failed check')
    m.monitor.reportFailure(m.route, m.backend, 'connect')
    m.clock.now = m.backend.health.ejectedUntil

    await until(() => m.backend.health.activeFailures >= 2, 'a check failed after the ejection')
    expect(m.backend.usable(m.clock.now)).toBe(true)
  })
})
