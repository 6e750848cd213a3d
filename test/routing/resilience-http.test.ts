/**
 * Routing and failover end to end: a real gateway on port 0 in front of real
 * stand-in backends (and tiny node:http servers for answers the stand-in does
 * not give), each closed in afterEach. Waits poll observable state (/metrics,
 * /readyz, what backends received) in bounded loops.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { isConfirmedWith } from '../../src/routing/health-state.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { scrape, scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

const gateway = (model: Record<string, unknown>) => cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', served_name: 'stand-in-model', ...model }] })

interface TinyServer {
  readonly url: string
  /** Chat requests received (anything but the health and metrics probes). */
  readonly chatRequests: () => number
}

/** A node:http backend whose chat answer is `answer`; /health answers `health()` (200), /metrics 404. */
async function tinyServer(answer: (req: IncomingMessage, res: ServerResponse) => void, health: () => number = () => 200, port = 0): Promise<TinyServer> {
  let chats = 0
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return void res.writeHead(health(), { 'content-length': 0 }).end()
    if (req.method !== 'POST') return void res.writeHead(404, { 'content-length': 0 }).end()
    req.resume()
    req.on('end', () => {
      chats++
      answer(req, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, chatRequests: () => chats }
}

const messages = [{ role: 'user', content: 'Hello there' }]

/**
 * Whether `sluice_backend_up` for the backend is 1 this moment, read from the
 * gateway's state (same process) so a backend can record it as each health check
 * arrives: each check is sent only after the previous one's result was taken in.
 */
function upNow(gw: TestGateway | undefined, backend: string): boolean | null {
  if (gw === undefined) return null
  const b = gw.context.models.get('m')!.backend(backend)
  return isConfirmedWith(b.health, b.shared, gw.context.clock.now())
}

/** A chat completion, for a tiny server to answer with. */
function completion(res: ServerResponse): void {
  const body = JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'stand-in-model', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
}

async function post(gw: TestGateway, body: Record<string, unknown> = {}, signal?: AbortSignal): Promise<{ status: number; text: string }> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages, ...body }),
    signal,
  })
  return { status: response.status, text: await response.text() }
}

const POLL_MS = 20
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Polls `check` every POLL_MS until it holds, at most `maxPolls` times; returns the polls it took, or null.
 * The tests here give 500 (10 s and more), a bound only a failure reaches: at 100, "loses no request"
 * failed once while other work loaded the 2 cores.
 */
async function pollUntil(check: () => Promise<boolean> | boolean, maxPolls: number): Promise<number | null> {
  for (let polls = 1; polls <= maxPolls; polls++) {
    if (await check()) return polls
    await pause(POLL_MS)
  }
  return null
}

/** The SSE `data:` payloads of an event-stream body, in order. */
function dataEvents(text: string): string[] {
  return text
    .split('\n\n')
    .map((event) => event.trim())
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length))
}

function contentOf(text: string): string {
  return (JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content
}

describe('failover under load', () => {
  it('loses no request when a backend dies mid-run, marks it down, and takes it back after a restart', async () => {
    // A probe waits at most one interval: at 200 ms, while other work loaded the 2 cores, probes
    // of the live backends timed out too, and three requests met no healthy backend (503).
    const intervalMs = 500
    const backends = [await cleanups.standIn(), await cleanups.standIn(), await cleanups.standIn()]
    const gw = await gateway({
      retries: 2,
      health: { interval_ms: intervalMs, unhealthy_after: 2 },
      backends: backends.map((b, i) => ({ url: b.url, name: `b${i}` })),
    })
    const victim = backends[1]!
    const victimPort = Number(new URL(victim.url).port)
    const victimUp = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b1' })

    const total = 300
    const statuses: number[] = []
    // What a refused request was told, for the assertion's message.
    const refusals: string[] = []
    let next = 0
    let killed: Promise<number | null> | null = null
    const worker = async () => {
      while (next < total) {
        next++
        const answer = await post(gw)
        statuses.push(answer.status)
        if (answer.status !== 200) refusals.push(`${answer.status} ${answer.text}`)
        if (statuses.length === 100 && killed === null) {
          killed = (async () => {
            await victim.close()
            return pollUntil(async () => (await victimUp()) === 0, 500)
          })()
        }
      }
    }
    await Promise.all(Array.from({ length: 20 }, worker))

    expect(statuses).toHaveLength(total)
    expect(refusals).toEqual([])
    expect(killed).not.toBeNull()
    expect(await killed!).not.toBeNull()
    expect(victim.received.length).toBeGreaterThan(0)
    // Marked down by its failed health checks, not only ejected for a moment; the model stays ready.
    const victimHealth = () => gw.context.models.get('m')!.backend('b1').health
    expect(await pollUntil(() => !victimHealth().up, 500)).not.toBeNull()
    expect(await victimUp()).toBe(0)
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200)

    // Back after one successful check (DESIGN.md): down when the first check reaches the
    // restarted backend, up by the time the second does.
    const upAtCheck: (boolean | null)[] = []
    const restarted = await tinyServer((_req, res) => completion(res), () => (upAtCheck.push(upNow(gw, 'b1')), 200), victimPort)
    expect(await pollUntil(() => upAtCheck.length >= 2, 500)).not.toBeNull()
    expect(upAtCheck.slice(0, 2)).toEqual([false, true])
    expect(await victimUp()).toBe(1)

    const after: number[] = []
    for (let i = 0; i < 9; i++) after.push((await post(gw)).status)
    expect(after.every((s) => s === 200)).toBe(true)
    expect(restarted.chatRequests()).toBeGreaterThan(0)
  })
})

describe('coming back after an incident', () => {
  // Regression: each of the 8 resets used to count as a new ejection (cool-down
  // 64 intervals) and passing checks did not end it; now one incident is one
  // ejection and a successful check ends it (DESIGN.md).
  it('is back within a few intervals once health checks pass, however many requests failed together', async () => {
    const intervalMs = 100
    const inFlight: IncomingMessage[] = []
    // What sluice_backend_up said as each health check arrived (each passes).
    const upAtCheck: (boolean | null)[] = []
    const started: { gw?: TestGateway } = {}
    const flaky = await tinyServer(
      (req) => {
        inFlight.push(req)
        if (inFlight.length === 8) for (const held of inFlight) held.socket.destroy()
      },
      () => (upAtCheck.push(upNow(started.gw, 'flaky')), 200),
    )
    const gw = (started.gw = await gateway({ retries: 0, health: { interval_ms: intervalMs, unhealthy_after: 1 }, backends: [{ url: flaky.url, name: 'flaky' }] }))
    // Confirmed by its first check first, so the 0 below is the ejection, not "not checked yet".
    const flakyUp = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'flaky' })
    expect(await pollUntil(async () => (await flakyUp()) === 1, 500)).not.toBeNull()

    const statuses = await Promise.all(Array.from({ length: 8 }, async () => (await post(gw)).status))
    expect(statuses).toEqual(Array(8).fill(502))
    const checksBefore = upAtCheck.length
    // Ejected once for the 8 resets, by real traffic. Read from the log, not the gauge: a check
    // passing in the meantime (every 100 ms) ends the ejection, and a slow host's scrape saw 1.
    const downLines = () => gw.logLines().filter((line) => line.msg === 'backend down' && line.backend === 'flaky')
    await until(() => downLines().length > 0, 'the ejection’s backend down line')
    expect(downLines()).toHaveLength(1)
    expect(downLines()[0]!.failure).toMatch(/^real traffic/)

    // The first check after the incident passes and ends its one ejection: the backend is
    // up by the time the next check arrives (an ejection per reset lasted 64 intervals).
    expect(await pollUntil(() => upAtCheck.length >= checksBefore + 2, 500)).not.toBeNull()
    expect(upAtCheck[checksBefore + 1]).toBe(true)
    expect(await flakyUp()).toBe(1)
  })
})

describe('a stream that fails after it started', () => {
  it('ends with the error object and [DONE], frees the slot and counts a mid_stream error', async () => {
    const backend = await cleanups.standIn({ tokens: 10, fail: 'close_mid_stream' })
    const gw = await gateway({ backends: [{ url: backend.url, name: 'b0' }] })

    const { status, text } = await post(gw, { stream: true })

    expect(status).toBe(200)
    const events = dataEvents(text)
    expect(events.at(-1)).toBe('[DONE]')
    expect(JSON.parse(events.at(-2)!)).toEqual({ error: { message: expect.any(String), type: 'upstream_error', param: null, code: expect.any(String) } })
    expect(events.some((e) => e.includes('tok1'))).toBe(true)
    expect(events.some((e) => e.includes('tok5'))).toBe(false)

    expect(await pollUntil(async () => (await scrapeMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b0' })) === 0, 500)).not.toBeNull()
    expect(await scrapeMetric(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b0', reason: 'mid_stream' })).toBe(1)
  })
})

describe('a non-stream answer that breaks halfway', () => {
  // Regression: a broken stream was a passive failure of its backend, a broken JSON answer only a metric.
  it('is a 502 and a passive failure of its backend, as a broken stream is', async () => {
    const backend = await cleanups.standIn({ fail: 'close_mid_stream' })
    // Checks far apart: only the passive failure can take the backend out before the test ends.
    const gw = await gateway({ retries: 0, health: { interval_ms: 60_000, unhealthy_after: 1 }, backends: [{ url: backend.url, name: 'b0' }] })
    const up = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b0' })
    expect(await pollUntil(async () => (await up()) === 1, 500)).not.toBeNull()

    const { status, text } = await post(gw)

    expect(status).toBe(502)
    expect(JSON.parse(text)).toMatchObject({ error: { type: 'upstream_error' } })
    expect(await up()).toBe(0)
  })
})

// Regression (session 23 failover review): a success was reported at each answer's head, so every
// broken answer counted one failure and the next head reset the count: the backend was never taken out.
describe('a backend whose every answer breaks after it started', () => {
  it.each([{ stream: true }, { stream: false }])('stream $stream: out after unhealthy_after such answers in a row, as for 5xx', async ({ stream }) => {
    const backend = await cleanups.standIn({ tokens: 10, fail: 'close_mid_stream' })
    // Checks far apart: only passive failures can take the backend out before the test ends.
    const gw = await gateway({ retries: 0, health: { interval_ms: 60_000, unhealthy_after: 2 }, backends: [{ url: backend.url, name: 'b0' }] })
    const up = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b0' })
    expect(await pollUntil(async () => (await up()) === 1, 500)).not.toBeNull()

    await post(gw, { stream })
    expect(await up()).toBe(1)
    await post(gw, { stream })

    expect(await up()).toBe(0)
    expect((await post(gw, { stream })).status).toBe(503)
    // The log names the failure (it said "real traffic: status" for a reset or a cut stream).
    expect(gw.logLines().find((line) => line.msg === 'backend down')).toMatchObject({ backend: 'b0', failure: `real traffic: ${stream ? 'mid_stream' : 'reset'}` })
  })
})

// Regression (client review, session 24): the openai client's two default retries of one request that
// vLLM answers 500 (a template or tool parser raising) ejected the model's only backend: 503 for everyone.
describe("a backend's 500 answers", () => {
  it('are passed on and counted, but do not take the backend out; its 502s do', async () => {
    let status = 500
    const backend = await tinyServer((_req, res) => {
      const body = JSON.stringify({ error: { message: 'tool parser raised', type: 'InternalServerError', param: null, code: status } })
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
    const gw = await gateway({ retries: 0, health: { interval_ms: 60_000, unhealthy_after: 3 }, backends: [{ url: backend.url, name: 'only' }] })
    const up = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'only' })
    await until(async () => (await up()) === 1, 'the first check to confirm the backend')

    const answers = []
    for (let i = 0; i < 5; i++) answers.push(await post(gw))
    expect(answers.map((a) => a.status)).toEqual([500, 500, 500, 500, 500])
    expect(JSON.parse(answers[0]!.text)).toMatchObject({ error: { message: 'tool parser raised' } })
    expect(backend.chatRequests()).toBe(5)
    expect(await up()).toBe(1)
    expect(await scrapeMetric(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'only', reason: 'status_5xx' })).toBe(5)
    expect(gw.logLines().filter((line) => line.msg === 'backend down')).toEqual([])

    // The same backend answering 502 (its proxy failing) is out after unhealthy_after of them.
    status = 502
    const bad = []
    for (let i = 0; i < 3; i++) bad.push(await post(gw))
    expect(bad.map((a) => a.status)).toEqual([502, 502, 502])
    expect(await up()).toBe(0)
    expect((await post(gw)).status).toBe(503)
    expect(backend.chatRequests()).toBe(8)
  })
})

describe('an ejection that runs out before any check ends it', () => {
  // Session 23: the backend went back into rotation silently; the log read "down … down … up" for a dead one.
  it('is logged as the backend coming back, once for the incident', async () => {
    let checksHang = false
    const hung: ServerResponse[] = []
    // Chat answers 502; /health passes until told to hang: then the checks neither pass nor fail in time.
    const server = createServer((req, res) => {
      if (req.url === '/health' && checksHang) return void hung.push(res)
      req.resume()
      res.writeHead(req.url === '/health' ? 200 : 502, { 'content-length': 0 }).end()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    // unhealthy_after 10: the hung checks take ten intervals to mark it down, long after the ejection's one.
    const gw = await gateway({ retries: 0, health: { interval_ms: 1000, unhealthy_after: 10 }, backends: [{ url, name: 'b0' }] })
    const up = () => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b0' })
    expect(await pollUntil(async () => (await up()) === 1, 500)).not.toBeNull()
    checksHang = true

    // Twelve 502s at once: the tenth ejects the backend, the rest are the same incident.
    await Promise.all(Array.from({ length: 12 }, () => post(gw)))
    expect(await up()).toBe(0)

    const backUp = () => gw.logLines().filter((line) => line.msg === 'backend up' && line.backend === 'b0')
    await until(() => backUp().length > 0, 'the ejection to end', 5000)
    expect(backUp()).toEqual([expect.objectContaining({ level: 40, model: 'm', up: true, after: 'ejection ended' })])
    expect(await up()).toBe(1)
  })
})

describe('idle timeout', () => {
  it('ends a stream whose backend goes silent with an upstream_timeout error event and [DONE]', async () => {
    const chunk = (delta: Record<string, unknown>) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'stand-in-model', choices: [{ index: 0, delta, logprobs: null, finish_reason: null }] })}\n\n`
    const silent = await tinyServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      res.write(chunk({ role: 'assistant', content: '' }))
      res.write(chunk({ content: 'first ' }))
      // ...and then nothing, with the connection left open.
    })
    const gw = await gateway({ timeouts: { idle_ms: 300 }, backends: [{ url: silent.url, name: 'silent' }] })

    const startedAt = Date.now()
    // Without idle_ms the default (60 s) would apply: abort well before that.
    const { status, text } = await post(gw, { stream: true }, AbortSignal.timeout(5000))
    const tookMs = Date.now() - startedAt

    expect(status).toBe(200)
    // undici runs body timeouts on its coarse timers (about 1 s resolution), so 300 ms fires after ~1 s;
    // the signal above bounds the wait, and the error event below says which timeout ended it.
    expect(tookMs).toBeGreaterThanOrEqual(300)
    const events = dataEvents(text)
    expect(events.some((e) => e.includes('"first "'))).toBe(true)
    expect(events.at(-1)).toBe('[DONE]')
    expect(JSON.parse(events.at(-2)!)).toEqual({ error: { message: expect.any(String), type: 'upstream_timeout', param: null, code: expect.any(String) } })
    expect(await scrapeMetric(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'silent', reason: 'mid_stream' })).toBe(1)
    expect(await pollUntil(async () => (await scrapeMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'silent' })) === 0, 500)).not.toBeNull()
  })
})

describe('no healthy backend', () => {
  it('answers 503 no_healthy_backend at once instead of queueing until max_wait_ms', async () => {
    const sick = await cleanups.standIn({ fail: 'status500' })
    const gw = await gateway({
      health: { interval_ms: 100, unhealthy_after: 1 },
      queue: { max_wait_ms: 10000 },
      backends: [{ url: sick.url, name: 'sick' }],
    })

    // Down by its first failed check: before that, routing would still try it (optimistic at start),
    // and /readyz is 503 from the first moment, so it cannot tell the two apart.
    const down = await pollUntil(() => !gw.context.models.get('m')!.backend('sick').health.up, 500)
    expect(down).not.toBeNull()
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(503)
    const { status, text } = await post(gw)

    // A request that had waited in the queue would have ended as 503 queue_timeout (overloaded_error).
    expect(status).toBe(503)
    expect(JSON.parse(text)).toEqual({ error: { message: expect.any(String), type: 'service_unavailable', param: null, code: 'no_healthy_backend' } })
    expect(sick.received).toHaveLength(0)
    expect(await scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'sick' })).toBe(0)
  })
})

describe('the last backend going down with requests queued', () => {
  it('turns the waiting requests away with 503 no_healthy_backend then, not queue_timeout at max_wait_ms', async () => {
    let healthStatus = 200
    const held: ServerResponse[] = []
    const backend = await tinyServer((_req, res) => void held.push(res), () => healthStatus)
    const gw = await gateway({
      health: { interval_ms: 100, unhealthy_after: 1 },
      max_concurrency_per_backend: 1,
      queue: { max_wait_ms: 30000 },
      backends: [{ url: backend.url, name: 'only' }],
    })
    expect(await pollUntil(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 500)).not.toBeNull()
    // The one slot is taken by a request the backend holds; the next one waits in the queue.
    const running = post(gw)
    expect(await pollUntil(() => held.length === 1, 500)).not.toBeNull()
    const waiting = post(gw, {}, AbortSignal.timeout(10_000))
    expect(await pollUntil(async () => (await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })) === 1, 500)).not.toBeNull()

    healthStatus = 500
    const { status, text } = await waiting
    expect(status).toBe(503)
    expect(JSON.parse(text)).toEqual({ error: { message: 'Model "m" has no healthy backend right now.', type: 'service_unavailable', param: null, code: 'no_healthy_backend' } })
    expect(await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })).toBe(0)
    expect(backend.chatRequests()).toBe(1)

    // The request already at the backend keeps its slot and gets its answer.
    const completion = JSON.stringify({ id: 'c', object: 'chat.completion', created: 0, model: 'stand-in-model', choices: [] })
    held[0]!.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(completion) }).end(completion)
    expect(await running).toEqual({ status: 200, text: completion })
  })
})

describe('failover on backend answers', () => {
  /** One retry, round robin: the first request goes to `first`, a retry to `other`. */
  const firstThenOther = (first: { url: string }, other: { url: string }) =>
    gateway({ retries: 1, balance: 'round_robin', backends: [{ url: first.url, name: 'first' }, { url: other.url, name: 'other' }] })

  it('retries a 503 answer on another backend: every request gets the healthy backend\'s answer', async () => {
    const overloaded = await tinyServer((_req, res) => {
      const body = JSON.stringify({ error: { message: 'overloaded', type: 'ServiceUnavailableError', param: null, code: 503 } })
      res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
    const healthy = await cleanups.standIn({ tokens: 3 })
    const gw = await firstThenOther(overloaded, healthy)

    const results = []
    for (let i = 0; i < 6; i++) results.push(await post(gw))

    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200])
    expect(results.map((r) => contentOf(r.text))).toEqual(Array(6).fill('tok0 tok1 tok2 '))
    expect(healthy.received).toHaveLength(6)
    // Round robin starts with the first backend: at least one request met the 503 and was moved.
    expect(overloaded.chatRequests()).toBeGreaterThanOrEqual(1)
    // One queue wait per request, not per attempt.
    expect(await scrape(gw.url)).toMatch(/^sluice_queue_wait_seconds_count\{model="m"\} 6$/m)
    // Each attempt moved has its warn line (session 23: a retried failure left none, only the metric).
    const moved = gw.logLines().filter((line) => line.msg === 'backend attempt failed; trying another backend')
    expect(moved).toHaveLength(overloaded.chatRequests())
    expect(moved[0]).toMatchObject({ level: 40, model: 'm', backend: 'first', reason: 'status_5xx' })
  })

  // Regression: the 503's body was read to its end before the retry, so a
  // body that never ended held the client until idle_ms (60 s by default).
  it('retries a 503 whose body never ends without waiting for that body', async () => {
    const trickling = await tinyServer((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' })
      res.write('{"error": {"message": "overloaded", "detail": "')
    })
    const healthy = await cleanups.standIn({ tokens: 3 })
    const gw = await firstThenOther(trickling, healthy)

    // Round robin starts with the first backend, the trickling one. 5 s is far below the 60 s idle_ms the old code waited.
    const answer = await post(gw, {}, AbortSignal.timeout(5000))

    expect(answer.status).toBe(200)
    expect(contentOf(answer.text)).toBe('tok0 tok1 tok2 ')
    expect(trickling.chatRequests()).toBe(1)
    expect(healthy.received).toHaveLength(1)
  })

  it('does not retry a 400 answer: the client gets it byte for byte and the other backend nothing', async () => {
    const body = '{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}'
    const refusing = await tinyServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
    const other = await cleanups.standIn()
    const gw = await firstThenOther(refusing, other)

    const first = await post(gw)

    expect(first.status).toBe(400)
    expect(first.text).toBe(body)
    expect(refusing.chatRequests()).toBe(1)
    expect(other.received).toHaveLength(0)
  })
})

describe('least_loaded with backend metrics', () => {
  /** Two backends, one reporting 50 waiting in its /metrics, once the gateway has read both. */
  async function queuedAndIdle(hold: boolean) {
    const busy = await cleanups.standIn({ reportWaiting: 50, hold })
    const idle = await cleanups.standIn({ hold })
    const gw = await gateway({
      balance: 'least_loaded',
      health: { interval_ms: 100 },
      backends: [
        { url: busy.url, name: 'busy' },
        { url: idle.url, name: 'idle' },
      ],
    })
    const route = gw.context.models.get('m')!
    const waitingOf = (name: string) => gw.context.monitor.freshLoad(route.backend(name), route)?.waiting
    await until(() => waitingOf('busy') === 50 && waitingOf('idle') === 0, 'both backends’ /metrics read')
    return { busy, idle, gw }
  }

  it('steers sequential requests away from the backend that reports a long queue', async () => {
    const { busy, idle, gw } = await queuedAndIdle(false)
    for (let i = 0; i < 40; i++) expect((await post(gw)).status).toBe(200)

    expect(busy.received.length).toBeLessThanOrEqual(5)
    expect(idle.received.length).toBeGreaterThanOrEqual(35)
    expect(busy.received.length + idle.received.length).toBe(40)
  })

  // Regression (contract audit): with the queue only breaking in-flight ties, six requests held at
  // once went 3 and 3, the backend reporting 50 waiting taking as many as the idle one.
  it('weighs the queue with the requests in flight: concurrent requests all go to the idle backend', async () => {
    const { busy, idle, gw } = await queuedAndIdle(true)
    const answers = Array.from({ length: 6 }, () => post(gw))
    await until(() => busy.heldCount() + idle.heldCount() === 6, 'six requests held')
    expect([busy.heldCount(), idle.heldCount()]).toEqual([0, 6])
    idle.releaseHeld(6)
    for (const answer of await Promise.all(answers)) expect(answer.status).toBe(200)
  })
})

describe('prefix_affinity end to end', () => {
  it('keeps every turn of a conversation on one backend and spreads conversations', async () => {
    const backends = await Promise.all([cleanups.standIn({ tokens: 2 }), cleanups.standIn({ tokens: 2 }), cleanups.standIn({ tokens: 2 }), cleanups.standIn({ tokens: 2 })])
    const gw = await gateway({ balance: 'prefix_affinity', backends: backends.map((b, i) => ({ url: b.url, name: `b${i}` })) })

    const conversations = 40
    for (let c = 0; c < conversations; c++) {
      const history: { role: string; content: string }[] = [
        { role: 'system', content: `You are assistant number ${c}, with a persona of your own.` },
        { role: 'user', content: `Conversation ${c}: tell me something.` },
      ]
      for (let turn = 0; turn < 3; turn++) {
        const { status, text } = await post(gw, { messages: history })
        expect(status).toBe(200)
        history.push({ role: 'assistant', content: contentOf(text) }, { role: 'user', content: `Turn ${turn + 1}: go on.` })
      }
    }

    const systemPromptOf = (body: unknown) => (body as { messages: { content: string }[] }).messages[0]!.content
    const backendsByConversation = new Map<string, Set<number>>()
    const turnsByConversation = new Map<string, number>()
    backends.forEach((backend, index) => {
      for (const request of backend.received) {
        const system = systemPromptOf(request.body)
        backendsByConversation.set(system, (backendsByConversation.get(system) ?? new Set()).add(index))
        turnsByConversation.set(system, (turnsByConversation.get(system) ?? 0) + 1)
      }
    })
    expect(backendsByConversation.size).toBe(conversations)
    expect([...turnsByConversation.values()].every((turns) => turns === 3)).toBe(true)
    const split = [...backendsByConversation.entries()].filter(([, used]) => used.size !== 1).map(([system]) => system)
    expect(split).toEqual([])
    const used = backends.filter((b) => b.received.length > 0).length
    expect(used).toBeGreaterThan(1)
  })
})
