/**
 * Per-key limits survive a reload in memory mode (SIGHUP builds a new
 * generation): a black-box audit saw a key limited to 3 requests a minute get
 * 3 more after each reload, and a key limited to 1 concurrent request run 2.
 * The serving generation's key limiter is carried into the next one.
 */
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import type { VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { configFrom, makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const perMinute = makeKey('per-minute', ['chat'], { limits: { requests_per_minute: 3 } })
const oneAtATime = makeKey('one-at-a-time', ['chat'], { limits: { max_concurrency: 1 } })

function settings(backend: VllmStandIn, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { server: { port: 0, shutdown_grace_ms: 1000 }, auth: { keys: [perMinute.entry, oneAtATime.entry] }, models: [{ name: 'm', backends: [{ url: backend.url, name: 'b1' }], ...extra }] }
}

function send(gw: TestGateway, as: TestKey): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
}

async function codeOf(response: Response): Promise<string | number> {
  if (response.status === 200) return 200
  return ((await response.json()) as { error: { code: string } }).error.code
}

describe('key limits across a reload (memory mode)', () => {
  it('requests_per_minute: the used minute is not refilled, by a reload to the same or a changed config', async () => {
    const backend = await cleanups.standIn()
    const gw = await cleanups.gateway(settings(backend))
    const codes = []
    for (let i = 0; i < 4; i++) codes.push(await codeOf(await send(gw, perMinute)))
    expect(codes).toEqual([200, 200, 200, 'rate_limit_requests'])

    await gw.reload(configFrom(settings(backend)))
    expect(await codeOf(await send(gw, perMinute))).toBe('rate_limit_requests')
    await gw.reload(configFrom(settings(backend, { max_concurrency_per_backend: 8 })))
    expect(await codeOf(await send(gw, perMinute))).toBe('rate_limit_requests')
  })

  it('max_concurrency: a request running across the reload still counts, and its end frees the key', async () => {
    const backend = await cleanups.standIn({ hold: true })
    const gw = await cleanups.gateway(settings(backend))
    const held = once(backend.events, 'held')
    const first = send(gw, oneAtATime)
    await held

    await gw.reload(configFrom(settings(backend)))
    expect(await codeOf(await send(gw, oneAtATime))).toBe('concurrency')

    backend.options = { ...backend.options, hold: false }
    expect(backend.releaseHeld(1)).toBe(1)
    expect((await first).status).toBe(200)
    expect(await codeOf(await send(gw, oneAtATime))).toBe(200)
  })
})
