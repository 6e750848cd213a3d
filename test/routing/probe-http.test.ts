/**
 * What the backend monitor's probes send and how much of an answer they
 * hold. Real gateways on port 0 in front of node:http backends that record
 * every request; a probe's verdict is read once the next probe has arrived
 * (interval 100 ms), which is after the first one's verdict was published.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { makeKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { scrapeMetric, until } from '../support/metrics.js'

const key = makeKey('ops', ['chat'])
const cleanups = trackedAfterEach()

interface Probe {
  readonly method: string
  readonly url: string
  readonly authorization: string | undefined
}

async function recordingBackend(health: (res: ServerResponse) => void): Promise<{ url: string; probes: Probe[] }> {
  const probes: Probe[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    probes.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization })
    if (req.url?.endsWith('/health')) return health(res)
    res.writeHead(404, { 'content-length': 0 }).end()
  })
  return { url: await listenForTest(server, cleanups), probes }
}

const gateway = (backends: readonly Record<string, unknown>[]) => cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', health: { interval_ms: 100 }, backends }] })

const healthChecks = (probes: readonly Probe[]) => probes.filter((p) => p.url.endsWith('/health')).length
const okHealth = (res: ServerResponse) => void res.writeHead(200, { 'content-length': 2 }).end('ok')

describe('health and metrics probes', () => {
  it('are GETs under the backend URL’s path prefix, with its api_key as Bearer', async () => {
    const backend = await recordingBackend(okHealth)
    const gw = await gateway([{ url: `${backend.url}/serving/v1-prefix`, name: 'b1', api_key: 'sk-backend' }])

    await until(() => healthChecks(backend.probes) >= 2, 'two health checks')

    expect(await scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b1' })).toBe(1)
    expect(new Set(backend.probes.map((p) => `${p.method} ${p.url} ${p.authorization}`))).toEqual(
      new Set(['GET /serving/v1-prefix/health Bearer sk-backend', 'GET /serving/v1-prefix/metrics Bearer sk-backend']),
    )
  })

  it('count a 2xx health answer longer than 16 MiB as failed (the most a probe holds)', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 'x')
    // 17 MiB in chunks, without a length: the limit is found while reading.
    const huge = await recordingBackend((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      for (let i = 0; i < 17 && !res.destroyed; i++) res.write(chunk)
      res.end()
    })
    const small = await recordingBackend(okHealth)
    const gw = await gateway([
      { url: huge.url, name: 'huge' },
      { url: small.url, name: 'small' },
    ])

    await until(() => healthChecks(huge.probes) >= 2 && healthChecks(small.probes) >= 2, 'two health checks of each backend')

    expect(await scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'huge' })).toBe(0)
    expect(await scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'small' })).toBe(1)
  })

  // Regression (HTTP review): only the silences of a probe's body were timed; a /health body trickled a
  // byte at a time never ended, the backend was probed no more and stayed up whatever it did.
  it('count a 2xx health answer whose body never ends as failed, and keep probing', async () => {
    const trickle = await recordingBackend((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const dots = setInterval(() => res.write('.'), 20)
      res.on('close', () => clearInterval(dots))
    })
    const gw = await gateway([{ url: trickle.url, name: 'trickle' }])

    await until(() => healthChecks(trickle.probes) >= 3, 'three health checks, each ended at the interval')
    expect(await scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'trickle' })).toBe(0)
  })
})
