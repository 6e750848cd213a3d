/**
 * Stopping the backend monitor aborts its probes in flight: a drain with
 * nothing else to wait for must not sit out a health check (or a /metrics
 * read) that a hung backend never answers. A real gateway on port 0 in front
 * of a node:http backend that reads every request and never answers.
 */
import { createServer } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { makeKey, startTestGateway } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const key = makeKey('ops', ['chat'])
const cleanups = cleanupsAfterEach()

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
    const gw = await startTestGateway({
      server: { shutdown_grace_ms: GRACE_MS },
      auth: { keys: [key.entry] },
      // An interval longer than the probe timeout: the probe waits its full 5 s.
      models: [{ name: 'm', health: { interval_ms: 30_000 }, backends: [{ url, name: 'b1' }] }],
    })
    cleanups.push(() => gw.shutdown()) // idempotent: the same promise again
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
