/**
 * `sluice_backend_up` after a reload that moves a backend to another URL
 * under the same name: the serving generation owns the series. The retiring
 * one, kept alive by a stream still in flight, went on probing the old URL
 * and writing its verdict into the same series, so the gauge flapped
 * between the two until it closed (a lifecycle audit).
 */
import { describe, expect, it } from 'vitest'
import { configFrom, makeKey } from '../support/gateway.js'
import { movedBackend } from '../support/moved-backend.js'
import { scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()

describe('sluice_backend_up across a reload that moves a backend', () => {
  it('is the serving generation’s: the retiring one’s checks of the old URL no longer write it', async () => {
    const { oldUrl, newUrl, holding, oldUrlChecks, release } = await movedBackend(cleanups)
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
    const checked = oldUrlChecks()
    await until(() => oldUrlChecks() >= checked + 3, 'the retiring generation checking the old URL three more times')

    expect(await up('x')).toBe(1)
    release()
    await stream.text()
  })
})
