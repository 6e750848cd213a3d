import { once } from 'node:events'
import { createServer } from 'node:http'
import { gzipSync } from 'node:zlib'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { errors } from 'undici'
import { describe, expect, it, vi } from 'vitest'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { until, untilMetric } from '../support/metrics.js'
import { untilStalled } from '../support/stall.js'
import { trackedAfterEach } from '../support/tracked.js'
import { vanishingBackend, vanishOnceConfirmed } from '../support/vanishing-backend.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

const gateway = (model: Record<string, unknown>) => cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', served_name: 'stand-in-model', ...model }] })

function client(gw: TestGateway): OpenAI {
  return new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key.token, maxRetries: 0 })
}

const messages = [{ role: 'user' as const, content: 'Hello there' }]

describe('chat through the gateway with the openai client', () => {
  it('returns a non-streaming completion unchanged', async () => {
    const backend = await cleanups.standIn({ tokens: 5 })
    const gw = await gateway({ backends: [{ url: backend.url }] })

    const completion = await client(gw).chat.completions.create({ model: 'm', messages })

    expect(completion.choices[0]?.message.content).toBe('tok0 tok1 tok2 tok3 tok4 ')
    expect(completion.usage?.completion_tokens).toBe(5)
    expect(completion.model).toBe('stand-in-model')
    expect(backend.received).toHaveLength(1)
    expect((backend.received[0]?.body as { model: string }).model).toBe('stand-in-model')
  })

  it('streams every chunk and the content reassembles exactly', async () => {
    const backend = await cleanups.standIn({ tokens: 7 })
    const gw = await gateway({ backends: [{ url: backend.url }] })

    const stream = await client(gw).chat.completions.create({ model: 'm', messages, stream: true, stream_options: { include_usage: true } })
    let content = ''
    let chunks = 0
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      chunks++
      content += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }

    expect(content).toBe('tok0 tok1 tok2 tok3 tok4 tok5 tok6 ')
    // role chunk + 7 content chunks + finish chunk + usage chunk
    expect(chunks).toBe(10)
    expect(usage?.completion_tokens).toBe(7)
  })

  it('passes the raw event stream through byte for byte, [DONE] included', async () => {
    const backend = await cleanups.standIn({ tokens: 3 })
    const gw = await gateway({ backends: [{ url: backend.url }] })
    const body = JSON.stringify({ model: 'm', messages, stream: true })

    const direct = await fetch(`${backend.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'same-id' }, body: body.replace('"m"', '"stand-in-model"') })
    const viaGateway = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'x-request-id': 'same-id' },
      body,
    })

    expect(viaGateway.headers.get('content-type')).toMatch(/^text\/event-stream/)
    expect(viaGateway.headers.get('x-request-id')).toBe('same-id')
    const [a, b] = [await direct.text(), await viaGateway.text()]
    const normalize = (text: string) => text.replace(/"created":\d+/g, '"created":0')
    expect(normalize(b)).toBe(normalize(a))
    expect(b.trimEnd().endsWith('data: [DONE]')).toBe(true)
  })

  it('does not buffer: the first chunk reaches the client before the backend produced the last', async () => {
    const tokens = 10
    const backend = await cleanups.standIn({ tokens, interTokenDelayMs: 40 })
    const gw = await gateway({ backends: [{ url: backend.url }] })
    let produced = 0
    backend.events.on('chunk', () => produced++)

    const stream = await client(gw).chat.completions.create({ model: 'm', messages, stream: true })
    let producedWhenFirstContentArrived = -1
    for await (const chunk of stream) {
      if (producedWhenFirstContentArrived < 0 && chunk.choices[0]?.delta.content) producedWhenFirstContentArrived = produced
    }

    expect(producedWhenFirstContentArrived).toBeGreaterThanOrEqual(1)
    expect(producedWhenFirstContentArrived).toBeLessThan(tokens)
    expect(produced).toBe(tokens)
  })

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    const backend = await cleanups.standIn({ tokens: 1000, interTokenDelayMs: 5 })
    const gw = await gateway({ backends: [{ url: backend.url }] })
    const closed = once(backend.events, 'client-closed')
    let produced = 0
    backend.events.on('chunk', () => produced++)
    const controller = new AbortController()

    const stream = await client(gw).chat.completions.create({ model: 'm', messages, stream: true }, { signal: controller.signal })
    let received = 0
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) received++
        if (received === 1) controller.abort()
      }
    } catch {
      // The openai client may end the iteration or throw on abort; either is fine here.
    }

    await closed
    // Chunks already read with the first may still be yielded after the abort (a loaded host reads two
    // events at once): what matters is that the backend stopped long before its 1,000 tokens.
    expect(received).toBeGreaterThanOrEqual(1)
    expect(produced).toBeLessThan(1000)
    expect(backend.inFlight()).toBe(0)
  })

  // A backend may compress when the request says nothing (RFC 9110 §12.5.3); the gateway must read the answer.
  it('asks the backend for an uncompressed answer, whatever the client accepts', async () => {
    const backend = await cleanups.standIn()
    const gw = await gateway({ backends: [{ url: backend.url }] })

    const answer = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'accept-encoding': 'gzip, br' },
      body: JSON.stringify({ model: 'm', messages }),
    })

    expect(answer.status).toBe(200)
    expect(backend.received[0]?.headers['accept-encoding']).toBe('identity')
  })

  // One check for both kinds of answer since session 23 (a gzipped stream went out under its label).
  it('a completion compressed anyway is a 502 upstream_bad_response, counted against the backend', async () => {
    const completion = gzipSync(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'stand-in-model', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
    const server = createServer((req, res) => {
      req.resume()
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': completion.length }).end(completion)
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    cleanups.push(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())))
    const gw = await gateway({ retries: 0, backends: [{ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, name: 'b' }] })

    const answer = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages }) })

    expect(answer.status).toBe(502)
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('upstream_bad_response')
    await untilMetric(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'bad_response' }, 1)
  })

  it('sends the backend api_key upstream, never the client token', async () => {
    const backend = await cleanups.standIn({ apiKey: 'backend-secret' })
    const gw = await gateway({ backends: [{ url: backend.url, api_key: 'backend-secret' }] })

    await client(gw).chat.completions.create({ model: 'm', messages })

    expect(backend.received[0]?.headers.authorization).toBe('Bearer backend-secret')
    expect(JSON.stringify(backend.received)).not.toContain(key.token)
  })
})

describe('backend failures', () => {
  async function post(gw: TestGateway, body: Record<string, unknown>) {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages, ...body }),
    })
    return { status: response.status, text: await response.text() }
  }

  it('answers 502 in the error shape when the backend refuses connections', async () => {
    const dead = await vanishingBackend(cleanups)
    const gw = await gateway({ health: { interval_ms: 60_000 }, backends: [{ url: dead.url, name: 'dead' }] })
    await vanishOnceConfirmed(gw.url, 'm', { dead })

    const { status, text } = await post(gw, {})

    expect(status).toBe(502)
    expect(JSON.parse(text)).toEqual({ error: { message: expect.any(String), type: 'upstream_error', param: null, code: 'upstream_unreachable' } })
  })

  it('answers 504 once first_byte_ms passed without an answer, by its own timer, not undici’s half-second tick', async () => {
    const backend = await cleanups.standIn({ fail: 'hang' })
    const gw = await gateway({ timeouts: { first_byte_ms: 50 }, backends: [{ url: backend.url }] })
    // The gateway's timer and undici's own headers timeout (which cannot fire before its
    // first 499 ms tick) end the call with the same error class, so both give this 504;
    // only the gateway's builds it through undici's exports, which the spy sees.
    const ours = vi.spyOn(errors, 'HeadersTimeoutError')
    cleanups.push(() => ours.mockRestore())

    const started = performance.now()
    const { status, text } = await post(gw, {})
    const elapsed = performance.now() - started

    expect(status).toBe(504)
    expect(JSON.parse(text).error).toMatchObject({ type: 'upstream_timeout', code: 'upstream_timeout' })
    expect(elapsed).toBeGreaterThanOrEqual(49)
    expect(ours).toHaveBeenCalledTimes(1)
  })

  // Regression (client review, session 24): the openai client retried the 504 twice by default, three
  // times first_byte_ms in all, each retry sending the prompt to the slow backend again.
  it("a 504 says x-should-retry: false, and the openai client's default retries leave it at one call", async () => {
    const backend = await cleanups.standIn({ fail: 'hang' })
    const gw = await gateway({ timeouts: { first_byte_ms: 50 }, backends: [{ url: backend.url }] })
    const retrying = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key.token, maxRetries: 2 })

    const failure = await retrying.chat.completions.create({ model: 'm', messages }).then(
      () => null,
      (error: unknown) => error,
    )

    expect(failure).toBeInstanceOf(OpenAI.APIError)
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBe(504)
    expect((failure as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false')
    expect(backend.received).toHaveLength(1)
  })

  it('retries another backend when the first hangs up before answering', async () => {
    const broken = await cleanups.standIn({ fail: 'close_before_headers' })
    const healthy = await cleanups.standIn()
    const gw = await gateway({ retries: 1, backends: [{ url: broken.url, name: 'broken' }, { url: healthy.url, name: 'healthy' }] })

    // Round robin starts with one and then the other: both orders must succeed.
    const results = [await post(gw, {}), await post(gw, {})]

    expect(results.map((r) => r.status)).toEqual([200, 200])
    expect(healthy.received).toHaveLength(2)
    expect(broken.received.length).toBeGreaterThanOrEqual(1)
  })

  it('answers 502 when a backend says 200 but sends something that is not JSON', async () => {
    const garbage = createServer((request, response) => {
      request.resume()
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end('<html>oops</html>')
      })
    })
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => garbage.close(() => resolve())))
    const gw = await gateway({ backends: [{ url: `http://127.0.0.1:${(garbage.address() as AddressInfo).port}` }] })

    const { status, text } = await post(gw, {})

    expect(status).toBe(502)
    expect(JSON.parse(text).error).toMatchObject({ type: 'upstream_error', code: 'upstream_bad_response' })
  })

  it('passes a backend error status and body through unchanged', async () => {
    // A backend its check has found healthy that then answers chat with 500 (a stand-in failing from
    // the start fails its /health too, and a backend whose first check failed takes no request).
    const backend = await cleanups.standIn()
    const gw = await gateway({ health: { interval_ms: 60_000 }, backends: [{ url: backend.url, name: 'b' }] })
    await untilMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b' }, 1)
    backend.options.fail = 'status500'

    const { status, text } = await post(gw, {})

    expect(status).toBe(500)
    expect(JSON.parse(text)).toEqual({ error: { message: 'stand-in failure', type: 'InternalServerError', param: null, code: 500 } })
  })

  it.each([
    [500, 'internal failure, no content type'],
    [200, JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'stand-in-model', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })],
  ])('passes a %i answer without Content-Type on without adding one, its body byte for byte', async (statusCode, body) => {
    const bare = createServer((request, response) => {
      request.resume()
      request.on('end', () => {
        if (request.url === '/health') return void response.writeHead(200, { 'content-length': 0 }).end()
        response.writeHead(statusCode, { 'x-backend': 'bare' })
        response.end(body)
      })
    })
    await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => bare.close(() => resolve())))
    const gw = await gateway({ backends: [{ url: `http://127.0.0.1:${(bare.address() as AddressInfo).port}` }] })

    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages }),
    })

    expect(response.status).toBe(statusCode)
    expect(response.headers.get('content-type')).toBeNull()
    expect(response.headers.get('x-backend')).toBe('bare')
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(body)))
    expect(await response.text()).toBe(body)
  })

  it('ends a stream that dies midway with an error event and [DONE]', async () => {
    const backend = await cleanups.standIn({ tokens: 10, fail: 'close_mid_stream' })
    const gw = await gateway({ backends: [{ url: backend.url }] })

    const { status, text } = await post(gw, { stream: true })

    expect(status).toBe(200)
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '))
    expect(events.at(-1)).toBe('data: [DONE]')
    const errorEvent = JSON.parse(events.at(-2)!.slice('data: '.length))
    expect(errorEvent.error).toMatchObject({ type: 'upstream_error', param: null })
    expect(events.some((e) => e.includes('tok0'))).toBe(true)
  })
})


describe('connections of clients that went away', () => {
  it('forgets a connection whose client hung up mid-stream (it once kept the whole request alive)', async () => {
    const backend = await cleanups.standIn({ tokens: 200, interTokenDelayMs: 5 })
    const gw = await gateway({ backends: [{ url: backend.url }] })
    const closed = once(backend.events, 'client-closed')
    const controller = new AbortController()
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages, stream: true }),
      signal: controller.signal,
    })
    const reader = response.body!.getReader()
    await reader.read()
    controller.abort()
    await closed

    // The gateway's side of the connection closes right after (no event tells the test): bounded poll.
    await until(() => gw.openConnections() === 0, 'the gateway to forget the connection of the client that left')
  })
})

describe('a client that reads slowly', () => {
  /** Far more than the socket buffers between backend and client hold, far less than the stream. */
  const STALLED_BYTES_CAP = 12 * 2 ** 20

  it('holds the backend back instead of buffering its stream, and loses no byte once the client reads', async () => {
    const event = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${'x'.repeat(4000)}"}}]}\n\n`
    const events = 8000 // ~32 MB, far more than socket buffers hold
    let blocked!: () => void
    const backendBlocked = new Promise<void>((resolve) => (blocked = resolve))
    let written = 0
    let finished = false
    const backend = createServer((req, res) => {
      // Health probes get a plain answer; only the chat request streams.
      if (req.url !== '/v1/chat/completions') return res.end()
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const pump = () => {
        while (written < events) {
          written++
          if (!res.write(event)) {
            blocked()
            res.once('drain', pump)
            return
          }
        }
        finished = true
        res.end('data: [DONE]\n\n')
      }
      pump()
    })
    backend.listen(0, '127.0.0.1')
    await once(backend, 'listening')
    cleanups.push(() => new Promise((resolve) => backend.close(resolve)))
    const gw = await gateway({ backends: [{ url: `http://127.0.0.1:${(backend.address() as AddressInfo).port}` }] })

    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages, stream: true, stream_options: { include_usage: true } }),
    })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    // The client reads nothing more: the backend must be told to wait. Its first blocked
    // write comes after a few socket buffers filled, whatever the gateway does; so wait
    // until it stopped getting anywhere while the gateway went on answering other requests.
    await backendBlocked
    const stalledAt = await untilStalled(() => written, async () => (await fetch(`${gw.url}/healthz`)).text(), 'the events the backend wrote')
    // The sockets on the way hold a few MiB; a gateway that buffered the stream would
    // have let the backend write all ~32 MB and finish.
    expect(stalledAt * Buffer.byteLength(event)).toBeLessThan(STALLED_BYTES_CAP)
    expect(finished).toBe(false)
    let bytes = 0
    let tail = ''
    for (let part = await reader.read(); !part.done; part = await reader.read()) {
      bytes += part.value.length
      tail = (tail + Buffer.from(part.value).toString()).slice(-100)
    }
    expect(bytes).toBe(Buffer.byteLength(event) * events + 'data: [DONE]\n\n'.length)
    expect(tail.endsWith('"}}]}\n\ndata: [DONE]\n\n')).toBe(true)
  })
})

describe('the body a backend receives', () => {
  // A backend that keeps the bytes it got and answers a minimal completion.
  async function recordingBackend(): Promise<{ url: string; bodies: string[] }> {
    const bodies: string[] = []
    const server = createServer((request, response) => {
      const parts: Buffer[] = []
      request.on('data', (part: Buffer) => parts.push(part))
      request.on('end', () => {
        // The gateway's health checks and load probes come here too.
        if (request.method === 'POST') bodies.push(Buffer.concat(parts).toString('utf8'))
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ id: 'c', object: 'chat.completion', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies }
  }

  it("is the client's bytes, digits and escapes as sent, with the served name and the gateway's members spliced in", async () => {
    const backend = await recordingBackend()
    const gw = await gateway({ backends: [{ url: backend.url }] })
    // A seed past 2^53 that JSON.parse rounds, a float written 1.0, an escape: a re-serialized body would change all three.
    const sent = '{"model": "m", "seed": 1234567890123456789, "temperature": 1.0, "messages": [{"role": "user", "content": "caf\\u00e9"}], "max_tokens": 4}'

    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'x-request-id': 'req-42' },
      body: sent,
    })

    expect(response.status).toBe(200)
    expect(backend.bodies).toEqual([
      '{"model": "stand-in-model", "seed": 1234567890123456789, "temperature": 1.0, "messages": [{"role": "user", "content": "caf\\u00e9"}], "max_tokens": 4,"request_id":"req-42","max_completion_tokens":4}',
    ])
  })

  // Regression (interface review, session 24): a model sent twice made the gateway serialize the parsed body, rounding the seed.
  it('with a model sent twice, gives both the served name and leaves the rest as sent', async () => {
    const backend = await recordingBackend()
    const gw = await gateway({ backends: [{ url: backend.url }] })
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'x-request-id': 'req-44' },
      body: '{"model":"m","model":"m","seed":9007199254740993,"messages":[{"role":"user","content":"hi"}]}',
    })
    expect(response.status).toBe(200)
    expect(backend.bodies).toEqual(['{"model":"stand-in-model","model":"stand-in-model","seed":9007199254740993,"messages":[{"role":"user","content":"hi"}],"request_id":"req-44"}'])
  })

  it('adds stream_options for a stream that did not ask for usage, and the model when the client left it out', async () => {
    const backend = await recordingBackend()
    const gw = await gateway({ backends: [{ url: backend.url }] })
    await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'x-request-id': 'req-43' },
      body: '{"messages":[{"role":"user","content":"hi"}],"stream":true}',
    }).then((r) => r.text())

    expect(JSON.parse(backend.bodies[0]!)).toEqual({
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      model: 'stand-in-model',
      request_id: 'req-43',
      stream_options: { include_usage: true, continuous_usage_stats: false },
    })
  })
})
