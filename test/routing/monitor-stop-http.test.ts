/**
 * Stopping the backend monitor aborts its probes in flight: a drain with
 * nothing else to wait for must not sit out a health check (or a /metrics
 * read) that a hung backend never answers. A real gateway on port 0 in front
 * of a node:http backend that reads every request and never answers.
 */
import { createServer } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { makeKey, startTestGateway } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const key = makeKey('ops', ['chat'])
const cleanups = trackedAfterEach()

// Well under the probe's own timeout (backend-monitor.ts MAX_PROBE_MS, 5 s), which used to end the drain.
const GRACE_MS = 2000

describe('shutdown with a hung health probe', () => {
  it('ends within the grace period, not when the probe times out', async () => {
    const probes: string[] = []
    const hung = createServer((req) => {
      probes.push(req.url ?? '')
      req.resume()
    })
    const url = await listenForTest(hung, cleanups)
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: GRACE_MS },
      auth: { keys: [key.entry] },
      // An interval longer than the probe timeout: the probe waits its full 5 s.
      models: [{ name: 'm', health: { interval_ms: 30_000 }, backends: [{ url, name: 'b1' }] }],
    })
    await until(() => probes.includes('/health') && probes.includes('/metrics'), 'the health check and the metrics read to be in flight')

    const timer = new AbortController()
    const winner = await Promise.race([
      gw.shutdown().then(() => 'shutdown' as const),
      delay(GRACE_MS, 'grace period over' as const, { signal: timer.signal }).catch(() => 'cancelled' as const),
    ])
    timer.abort()

    expect(winner).toBe('shutdown')
  })
})

describe('many backends probed at once', () => {
  // Regression: every probe listens on the monitor's one abort signal, and
  // Node warned of a leak past 10 listeners (a model with 6 backends probes 12 at once).
  it('starts and stops a model with 12 backends without a MaxListenersExceededWarning', async () => {
    const warnings: string[] = []
    const onWarning = (warning: Error) => void warnings.push(`${warning.name}: ${warning.message}`)
    process.on('warning', onWarning)
    cleanups.push(() => process.off('warning', onWarning))
    const probes: string[] = []
    const hung = createServer((req) => {
      probes.push(req.url ?? '')
      req.resume()
    })
    const url = await listenForTest(hung, cleanups)
    const backends = Array.from({ length: 12 }, (_, i) => ({ url, name: `b${i}` }))
    const gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends }] })
    // Every backend's health check and /metrics read are in flight together.
    await until(() => probes.length >= 24, 'all 24 probes in flight')
    await gw.shutdown()
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([])
  })
})
