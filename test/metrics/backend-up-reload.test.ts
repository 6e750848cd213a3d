/**
 * `sluice_backend_up` after a reload that moves a backend to another URL
 * under the same name: the serving generation owns the series. The retiring
 * one, kept alive by a stream still in flight, went on probing the old URL
 * and writing its verdict into the same series, so the gauge flapped
 * between the two until it closed (a lifecycle audit).
 */
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { configFrom, makeKey } from '../support/gateway.js'
import { deferred } from '../support/deferred.js'
import { listenForTest } from '../support/listen.js'
import { scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()

describe('sluice_backend_up across a reload that moves a backend', () => {
  it('is the serving generation’s: the retiring one’s checks of the old URL no longer write it', async () => {
    let oldUrlChecks = 0
    const oldUrl = await listenForTest(
      createServer((_req, res) => {
        oldUrlChecks++
        res.writeHead(500, { 'content-length': 0 }).end()
      }),
      cleanups,
    )
    const newUrl = await listenForTest(createServer((_req, res) => res.writeHead(200, { 'content-length': 0 }).end()), cleanups)
    const release = deferred()
    const holding = await listenForTest(
      createServer((req, res) => {
        if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
        req.resume()
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write('data: {"choices":[]}\n\n')
        void release.promise.then(() => res.end('data: [DONE]\n\n'))
      }),
      cleanups,
    )
    cleanups.push(async () => release.resolve())
    const config = (xUrl: string, intervalMs: number) => ({
      server: { port: 0, shutdown_grace_ms: 200 },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', health: { interval_ms: intervalMs, unhealthy_after: 1 }, backends: [{ url: xUrl, name: 'x' }, { url: holding, name: 'c' }] }],
    })
    const gw = await cleanups.gateway(config(oldUrl, 100))
    const up = (backend: string) => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend })
    await until(async () => (await up('x')) === 0 && (await up('c')) === 1, 'x down, c up')
    // A stream on c keeps the first generation alive past the reload.
    const stream = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(stream.status).toBe(200)

    // The new generation checks once at start (then not for a minute): x, now at its new URL, is up.
    await gw.reload(configFrom(config(newUrl, 60_000)))
    await until(async () => (await up('x')) === 1, 'x up at its new URL')
    const checked = oldUrlChecks
    await until(() => oldUrlChecks >= checked + 3, 'the retiring generation checking the old URL three more times')

    expect(await up('x')).toBe(1)
    release.resolve()
    await stream.text()
  })
})
