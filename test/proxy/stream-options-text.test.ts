/**
 * The `stream_options` the gateway writes when it asks a stream's backend
 * for usage and the client sent the object: the client's other members as
 * it wrote them. Regression (splice review): the object was rebuilt from
 * the parsed body, so 12345678901234567891 reached the backend rounded.
 */
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { upstreamChatBody } from '../../src/proxy/chat-upstream-body.js'
import { streamOptionsRewrite } from '../../src/proxy/stream-options-text.js'
import { makeKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { trackedAfterEach } from '../support/tracked.js'

const FALLBACK = { include_usage: true, continuous_usage_stats: false }

/** The backend's bytes for `raw`, as the chat route builds them. */
function upstream(raw: string): string {
  const bytes = Buffer.from(raw)
  const sent = JSON.parse(raw.replace(/^\ufeff/, '')) as Record<string, unknown>
  return upstreamChatBody(bytes, sent, { model: 'served', stream_options: streamOptionsRewrite(FALLBACK) }).toString()
}

describe('streamOptionsRewrite', () => {
  it("keeps the client's other members byte for byte and sets the two the gateway needs", () => {
    const out = upstream('{"model":"m","stream":true,"stream_options":{"x":12345678901234567891,"y":1.0,"include_usage":false,"z":"\\u00e9"},"messages":[]}')
    expect(out).toBe('{"model":"served","stream":true,"stream_options":{"x":12345678901234567891,"y":1.0,"z":"\\u00e9","include_usage":true,"continuous_usage_stats":false},"messages":[]}')
  })

  it('drops every spelling of the members it sets, repeated or escaped', () => {
    const out = upstream('{"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true,"incl\\u0075de_usage":false,"include_usage":null}}')
    expect(out).toBe('{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false},"model":"served"}')
  })

  it('rewrites every stream_options the client sent, each from its own bytes, behind a byte order mark too', () => {
    const out = upstream('\ufeff{"stream_options":{"a":1},"stream_options":{"b":2.50},"stream":true}')
    expect(out).toBe('{"stream_options":{"a":1,"include_usage":true,"continuous_usage_stats":false},"stream_options":{"b":2.50,"include_usage":true,"continuous_usage_stats":false},"stream":true,"model":"served"}')
  })

  it('serializes as its fallback where the whole body is serialized', () => {
    expect(JSON.stringify({ stream_options: streamOptionsRewrite(FALLBACK) })).toBe('{"stream_options":{"include_usage":true,"continuous_usage_stats":false}}')
  })
})

describe('through the gateway', () => {
  const cleanups = trackedAfterEach()
  const key = makeKey('k', ['chat'])

  it("a stream that did not ask for usage reaches the backend with the client's stream_options members as written", async () => {
    const bodies: string[] = []
    const backend = createServer((req, res) => {
      const parts: Buffer[] = []
      req.on('data', (part: Buffer) => parts.push(part))
      req.on('end', () => {
        if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
        bodies.push(Buffer.concat(parts).toString())
        res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: [DONE]\n\n')
      })
    })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: await listenForTest(backend, cleanups) }] }] })

    const raw = '{"model":"m","stream":true,"stream_options":{"x":12345678901234567891,"y":1.0},"messages":[{"role":"user","content":"hi"}]}'
    const answer = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: raw })
    await answer.text()

    expect(answer.status).toBe(200)
    expect(bodies.at(-1)).toContain('"stream_options":{"x":12345678901234567891,"y":1.0,"include_usage":true,"continuous_usage_stats":false}')
  })
})
