/**
 * Streaming edge cases of the chat path (DESIGN.md chat path steps 4 and 5),
 * each against a raw node:http backend on port 0 that plays the case out
 * exactly: SSE framing cut at every byte, lone-CR framing, backends that die
 * mid-stream in different ways, a client that leaves while the backend is
 * held back, answers to a stream request that are not a stream, and the
 * headers of a streamed answer.
 *
 * Model "m" has one slot and a short max wait, so a slot that was not given
 * back turns the follow-up request into a 503.
 *
 * Regression found here: lone-CR framing (which the splitter accepts) kept
 * each event back until the backend's next bytes, and lost the last event
 * before a mid-stream failure (src/proxy/sse-events.ts takeEndedAtCR).
 */
import { EventEmitter, once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { connect, Server, type AddressInfo, type Socket } from 'node:net'
import { describe, expect, it, vi } from 'vitest'
import { SseRelay } from '../../src/proxy/sse-relay.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { deferred } from '../support/deferred.js'
import { listenForTest } from '../support/listen.js'
import { exactRequest, expectErrorBody, type RawResponse } from '../support/raw-http.js'
import { scrapeMetricSum, until } from '../support/metrics.js'
import { GOOD_COMPLETION } from '../support/good-completion.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()
const messages = [{ role: 'user', content: 'Hello there' }]


type Answer = (res: ServerResponse, req: IncomingMessage) => void

interface Backend {
  readonly url: string
  /** How the next chat requests are answered; null: GOOD_COMPLETION. */
  answer: Answer | null
}

async function backend(answer: Answer): Promise<Backend> {
  const created: Backend = { url: '', answer }
  const server = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
    req.resume()
    req.on('end', () => {
      if (created.answer !== null) return created.answer(res, req)
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(GOOD_COMPLETION) }).end(GOOD_COMPLETION)
    })
  })
  return Object.assign(created, { url: await listenForTest(server, cleanups) })
}

function gateway(url: string, model: Record<string, unknown> = {}): Promise<TestGateway> {
  return cleanups.gateway({
    server: { shutdown_grace_ms: 200 },
    auth: { keys: [key.entry] },
    models: [
      {
        name: 'm',
        served_name: 'served-m',
        max_concurrency_per_backend: 1,
        retries: 0,
        queue: { max_wait_ms: 1000 },
        // Passive ejection would turn the follow-up into a 503 for another reason than a lost slot.
        health: { unhealthy_after: 10 },
        backends: [{ url, name: 'b' }],
        ...model,
      },
    ],
  })
}

function post(gw: TestGateway, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<RawResponse> {
  return exactRequest(gw.url, {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages, ...body }),
    timeoutMs: 5000,
  })
}

/** The slot is free, nothing is in flight, and the next request gets the backend's good answer. */
async function expectSlotFree(gw: TestGateway, b: Backend): Promise<void> {
  await until(async () => (await scrapeMetricSum(gw.url, 'sluice_inflight_requests', { model: 'm' })) === 0, 'nothing in flight', 2000)
  b.answer = null
  const next = await post(gw, {})
  expect(next.status).toBe(200)
  expect(next.text).toBe(GOOD_COMPLETION)
}

const chunkHeader = '"id":"c","object":"chat.completion.chunk","created":1,"model":"served-m"'
const contentChunk = (content: string, usageNull: boolean) =>
  `{${chunkHeader},"choices":[{"index":0,"delta":{"content":"${content}"},"logprobs":null,"finish_reason":null}]${usageNull ? ',"usage":null' : ''}}`
const usageOnly = `{${chunkHeader},"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

describe('SseRelay over every way the network may cut a stream', () => {
  const framings = {
    LF: ['data: {"n":1}\n\n', ': ping\n\n', 'data: a\ndata: b\n\n', 'data: [DONE]\n\n'],
    CRLF: ['data: {"n":1}\r\n\r\n', ': ping\r\n\r\n', 'data: a\r\ndata: b\r\n\r\n', 'data: [DONE]\r\n\r\n'],
    CR: ['data: {"n":1}\r\r', ': ping\r\r', 'data: a\rdata: b\r\r', 'data: [DONE]\r\r'],
    mixed: ['data: {"n":1}\r\n\n', 'data: a\r\r', 'data: b\n\n', ': ping\r\n\n', 'data: c\rdata: d\r\r', 'data: [DONE]\r\r'],
  } as const

  // Regression: an event whose blank line ended in a lone CR at the end of a
  // network chunk was held until the backend's next bytes (a CR might be half
  // of a CRLF): with lone-CR framing every event reached the client one event
  // late, and the last one never when the backend then failed.
  for (const [name, events] of Object.entries(framings)) {
    it(`${name}: each event is out by the push of its last byte, and every byte arrives unchanged`, () => {
      const stream = Buffer.from(events.join(''))
      const relay = new SseRelay(false)
      let sent = Buffer.alloc(0)
      let ends = 0
      for (let at = 0; at < stream.length; at++) {
        const { out } = relay.push(stream.subarray(at, at + 1))
        if (out !== null) sent = Buffer.concat([sent, out])
        const eventEnd = events.slice(0, ends + 1).join('').length
        if (at + 1 < eventEnd) continue
        // The event ends here: everything up to here has been sent.
        expect(sent.toString('latin1'), `after byte ${at}`).toBe(stream.subarray(0, at + 1).toString('latin1'))
        ends++
      }
      expect(ends).toBe(events.length)
      expect(relay.end()).toBeNull()
    })
  }

  it('strips injected usage the same, byte for byte, wherever a CRLF stream is cut (also between CR and LF)', () => {
    const stream = `data: ${contentChunk('Hi', true)}\r\n\r\n: ping\r\n\r\ndata: ${usageOnly}\r\n\r\ndata: [DONE]\r\n\r\n`
    const expected = `data: ${contentChunk('Hi', false)}\r\n\r\n: ping\r\n\r\ndata: [DONE]\r\n\r\n`
    const bytes = Buffer.from(stream)
    for (let cut = 0; cut <= bytes.length; cut++) {
      const relay = new SseRelay(true)
      const parts = [relay.push(bytes.subarray(0, cut)).out, relay.push(bytes.subarray(cut)).out, relay.end()]
      const sent = Buffer.concat(parts.filter((p): p is Buffer => p !== null)).toString('latin1')
      expect(sent, `cut at ${cut}`).toBe(expected)
      expect(relay.usage, `cut at ${cut}`).toEqual({ prompt: 3, completion: 1 })
    }
  })
})

describe('a backend that frames its events with lone CRs', () => {
  // Regression: see the SseRelay cases above; this is the same through real HTTP.
  it('an event reaches the client before the backend sends anything more', async () => {
    const clientHasFirst = deferred()
    const b = await backend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`data: ${contentChunk('Hi', false)}\r\r`)
      // The next event is sent only once the client holds the first: a gateway that waits for it waits for good.
      void clientHasFirst.promise.then(() => res.end('data: [DONE]\r\r'))
    })
    const gw = await gateway(b.url)

    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages, stream: true }),
      signal: AbortSignal.timeout(3000),
    })
    const reader = response.body!.getReader()
    let received = ''
    while (!received.endsWith('\r\r')) {
      const { done, value } = await reader.read()
      if (done) break
      received += Buffer.from(value).toString('latin1')
    }
    expect(received).toBe(`data: ${contentChunk('Hi', false)}\r\r`)
    clientHasFirst.resolve()
    for (let part = await reader.read(); !part.done; part = await reader.read()) received += Buffer.from(part.value).toString('latin1')

    expect(received).toBe(`data: ${contentChunk('Hi', false)}\r\rdata: [DONE]\r\r`)
    await expectSlotFree(gw, b)
  })

  it('a backend that dies right after an event: the client gets that event, then the error event and [DONE]', async () => {
    const b = await backend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`data: ${contentChunk('Hi', false)}\r\r`, () => res.socket?.destroy())
    })
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    const first = `data: ${contentChunk('Hi', false)}\r\r`
    expect(raw.text.startsWith(first), raw.text).toBe(true)
    const after = raw.text.slice(first.length).split('\n\n')
    expect(after.slice(1)).toEqual(['data: [DONE]', ''])
    expect(JSON.parse(after[0]!.slice('data: '.length))).toMatchObject({ error: { type: 'upstream_error', code: 'upstream_bad_response', param: null } })
    await expectSlotFree(gw, b)
  })
})

const FIRST_EVENT = `data: ${contentChunk('Hi', false)}\n\n`
const CHUNKED_HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'
const hex = (text: string) => Buffer.byteLength(text).toString(16)

const DEATHS: readonly { readonly name: string; readonly answer: Answer; readonly before: string }[] = [
  {
    name: 'the connection is reset (RST) after the first event',
    answer: (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(FIRST_EVENT, () => res.socket?.resetAndDestroy())
    },
    before: FIRST_EVENT,
  },
  {
    name: 'the chunked framing breaks (a chunk size that is not hex) after the first event',
    answer: (res) => void res.socket!.write(`${CHUNKED_HEAD}${hex(FIRST_EVENT)}\r\n${FIRST_EVENT}\r\nzz\r\n`),
    before: FIRST_EVENT,
  },
  {
    name: 'the connection closes without the last chunk (0) after the first event',
    answer: (res) => void res.socket!.end(`${CHUNKED_HEAD}${hex(FIRST_EVENT)}\r\n${FIRST_EVENT}\r\n`),
    before: FIRST_EVENT,
  },
  {
    name: 'Content-Length promises more than comes',
    answer: (res) => void res.socket!.end(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1000\r\n\r\n${FIRST_EVENT}`),
    before: FIRST_EVENT,
  },
]

describe('a backend that dies mid-stream', () => {
  it.each(DEATHS)('$name: 200, what came, the error event and [DONE]; counted once as mid_stream; slot freed', async ({ answer, before }) => {
    const b = await backend(answer)
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    expect(raw.headers['content-type']).toMatch(/^text\/event-stream/)
    expect(raw.text.startsWith(before), raw.text).toBe(true)
    const events = raw.text.slice(before.length).split('\n\n')
    expect(events).toHaveLength(3)
    expect(events.slice(1)).toEqual(['data: [DONE]', ''])
    const error = JSON.parse(events[0]!.slice('data: '.length)) as { error: Record<string, unknown> }
    expect(Object.keys(error.error).sort()).toEqual(['code', 'message', 'param', 'type'])
    expect(error.error).toMatchObject({ type: 'upstream_error', code: 'upstream_bad_response', param: null })

    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '200' })) === 1, 'the stream counted as a 200', 2000)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'mid_stream' })).toBe(1)
    await expectSlotFree(gw, b)
  })
})

// Until 2026-11-28 this was a 200 holding only the error event: the head went out before any event did.
// The half event ended cleanly was one still (session 23 stream review): the head went out for its bytes, then dropped.
// A gzipped stream (asked for identity) went out under its gzip label holding the gateway's plain error event.
describe('a backend whose stream fails after its headers, before any event', () => {
  const CASES: readonly { readonly name: string; readonly answer: Answer }[] = [
    { name: 'the connection closes', answer: (res) => void res.socket!.end(CHUNKED_HEAD) },
    { name: 'half an event, then the stream ends cleanly', answer: (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: {"id":"x","choi') },
    { name: 'a whole stream, gzipped though identity was asked for', answer: (res) => res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }).end(gzipSync(`${FIRST_EVENT}data: [DONE]\n\n`)) },
  ]

  it.each(CASES)('$name: nothing reached the client, so the failure is its answer (502 upstream_bad_response); slot freed', async ({ answer }) => {
    const b = await backend(answer)
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(502)
    expect(raw.headers['content-type']).toMatch(/^application\/json/)
    const { error } = JSON.parse(raw.text) as { error: Record<string, unknown> }
    expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type'])
    expect(error).toMatchObject({ type: 'upstream_error', code: 'upstream_bad_response', param: null })

    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '502' })) === 1, 'the answer counted as a 502', 2000)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'mid_stream' })).toBe(0)
    await expectSlotFree(gw, b)
  })
})

// vLLM (uvicorn) sends a stream's headers as it accepts the request, and its first event after queueing
// and prefill. Until 2026-11-28 that wait was timed by idle_ms (a black-box review: a first token later
// than idle_ms, within first_byte_ms, cut the stream), and a late first event ended a 200 with an error event.
describe('a backend that sends its headers at once and its first event late', () => {
  const headersThen = (first: ((res: ServerResponse) => void) | null, delayMs: number): Answer => {
    return (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.flushHeaders()
      // The delay is the scenario: the backend's queue and prefill.
      if (first !== null) setTimeout(() => first(res), delayMs)
    }
  }

  it('a first event later than idle_ms but within first_byte_ms: the whole stream, 200', async () => {
    // 1.6 s: past undici's own body timeout (idle_ms, on timers that tick every ~0.5 s) even when it fires late.
    const b = await backend(headersThen((res) => res.end(`${FIRST_EVENT}data: [DONE]\n\n`), 1600))
    const gw = await gateway(b.url, { timeouts: { first_byte_ms: 3000, idle_ms: 150 } })

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    expect(raw.text).toBe(`${FIRST_EVENT}data: [DONE]\n\n`)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm' })).toBe(0)
  })

  it('no event within first_byte_ms: 504 upstream_timeout, as for late headers; the backend is let go of; slot freed', async () => {
    const closed = deferred()
    const b = await backend((res, req) => {
      req.socket.once('close', closed.resolve)
      headersThen(null, 0)(res, req)
    })
    const gw = await gateway(b.url, { timeouts: { first_byte_ms: 300, idle_ms: 5000 } })

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(504)
    expect(expectErrorBody(raw)).toMatchObject({ type: 'upstream_timeout', code: 'upstream_timeout', param: null })
    await closed.promise
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'timeout' })).toBe(1)
    await until(() => gw.logLines().some((l) => l.msg === 'request completed' && l.route === 'chat'), 'the access line', 2000)
    expect(gw.logLines().find((l) => l.msg === 'request completed' && l.route === 'chat')).toMatchObject({ status: 504, error_code: 'upstream_timeout', backend: 'b' })
    // Regression (metrics review): the warn line's cause said "Headers Timeout Error", though the headers had come.
    expect(gw.logLines().find((l) => l.level === 40 && String(l.msg).includes('did not answer in time'))?.cause).toMatch(/^Headers came, but no body byte/)
    await expectSlotFree(gw, b)
  })

  // Regression (black-box review): such a request was charged an estimate of its prompt's tokens, though
  // the client got nothing but the error, while one failing before the headers was charged nothing.
  it('part of a first event, then silence past idle_ms: 504, and the key is charged no tokens', async () => {
    const b = await backend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: {"cho')
    })
    const gw = await gateway(b.url, { timeouts: { first_byte_ms: 5000, idle_ms: 200 } })

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(504)
    expect(expectErrorBody(raw)).toMatchObject({ type: 'upstream_timeout', code: 'upstream_timeout' })
    await until(() => gw.logLines().some((l) => l.msg === 'request completed' && l.route === 'chat'), 'the access line', 2000)
    expect(gw.logLines().find((l) => l.msg === 'request completed' && l.route === 'chat')).toMatchObject({ status: 504, prompt_tokens: null, completion_tokens: null })
    expect(await scrapeMetricSum(gw.url, 'sluice_tokens_total', { model: 'm' })).toBe(0)
  })

  // Regression (stream review): the first-byte deadline ended at the body's first byte, so a backend
  // trickling a byte of its first event more often than idle_ms held the client (sent nothing) and a slot for good.
  it('part of a first event trickled a byte at a time: 504 at first_byte_ms, the backend let go of, slot freed', async () => {
    const closed = deferred()
    const b = await backend((res, req) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: {"cho')
      const trickle = setInterval(() => res.write(' '), 50)
      req.socket.once('close', () => {
        clearInterval(trickle)
        closed.resolve()
      })
    })
    const gw = await gateway(b.url, { timeouts: { first_byte_ms: 300, idle_ms: 5000 } })

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(504)
    expect(expectErrorBody(raw)).toMatchObject({ type: 'upstream_timeout', code: 'upstream_timeout' })
    expect(raw.headers['x-should-retry']).toBe('false')
    await closed.promise
    await until(() => gw.logLines().some((l) => l.level === 40 && String(l.cause).startsWith('Body bytes came, but nothing to send')), 'the warn line', 2000)
    await expectSlotFree(gw, b)
  })

  it('a silence longer than idle_ms after the first event still ends the stream with an upstream_timeout event', async () => {
    const b = await backend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(FIRST_EVENT)
    })
    const gw = await gateway(b.url, { timeouts: { first_byte_ms: 5000, idle_ms: 200 } })

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    expect(raw.text.startsWith(FIRST_EVENT)).toBe(true)
    const [error, done] = raw.text.slice(FIRST_EVENT.length).split('\n\n')
    expect(JSON.parse(error!.slice('data: '.length))).toMatchObject({ error: { code: 'upstream_timeout' } })
    expect(done).toBe('data: [DONE]')
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'mid_stream' })).toBe(1)
  })
})

// DESIGN.md: retry on another backend only before the first byte reached the client. The head waits for
// the first event, so a backend that hangs up between its headers and that event is retried too.
describe('a backend that hangs up after its headers, before any event, with another backend to try', () => {
  it('the request is retried there: every client gets the whole stream; the failure is counted as a reset', async () => {
    const dies = await backend((res) => void res.socket!.end(CHUNKED_HEAD))
    const good = await backend((res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`${FIRST_EVENT}data: [DONE]\n\n`))
    const gw = await gateway(dies.url, { retries: 1, backends: [{ url: dies.url, name: 'b' }, { url: good.url, name: 'good' }] })

    // Round robin: one of two requests in a row starts on the backend that dies.
    for (let i = 0; i < 2; i++) {
      const raw = await post(gw, { stream: true })
      expect(raw.status).toBe(200)
      expect(raw.text).toBe(`${FIRST_EVENT}data: [DONE]\n\n`)
    }
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'reset' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm' })).toBe(1)
  })
})

describe('a backend that reports an error inside its stream (vLLM, when generation fails after the 200)', () => {
  const shapes = [
    { name: 'vLLM >= 0.10.1', data: '{"error": {"message": "engine failed", "type": "InternalServerError", "param": null, "code": 500}}' },
    { name: 'vLLM < 0.10.1', data: '{"object": "error", "message": "engine failed", "type": "InternalServerError", "param": null, "code": 500}' },
  ]
  it.each(shapes)('$name: the client gets every byte unchanged; counted as error_event, warned about, and the 200 line has error_code', async ({ data }) => {
    const stream = `data: ${contentChunk('Hi', false)}\n\ndata: ${data}\n\ndata: [DONE]\n\n`
    const b = await backend((res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(stream))
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true, stream_options: { include_usage: true } })

    expect(raw.status).toBe(200)
    expect(raw.text).toBe(stream)
    await until(() => gw.logLines().some((line) => line.msg === 'request completed' && line.route === 'chat'), 'the access line', 2000)
    expect(gw.logLines().find((line) => line.msg === 'request completed' && line.route === 'chat')).toMatchObject({ status: 200, backend: 'b', error_code: 'upstream_error_event' })
    expect(gw.logLines().find((line) => line.msg === 'backend reported an error inside its stream')).toMatchObject({ level: 40, backend: 'b', error_type: 'InternalServerError', error_status: 500 })
    expect(gw.logText()).not.toContain('engine failed')
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b', reason: 'error_event' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm' })).toBe(1)
    await expectSlotFree(gw, b)
  })
})

describe('a backend that sends [DONE] and then keeps its stream open', () => {
  // Regression: the client's stream stayed open until idle_ms (60 s) with the
  // backend's, and then got an error event after its [DONE], counted as a
  // mid_stream failure of a backend whose answer was whole.
  it.each([
    { name: 'in one chunk', writes: [`${FIRST_EVENT}data: [DONE]\n\n`] },
    { name: '[DONE] in a chunk of its own', writes: [FIRST_EVENT, 'data: [DONE]\n\n'] },
    // Regression (audit): [DONE] counted only as the last event of a chunk: these ended in an error event after it.
    { name: 'a comment after [DONE] in the same chunk', writes: [`${FIRST_EVENT}data: [DONE]\n\n: ping\n\n`] },
    { name: 'one more blank line after [DONE]', writes: [`${FIRST_EVENT}data: [DONE]\n\n\n`] },
  ])('$name: the client gets the whole stream at once, the slot is free, the backend is let go of; no upstream error', async ({ writes }) => {
    let backendClosed!: Promise<unknown>
    let backendEnded = false
    const b = await backend((res) => {
      backendClosed = once(res, 'close')
      res.on('finish', () => (backendEnded = true))
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const next = (at: number): void => void (at < writes.length && res.write(writes[at]!, () => next(at + 1)))
      next(0)
    })
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    expect(raw.text).toBe(`${FIRST_EVENT}data: [DONE]\n\n`)
    expect(backendEnded).toBe(false)
    await expectSlotFree(gw, b)
    await backendClosed
    expect(backendEnded).toBe(false)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm' })).toBe(0)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '200' })).toBe(2)
  })
})

/** A backend that writes events as fast as it may; `blocked` once its writes back up, `closed` when its response goes. */
async function pumpingBackend(): Promise<Backend & { readonly blocked: Promise<void>; closed: () => Promise<unknown>; finished: () => boolean }> {
  const event = `data: ${contentChunk('x'.repeat(4000), false)}\n\n`
  const blocked = deferred()
  let closed!: Promise<unknown>
  let finished = false
  const b = await backend((res) => {
    closed = once(res, 'close')
    res.on('finish', () => (finished = true))
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const pump = (): void => {
      for (;;) {
        if (res.write(event)) continue
        blocked.resolve()
        return void res.once('drain', pump)
      }
    }
    pump()
  })
  return Object.assign(b, { blocked: blocked.promise, closed: () => closed, finished: () => finished })
}

/** A client that sends a request (a stream unless told) and never reads its answer. */
function nonReadingClient(gw: TestGateway, stream = true) {
  const body = JSON.stringify({ model: 'm', messages, stream })
  const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
  cleanups.push(() => socket.destroy())
  socket.pause()
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key.token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  return socket
}

describe('a client that leaves while its slow reading holds the backend back', () => {
  it('the upstream request is aborted, the slot freed, and the request logged as 499 (no upstream error)', async () => {
    const b = await pumpingBackend()
    const gw = await gateway(b.url)

    // The client never reads: the gateway's writes back up, and so must the backend's.
    const socket = nonReadingClient(gw)
    await b.blocked
    socket.destroy()

    await b.closed()
    expect(b.finished()).toBe(false)
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '499' })) === 1, 'the request logged as 499', 2000)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: 'm' })).toBe(0)
    await expectSlotFree(gw, b)
  })
})

describe('a client that stops reading its stream and stays connected', () => {
  // Regression (audit): the backend was paused, undici's idle timeout does not run on a paused
  // exchange, and nothing else ended it: four such sockets held a model's four slots for good.
  it('is let go of after idle_ms of reading nothing: the upstream aborted, the slot freed, logged 499', async () => {
    const b = await pumpingBackend()
    const gw = await gateway(b.url, { timeouts: { idle_ms: 300 } })

    // Connected, and never reads.
    nonReadingClient(gw)
    await b.blocked

    await b.closed()
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '499' })) === 1, 'the request logged as 499', 2000)
    expect(gw.logLines().some((line) => line.msg === 'client read nothing of its stream for idle_ms: connection closed')).toBe(true)
    await expectSlotFree(gw, b)
  })
})

/**
 * The next connection the gateway at `url` accepts hands its bytes to a socket that never takes
 * them: they stay in Node's buffer, as when a client reading nothing has filled the kernel's (a few
 * MB on loopback, too uncertain a size to aim a stream's last bytes at).
 */
function stallNextAcceptedConnection(url: string): void {
  const port = Number(new URL(url).port)
  const emit = EventEmitter.prototype.emit
  const never = (): void => undefined
  const spy = vi.spyOn(Server.prototype, 'emit').mockImplementation(function (this: Server, event: string | symbol, ...args: unknown[]) {
    if (event === 'connection' && (this.address() as AddressInfo | null)?.port === port) {
      Object.assign(args[0] as Socket, { _write: never, _writev: never })
      spy.mockRestore()
    }
    return emit.call(this, event, ...args)
  })
  cleanups.push(() => spy.mockRestore())
}

describe('a client that reads nothing of a stream whose end the gateway holds', () => {
  // Regression (session 23 stream review): the stalled-client timer was armed only by a write
  // refused before [DONE]; the end's bytes, stuck behind a client reading nothing, held the slot
  // (and the key's share) for as long as the client stayed connected.
  it('is let go of after idle_ms without progress, and the slot freed', async () => {
    const b = await backend((res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`data: ${contentChunk('Hi', false)}\n\ndata: [DONE]\n\n`))
    const gw = await gateway(b.url, { timeouts: { idle_ms: 300 } })
    stallNextAcceptedConnection(gw.url)

    const socket = nonReadingClient(gw)

    await until(() => gw.logLines().some((line) => line.msg === 'client read nothing of its stream for idle_ms: connection closed'), 'the connection let go of', 5000)
    socket.resume()
    await once(socket, 'close')
    await expectSlotFree(gw, b)
  })
})

describe('a client that reads nothing of a whole answer and stays connected', () => {
  // Regression (audit): three unread 30 MB answers held 214 MiB, with nothing to end them.
  it('is let go of after idle_ms without progress: the answer dropped, the connection closed; the slot was freed when the answer was read', async () => {
    const big = JSON.stringify({ ...(JSON.parse(GOOD_COMPLETION) as object), padding: 'x'.repeat(20 * 1024 * 1024) })
    const b = await backend((res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) }).end(big))
    const gw = await gateway(b.url, { timeouts: { idle_ms: 300 } })

    const socket = nonReadingClient(gw, false)

    await until(() => gw.logLines().some((line) => line.msg === 'client read nothing of its answer for idle_ms: connection closed'), 'the connection let go of', 5000)
    // The answer was ended (the access line keeps its 200); what the client had not read is dropped with the connection.
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { model: 'm', status: '200' })) === 1, 'the request logged', 2000)
    socket.resume()
    await once(socket, 'close')
    await expectSlotFree(gw, b)
  })
})

describe('a stream request whose answer is not an event stream', () => {
  const OLD_VLLM_ERROR = '{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}'
  const CASES: readonly { readonly name: string; readonly status: number; readonly type: string; readonly body: string }[] = [
    { name: 'a 400 JSON error (vLLM before 0.10.1)', status: 400, type: 'application/json', body: OLD_VLLM_ERROR },
    { name: 'a 500 labelled as an event stream', status: 500, type: 'text/event-stream', body: 'data: {"error":{"message":"boom"}}\n\n' },
    { name: 'a 200 whole completion', status: 200, type: 'application/json', body: GOOD_COMPLETION },
  ]

  it.each(CASES)('$name: passed on with its status and bytes, framed by Content-Length, with the request id', async ({ status, type, body }) => {
    const b = await backend((res) => res.writeHead(status, { 'content-type': type, 'x-request-id': 'from-backend' }).end(body))
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true }, { 'x-request-id': 'mine-1' })

    expect(raw.status).toBe(status)
    expect(raw.headers['content-type']).toBe(type)
    expect(raw.headers['x-request-id']).toBe('mine-1')
    expect(raw.headers['content-length']).toBe(String(Buffer.byteLength(body)))
    expect(raw.text).toBe(body)
    await expectSlotFree(gw, b)
  })

  it('a 200 JSON answer with an empty body is a 502 upstream_bad_response', async () => {
    const b = await backend((res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': 0 }).end())
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(502)
    expect(expectErrorBody(raw)).toMatchObject({ type: 'upstream_error', code: 'upstream_bad_response' })
    await expectSlotFree(gw, b)
  })
})

describe('a stream whose bytes arrive one at a time, CRLF-framed, with a comment and a usage chunk over two data: lines', () => {
  const EVENTS = [
    `data: ${contentChunk('', true).replace('"content":""', '"role":"assistant","content":""')}\r\n\r\n`,
    ': ping\r\n\r\n',
    `data: ${contentChunk('Hi', true)}\r\n\r\n`,
    `data: ${usageOnly.replace('"choices":[],', '"choices":[],\r\ndata: ')}\r\n\r\n`,
    'data: [DONE]\r\n\r\n',
  ]
  const STREAM = Buffer.from(EVENTS.join(''))

  const byteByByte: Answer = (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    let at = 0
    // Each byte its own write, the next only once the previous one left.
    const step = (): void => {
      if (at >= STREAM.length) return void res.end()
      res.write(STREAM.subarray(at, ++at), () => setImmediate(step))
    }
    step()
  }

  it('the client that did not ask for usage gets the stream without it; the tokens are counted', async () => {
    const b = await backend(byteByByte)
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true })

    expect(raw.status).toBe(200)
    const expected = [EVENTS[0]!.replace(',"usage":null', ''), EVENTS[1], EVENTS[2]!.replace(',"usage":null', ''), EVENTS[4]].join('')
    expect(raw.text).toBe(expected)
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_tokens_total', { model: 'm', kind: 'prompt' })) === 3, 'prompt tokens counted', 2000)
    expect(await scrapeMetricSum(gw.url, 'sluice_tokens_total', { model: 'm', kind: 'completion' })).toBe(1)
  })

  it('the client that asked for usage gets every byte unchanged; the tokens are counted', async () => {
    const b = await backend(byteByByte)
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true, stream_options: { include_usage: true } })

    expect(raw.status).toBe(200)
    expect(raw.body.equals(STREAM)).toBe(true)
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_tokens_total', { model: 'm', kind: 'completion' })) === 1, 'completion tokens counted', 2000)
    expect(await scrapeMetricSum(gw.url, 'sluice_tokens_total', { model: 'm', kind: 'prompt' })).toBe(3)
  })
})

describe('the headers of a streamed answer', () => {
  it("are the backend's less hop-by-hop ones and its framing, with the gateway's request id", async () => {
    const body = `${FIRST_EVENT}data: [DONE]\n\n`
    const b = await backend((res) => {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'content-length': Buffer.byteLength(body),
        connection: 'x-hop, keep-alive',
        'x-hop': 'named by Connection',
        'keep-alive': 'timeout=5',
        'x-request-id': 'from-backend',
        'x-backend-note': 'kept',
      })
      res.end(body)
    })
    const gw = await gateway(b.url)

    const raw = await post(gw, { stream: true }, { 'x-request-id': 'mine-2' })

    expect(raw.status).toBe(200)
    expect(raw.text).toBe(body)
    expect(raw.headers).toMatchObject({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-request-id': 'mine-2',
      'x-backend-note': 'kept',
      'transfer-encoding': 'chunked',
    })
    for (const name of ['content-length', 'x-hop', 'keep-alive']) expect(raw.headers[name], name).toBeUndefined()
  })
})
