/**
 * Stopping the backend monitor aborts its probes in flight: a drain with
 * nothing else to wait for must not sit out a health check (or a /metrics
 * read) that a hung backend never finishes. A real gateway on port 0 in front
 * of node:http backends that never finish their answers.
 */
import { createServer, type ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { makeKey, startTestGateway } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const key = makeKey('ops', ['chat'])
const cleanups = trackedAfterEach()

// Far longer than the test may run: a shutdown that finishes at all was not held by the grace period.
const GRACE_MS = 60_000

describe('shutdown with a probe in flight', () => {
  it('ends without waiting for a health check or a metrics read that would never end', async () => {
    const probes: string[] = []
    const answering = new Set<ServerResponse>()
    // Every probe gets its headers at once and then a byte every 100 ms, for ever: undici's
    // body timeout (5 s) restarts with each byte, so no timeout ends it; only the monitor's
    // stop() aborting it does. (A silent backend would be given up at the probe's 5 s
    // timeout, which then ended the drain, in time for the test too.)
    const trickle = setInterval(() => {
      for (const res of answering) res.write(' ')
    }, 100)
    cleanups.push(() => clearInterval(trickle))
    const hung = createServer((req, res) => {
      probes.push(req.url ?? '')
      res.writeHead(200, { 'content-type': 'text/plain' })
      answering.add(res)
      res.on('close', () => answering.delete(res))
    })
    const url = await listenForTest(hung, cleanups)
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: GRACE_MS },
      auth: { keys: [key.entry] },
      // An interval longer than the probe timeout: one probe of each kind, held open.
      models: [{ name: 'm', health: { interval_ms: 30_000 }, backends: [{ url, name: 'b1' }] }],
    })
    // Should this test fail, the probes end here so that the gateway's own teardown can finish.
    cleanups.push(() => {
      for (const res of answering) res.destroy()
    })
    await until(() => probes.includes('/health') && probes.includes('/metrics') && answering.size === 2, 'the health check and the metrics read to be answering')

    // Left running, the probes would hold this for ever (the test's timeout fails it).
    await expect(gw.shutdown()).resolves.toBeUndefined()
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
    // One server behind 12 path prefixes (the config refuses one URL listed twice).
    const backends = Array.from({ length: 12 }, (_, i) => ({ url: `${url}/b${i}`, name: `b${i}` }))
    const gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends }] })
    // Every backend's health check and /metrics read are in flight together.
    await until(() => probes.length >= 24, 'all 24 probes in flight')
    await gw.shutdown()
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([])
  })
})
