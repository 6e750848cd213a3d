/**
 * Admission through real HTTP (DESIGN.md chat path step 2, the errors table
 * and shutdown): a gateway on port 0 in front of a vLLM stand-in that can hold
 * every request, so the test decides when a slot frees up.
 */
import { once } from 'node:events'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import type { ReceivedRequest, VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { configFrom, makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { scrapeMetric, until, untilMetric } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'
import { nextEvents } from '../support/stand-in-events.js'
import { parseResponses } from '../support/raw-http.js'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import { seeded } from '../support/seeded-random.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

/** One model "m" on one backend "b1"; a short grace so a failed test never waits 30 s on shutdown. */
function gateway(backend: VllmStandIn, model: Record<string, unknown>, keys: readonly TestKey[] = [key], graceMs = 1000): Promise<TestGateway> {
  return cleanups.gateway({
    server: { shutdown_grace_ms: graceMs },
    auth: { keys: keys.map((k) => k.entry) },
    models: [{ name: 'm', served_name: 'stand-in-model', backends: [{ url: backend.url, name: 'b1' }], ...model }],
  })
}

interface SendOptions {
  readonly priority?: number
  readonly as?: TestKey
  readonly signal?: AbortSignal
  readonly extra?: Record<string, unknown>
}

/** A chat request whose message content is `marker`, so the backend's log tells requests apart. */
function send(gw: TestGateway, marker: string, options: SendOptions = {}): Promise<Response> {
  const body: Record<string, unknown> = { model: 'm', messages: [{ role: 'user', content: marker }], ...options.extra }
  if (options.priority !== undefined) body.priority = options.priority
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${(options.as ?? key).token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: options.signal,
  })
}

async function errorOf(response: Response): Promise<{ status: number; retryAfter: string | null; error: Record<string, unknown> }> {
  const body = (await response.json()) as { error: Record<string, unknown> }
  return { status: response.status, retryAfter: response.headers.get('retry-after'), error: body.error }
}

function markerOf(received: ReceivedRequest): string {
  return (received.body as { messages: { content: string }[] }).messages[0]!.content
}

const untilQueueDepth = (gw: TestGateway, depth: number) => untilMetric(gw.url, 'sluice_queue_depth', { model: 'm' }, depth)

/** The first access line `matches`, once written (when the response closes; no event tells the test): bounded poll. */
async function accessLine(gw: TestGateway, matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const find = () => gw.logLines().find((line) => line.msg === 'request completed' && matches(line))
  await until(() => find() !== undefined, 'the access line')
  return find()!
}

/** Lets one held request answer and returns the request that took its slot. */
async function releaseOneAndTakeNext(backend: VllmStandIn): Promise<ReceivedRequest> {
  const next = nextEvents(backend, 'held', 1)
  expect(backend.releaseHeld(1)).toBe(1)
  return (await next)[0]!
}

function expectRetryAfter(value: string | null, min: number, max = Number.POSITIVE_INFINITY): void {
  expect(value).toMatch(/^\d+$/)
  expect(Number(value)).toBeGreaterThanOrEqual(min)
  expect(Number(value)).toBeLessThanOrEqual(max)
}

describe('the priority queue', () => {
  it('serves waiting requests lowest priority first, then by arrival, and forwards priority', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { priority_scheduling: true, max_concurrency_per_backend: 2 })
    const running = nextEvents(backend, 'held', 2)
    const responses = [send(gw, 'busy-1'), send(gw, 'busy-2')]
    await running

    const arrivals: [string, number][] = [['p5-a', 5], ['p0-b', 0], ['p5-c', 5], ['pm3-d', -3], ['p0-e', 0]]
    for (const [index, [marker, priority]] of arrivals.entries()) {
      responses.push(send(gw, marker, { priority }))
      await untilQueueDepth(gw, index + 1)
    }
    const served: string[] = []
    for (let i = 0; i < arrivals.length; i++) served.push(markerOf(await releaseOneAndTakeNext(backend)))
    expect(backend.releaseHeld(2)).toBe(2)

    expect(served).toEqual(['pm3-d', 'p0-b', 'p0-e', 'p5-a', 'p5-c'])
    expect((await Promise.all(responses)).map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 200])
    const forwarded = new Map(backend.received.map((r) => [markerOf(r), (r.body as { priority?: unknown }).priority]))
    for (const [marker, priority] of arrivals) expect(forwarded.get(marker)).toBe(priority)
    await untilQueueDepth(gw, 0)
  })

  it('never has more requests at a backend than its slots, with 500 concurrent clients and random aborts', async () => {
    const slots = 4
    // Streams pace their tokens, so requests overlap at the backend and the bound is really at stake.
    const backend = await cleanups.standIn({ tokens: 3, interTokenDelayMs: 1 })
    const gw = await gateway(backend, { priority_scheduling: true, max_concurrency_per_backend: slots, queue: { max_size: 1000, max_wait_ms: 60000 } })
    const random = seeded(20240611)
    const abortOnArrival = new Map<string, AbortController>()
    let maxInFlight = 0
    backend.events.on('request', (received: ReceivedRequest) => {
      maxInFlight = Math.max(maxInFlight, backend.inFlight())
      abortOnArrival.get(markerOf(received))?.abort()
    })

    type Outcome = { aborted: true } | { aborted: false; status: number }
    async function one(index: number): Promise<Outcome> {
      const marker = `r${index}`
      const priority = Math.floor(random() * 21) - 10
      const stream = random() < 0.5
      const roll = random()
      const depth = 1 + Math.floor(random() * 40)
      const controller = new AbortController()
      if (roll < 0.07) {
        void (async () => {
          for (let i = 0; i < depth; i++) await Promise.resolve()
          controller.abort()
        })()
      } else if (roll < 0.14) {
        // Event-loop turns, not time: lets the request get into the gateway's queue first.
        void (async () => {
          for (let i = 0; i < depth; i++) await new Promise<void>((resolve) => setImmediate(resolve))
          controller.abort()
        })()
      } else if (roll < 0.2) {
        abortOnArrival.set(marker, controller)
      }
      try {
        const response = await send(gw, marker, { priority, signal: controller.signal, extra: { stream } })
        await response.arrayBuffer()
        return { aborted: false, status: response.status }
      } catch (error) {
        if (controller.signal.aborted) return { aborted: true }
        throw error
      }
    }

    const outcomes = await Promise.all(Array.from({ length: 500 }, (_, i) => one(i)))

    expect(maxInFlight).toBeLessThanOrEqual(slots)
    expect(maxInFlight).toBeGreaterThanOrEqual(2)
    const answered = outcomes.filter((o) => !o.aborted)
    expect(outcomes.length - answered.length).toBeGreaterThan(0)
    expect(answered.map((o) => o.status).filter((s) => s !== 200)).toEqual([])
    await untilMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b1' }, 0)
    await untilQueueDepth(gw, 0)
    expect(backend.received.length).toBeGreaterThanOrEqual(answered.length)
  })
})

describe('a full queue', () => {
  it('turns away the newest request of the worst priority present, which may be the arriving one', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { priority_scheduling: true, max_concurrency_per_backend: 1, queue: { max_size: 2 } })
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running
    const worst = send(gw, 'q-p5', { priority: 5 })
    await untilQueueDepth(gw, 1)
    const better = send(gw, 'q-p0', { priority: 0 })
    await untilQueueDepth(gw, 2)

    const newcomer = send(gw, 'new-p0', { priority: 0 })
    const evicted = await errorOf(await worst)
    expect(evicted).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'queue_full', param: null } })
    expectRetryAfter(evicted.retryAfter, 1)
    await untilQueueDepth(gw, 2)

    const refused = await errorOf(await send(gw, 'p9', { priority: 9 }))
    expect(refused).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'queue_full' } })
    expectRetryAfter(refused.retryAfter, 1)

    const served = [markerOf(await releaseOneAndTakeNext(backend)), markerOf(await releaseOneAndTakeNext(backend))]
    backend.releaseHeld(1)
    expect(served).toEqual(['q-p0', 'new-p0'])
    expect((await Promise.all([busy, better, newcomer])).map((r) => r.status)).toEqual([200, 200, 200])
    expect(backend.received.map(markerOf)).toEqual(['busy', 'q-p0', 'new-p0'])
    expect(await scrapeMetric(gw.url, 'sluice_rejections_total', { reason: 'queue_full' })).toBe(2)
  })
})

describe('the bodies of waiting requests (server.queued_body_limit_bytes)', () => {
  // Regression (resource audit): queued requests held their bodies with nothing bounding the
  // total (~26 MiB each with 8 MiB bodies; 1,000 may wait per model).
  it('a request whose body would pass the limit while it waits gets 429 queue_full; a smaller one waits; one with a free slot is not counted', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const other = await cleanups.standIn({ tokens: 2 })
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: 1000, body_limit_bytes: 4096, queued_body_limit_bytes: 4096 },
      auth: { keys: [key.entry] },
      models: [
        { name: 'm', served_name: 'stand-in-model', max_concurrency_per_backend: 1, backends: [{ url: backend.url, name: 'b1' }] },
        { name: 'free', served_name: 'stand-in-model', backends: [{ url: other.url, name: 'f1' }] },
      ],
    })
    const padded = (marker: string, size: number) => `${marker}:${'x'.repeat(size)}`
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, padded('busy', 3000))
    await running
    const big = send(gw, padded('big', 2500))
    await untilQueueDepth(gw, 1)

    const refused = await errorOf(await send(gw, padded('bigger', 2000)))
    expect(refused).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'queue_full', param: null } })
    expect(refused.error.message).toContain('server.queued_body_limit_bytes')
    expectRetryAfter(refused.retryAfter, 1)
    const small = send(gw, 'small')
    await untilQueueDepth(gw, 2)
    // Another model's request with a slot free holds nothing while it runs: it is served.
    const elsewhere = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'free', messages: [{ role: 'user', content: padded('elsewhere', 3000) }] }),
    })
    expect(elsewhere.status).toBe(200)

    expect(markerOf(await releaseOneAndTakeNext(backend)).startsWith('big:')).toBe(true)
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('small')
    backend.releaseHeld(1)
    expect((await Promise.all([busy, big, small])).map((r) => r.status)).toEqual([200, 200, 200])
    expect(await scrapeMetric(gw.url, 'sluice_rejections_total', { reason: 'queue_full' })).toBe(1)
  })
})

describe('the bodies of waiting requests, counted as received', () => {
  // Regression (code review): the budget counted the upstream body, which the gateway makes longer
  // (request_id, max_completion_tokens), so with the two limits equal a body near the limit never waited.
  it('with queued_body_limit_bytes equal to body_limit_bytes, a body at the limit waits', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: 1000, body_limit_bytes: 2048, queued_body_limit_bytes: 2048 },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', served_name: 'stand-in-model', max_concurrency_per_backend: 1, backends: [{ url: backend.url, name: 'b1' }] }],
    })
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running
    const content = 'x'.repeat(2048 - JSON.stringify({ model: 'm', messages: [{ role: 'user', content: '' }], max_tokens: 5 }).length)
    const large = send(gw, content, { extra: { max_tokens: 5 } })
    await untilQueueDepth(gw, 1)

    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe(content)
    backend.releaseHeld(1)
    expect((await Promise.all([busy, large])).map((r) => r.status)).toEqual([200, 200])
  })
})

describe('leaving the queue', () => {
  it('answers 503 overloaded_error queue_timeout with Retry-After after max_wait_ms', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { max_concurrency_per_backend: 1, queue: { max_wait_ms: 300 } })
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running

    const started = Date.now()
    const timedOut = await errorOf(await send(gw, 'waits'))

    expect(Date.now() - started).toBeGreaterThanOrEqual(250)
    expect(timedOut).toMatchObject({ status: 503, error: { type: 'overloaded_error', code: 'queue_timeout', param: null } })
    expectRetryAfter(timedOut.retryAfter, 1)
    expect(await scrapeMetric(gw.url, 'sluice_rejections_total', { reason: 'queue_timeout' })).toBe(1)
    // Regression (metrics review): the access line's queue wait was null for a request that never got a slot.
    const line = await accessLine(gw, (l) => l.error_code === 'queue_timeout')
    expect(line.queue_wait_ms).toBeGreaterThanOrEqual(250)
    await untilQueueDepth(gw, 0)
    backend.releaseHeld(1)
    expect((await busy).status).toBe(200)
    expect(backend.received.map(markerOf)).toEqual(['busy'])
  })

  it('drops a request whose client disconnected while queued: the backend never sees it', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { max_concurrency_per_backend: 1 })
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running
    const controller = new AbortController()
    const gone = send(gw, 'gone', { signal: controller.signal })
    await untilQueueDepth(gw, 1)
    const stays = send(gw, 'stays')
    await untilQueueDepth(gw, 2)

    controller.abort()
    await expect(gone).rejects.toThrow()
    await untilQueueDepth(gw, 1)
    // Regression (metrics review): null for a request whose client left the queue.
    expect((await accessLine(gw, (l) => l.status === 499)).queue_wait_ms).toBeGreaterThan(0)

    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('stays')
    backend.releaseHeld(1)
    expect((await Promise.all([busy, stays])).map((r) => r.status)).toEqual([200, 200])
    expect(backend.received.map(markerOf)).toEqual(['busy', 'stays'])
    await untilQueueDepth(gw, 0)
    await untilMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b1' }, 0)
  })
})

describe('key policy', () => {
  it('refuses a priority below the key min_priority with 403, after the body checks', async () => {
    const strict = makeKey('strict', ['chat'], { min_priority: 0 })
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await gateway(backend, { priority_scheduling: true }, [key, strict])

    const below = await errorOf(await send(gw, 'x', { as: strict, priority: -1 }))
    expect(below).toMatchObject({ status: 403, error: { type: 'permission_error', code: 'priority_forbidden', param: 'priority' } })
    expect(typeof below.error.message).toBe('string')

    const badBody = await errorOf(await send(gw, 'x', { as: strict, priority: -1, extra: { messages: 'not a list' } }))
    expect(badBody).toMatchObject({ status: 400, error: { type: 'invalid_request_error', param: 'messages' } })
    const badRule = await errorOf(await send(gw, 'x', { as: strict, priority: -1, extra: { stream_options: { include_usage: true } } }))
    expect(badRule).toMatchObject({ status: 400, error: { type: 'invalid_request_error', param: 'stream_options' } })

    expect((await send(gw, 'x', { as: strict, priority: 0 })).status).toBe(200)
    expect((await send(gw, 'x', { as: key, priority: -1 })).status).toBe(200)
    expect(backend.received).toHaveLength(2)
  })
})

describe('per-key limits', () => {
  it('requests_per_minute: the third request in a minute gets 429 rate_limit_requests', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { requests_per_minute: 2 } })
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await gateway(backend, {}, [key, limited])

    expect((await send(gw, 'a', { as: limited })).status).toBe(200)
    expect((await send(gw, 'b', { as: limited })).status).toBe(200)
    const third = await errorOf(await send(gw, 'c', { as: limited }))

    expect(third).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'rate_limit_requests', param: null } })
    expectRetryAfter(third.retryAfter, 1, 30)
    expect((await send(gw, 'other', { as: key })).status).toBe(200)
    expect(backend.received.map(markerOf)).toEqual(['a', 'b', 'other'])
  })

  it('max_concurrency: a second concurrent request gets 429 concurrency; the share returns when the first ends', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { max_concurrency: 1 } })
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, {}, [key, limited])
    const running = nextEvents(backend, 'held', 1)
    const first = send(gw, 'first', { as: limited })
    await running

    const second = await errorOf(await send(gw, 'second', { as: limited }))
    expect(second).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'concurrency' } })
    expectRetryAfter(second.retryAfter, 1)

    const otherHeld = nextEvents(backend, 'held', 1)
    const other = send(gw, 'other', { as: key })
    await otherHeld
    backend.releaseHeld(2)
    expect((await Promise.all([first, other])).map((r) => r.status)).toEqual([200, 200])

    const thirdHeld = nextEvents(backend, 'held', 1)
    const third = send(gw, 'third', { as: limited })
    await thirdHeld
    backend.releaseHeld(1)
    expect((await third).status).toBe(200)
  })

  it('max_concurrency: a request that left the queue gives its share back', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { max_concurrency: 2 } })
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { max_concurrency_per_backend: 1 }, [limited])
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy', { as: limited })
    await running
    const controller = new AbortController()
    const gone = send(gw, 'gone', { as: limited, signal: controller.signal })
    await untilQueueDepth(gw, 1)
    controller.abort()
    await expect(gone).rejects.toThrow()
    await untilQueueDepth(gw, 0)

    const again = send(gw, 'again', { as: limited })
    await untilQueueDepth(gw, 1)
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('again')
    backend.releaseHeld(1)
    expect((await Promise.all([busy, again])).map((r) => r.status)).toEqual([200, 200])
  })

  it('tokens_per_minute: once an answer used the budget the next request gets 429 rate_limit_tokens', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { tokens_per_minute: 10 } })
    const backend = await cleanups.standIn({ tokens: 20 })
    const gw = await gateway(backend, {}, [key, limited])

    const first = await send(gw, 'first', { as: limited })
    expect(first.status).toBe(200)
    const usage = ((await first.json()) as { usage: { total_tokens: number } }).usage
    expect(usage.total_tokens).toBeGreaterThan(10)
    const next = await errorOf(await send(gw, 'next', { as: limited }))

    expect(next).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'rate_limit_tokens', param: null } })
    expectRetryAfter(next.retryAfter, 1)
    expect((await send(gw, 'other', { as: key })).status).toBe(200)
    expect(backend.received.map(markerOf)).toEqual(['first', 'other'])
  })

  it('tokens_per_minute: a stream is charged too, with the usage the gateway asked for on its behalf', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { tokens_per_minute: 10 } })
    const backend = await cleanups.standIn({ tokens: 20 })
    const gw = await gateway(backend, {}, [key, limited])

    const stream = await send(gw, 'stream', { as: limited, extra: { stream: true } })
    const text = await stream.text()
    expect(text).not.toContain('"usage"')
    const next = await errorOf(await send(gw, 'next', { as: limited }))

    expect(next).toMatchObject({ status: 429, error: { type: 'rate_limit_error', code: 'rate_limit_tokens' } })
    expectRetryAfter(next.retryAfter, 1)
    expect(backend.received.map(markerOf)).toEqual(['stream'])
  })
})

describe('streams', () => {
  it('hold their slot until the stream ended: the next request waits for [DONE]', async () => {
    const tokens = 150
    const backend = await cleanups.standIn({ tokens, interTokenDelayMs: 4 })
    const gw = await gateway(backend, { max_concurrency_per_backend: 1 })
    let chunks = 0
    const answered: string[] = []
    backend.events.on('chunk', () => chunks++)
    backend.events.on('answered', (r: ReceivedRequest) => answered.push(markerOf(r)))
    const firstChunk = once(backend.events, 'chunk')
    const stream = await send(gw, 'stream', { extra: { stream: true } })
    await firstChunk

    // A snapshot taken synchronously when the waiting request reaches the backend.
    const arrival = new Promise<{ chunks: number; answered: string[] }>((resolve) => {
      backend.events.once('request', () => resolve({ chunks, answered: [...answered] }))
    })
    const waiting = send(gw, 'waiting')
    await untilQueueDepth(gw, 1)
    expect(answered).toEqual([])

    const text = await stream.text()
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect((await waiting).status).toBe(200)
    expect(await arrival).toEqual({ chunks: tokens, answered: ['stream'] })
  })
})

describe('a reload', () => {
  it('counts the slots the previous configuration still holds: the backend never gets more than its slots', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const settings = {
      server: { port: 0, shutdown_grace_ms: 1000 },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', served_name: 'stand-in-model', max_concurrency_per_backend: 1, backends: [{ url: backend.url, name: 'b1' }] }],
    }
    const gw = await cleanups.gateway(settings)
    let mostHeld = 0
    backend.events.on('held', () => (mostHeld = Math.max(mostHeld, backend.heldCount())))
    const queuedHere = (depth: number) => until(() => gw.context.state.slots.get('m')!.queueDepth() === depth, `a queue depth of ${depth}`)

    const aHeld = nextEvents(backend, 'held', 1)
    const a = send(gw, 'a')
    await aHeld
    const b = send(gw, 'b')
    await queuedHere(1)
    await gw.reload(configFrom(settings))
    // The new configuration counts a's slot: c waits although its own store holds none.
    const c = send(gw, 'c')
    await queuedHere(1)
    expect(backend.heldCount()).toBe(1)

    // a ends: the old configuration's own waiter goes first, and c still waits for b.
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('b')
    expect(backend.heldCount()).toBe(1)
    expect(gw.context.state.slots.get('m')!.queueDepth()).toBe(1)
    // b ends with no one left in the old queue: the freed slot goes to c in the new one.
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('c')
    backend.releaseHeld(1)

    expect((await Promise.all([a, b, c])).map((r) => r.status)).toEqual([200, 200, 200])
    expect(backend.received.map(markerOf)).toEqual(['a', 'b', 'c'])
    expect(mostHeld).toBe(1)
  })
})

// Regression (session 23 queue review): the old configuration judged its waiters by its own limit of 1,
// counting the new one's requests, and the new one admitted its arrivals first: the waiters of before a
// reload that raised the limit ran only when the backend went idle, and timed out while others were served.
describe('a reload that raises max_concurrency_per_backend with requests waiting', () => {
  it('gives the new slots to the waiters at once, and serves both configurations\' queues as one, in priority order', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    // Checks far apart: a check's wake of the queues would hide a reload that wakes nothing.
    const model = { name: 'm', served_name: 'stand-in-model', priority_scheduling: true, max_concurrency_per_backend: 1, queue: { max_wait_ms: 60_000 }, health: { interval_ms: 60_000 }, backends: [{ url: backend.url, name: 'b1' }] }
    const settings = { server: { port: 0, shutdown_grace_ms: 1000 }, auth: { keys: [key.entry] }, models: [model] }
    const gw = await cleanups.gateway(settings)
    const firstHeld = nextEvents(backend, 'held', 1)
    const held = send(gw, 'held')
    await firstHeld
    const waiting = [send(gw, 'w1', { priority: -5 }), send(gw, 'w2', { priority: -5 })]
    await untilQueueDepth(gw, 2)

    const waitersRun = nextEvents(backend, 'held', 2)
    await gw.reload(configFrom({ ...settings, models: [{ ...model, max_concurrency_per_backend: 3 }] }))
    expect((await waitersRun).map(markerOf).sort()).toEqual(['w1', 'w2'])

    // Three in flight: the new configuration's arrivals wait, the better one first.
    const later = [send(gw, 'n1', { priority: 5 }), send(gw, 'n2', { priority: -10 })]
    await untilQueueDepth(gw, 2)
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('n2')
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('n1')
    backend.releaseHeld(3)
    expect((await Promise.all([held, ...waiting, ...later])).map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
  })
})

describe('a reload with the queue full', () => {
  // Session 23 queue review: each generation's queue was bounded alone, so right after a reload
  // the model held twice max_size waiters (sluice_queue_depth 4 with max_size 2).
  it('bounds both configurations\' queues together by max_size: the newest of the worst priority is turned away', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const model = { name: 'm', served_name: 'stand-in-model', priority_scheduling: true, max_concurrency_per_backend: 1, queue: { max_size: 2, max_wait_ms: 60_000 }, backends: [{ url: backend.url, name: 'b1' }] }
    const settings = { server: { port: 0, shutdown_grace_ms: 1000 }, auth: { keys: [key.entry] }, models: [model] }
    const gw = await cleanups.gateway(settings)
    const firstHeld = nextEvents(backend, 'held', 1)
    const held = send(gw, 'held')
    await firstHeld
    const before = [send(gw, 'o1', { priority: 5 }), send(gw, 'o2', { priority: 5 })]
    await untilQueueDepth(gw, 2)
    await gw.reload(configFrom({ ...settings, models: [{ ...model, queue: { max_size: 2, max_wait_ms: 30_000 } }] }))

    expect((await send(gw, 'n1', { priority: 5 })).status).toBe(429)
    const better = send(gw, 'n2', { priority: -10 })
    expect((await before[1]!).status).toBe(429)
    expect(await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })).toBe(2)

    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('n2')
    expect(markerOf(await releaseOneAndTakeNext(backend))).toBe('o1')
    backend.releaseHeld(1)
    expect((await Promise.all([held, before[0]!, better])).map((r) => r.status)).toEqual([200, 200, 200])
  })
})

describe('shutdown', () => {
  it('answers queued requests 503 at once and lets the in-flight one finish', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, { max_concurrency_per_backend: 1 }, [key], 2000)
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running
    const queued = [send(gw, 'q1'), send(gw, 'q2', { extra: { stream: true } })]
    await untilQueueDepth(gw, 2)

    const down = gw.shutdown()
    const answers = await Promise.all(queued)
    // Their connections close after the answer, and the answer says so.
    expect(answers.map((r) => r.headers.get('connection'))).toEqual(['close', 'close'])
    const refusals = await Promise.all(answers.map(errorOf))

    expect(backend.heldCount()).toBe(1)
    for (const refusal of refusals) {
      expect(refusal).toMatchObject({ status: 503, error: { type: 'service_unavailable', code: 'shutting_down' } })
    }
    backend.releaseHeld(1)
    const finished = await busy
    expect(finished.status).toBe(200)
    expect(((await finished.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe('tok0 tok1 ')
    await down
    expect(backend.received.map(markerOf)).toEqual(['busy'])
  })

  // Regression: at the end of the grace period the connections were closed without a word, and
  // the access lines said the clients had left (499).
  it('when the grace period runs out: a running stream ends with a shutting_down event and [DONE], a request waiting for its answer gets 503', async () => {
    const slow = await cleanups.standIn({ tokens: 10_000, interTokenDelayMs: 20 })
    const held = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: 300 },
      auth: { keys: [key.entry] },
      models: [
        { name: 'slow', served_name: 'stand-in-model', backends: [{ url: slow.url, name: 'slow' }] },
        { name: 'held', served_name: 'stand-in-model', backends: [{ url: held.url, name: 'held' }] },
      ],
    })
    const post = (model: string, stream: boolean) =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: model }] }),
      })
    const stream = await post('slow', true)
    const reader = stream.body!.getReader()
    let text = Buffer.from((await reader.read()).value!).toString('utf8')
    const waiting = nextEvents(held, 'held', 1)
    const unanswered = post('held', false)
    await waiting

    await gw.shutdown()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += Buffer.from(value).toString('utf8')
    }
    const events = text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice('data: '.length))
    expect(events.at(-1)).toBe('[DONE]')
    expect(JSON.parse(events.at(-2)!)).toEqual({ error: { message: expect.stringContaining('grace period'), type: 'service_unavailable', param: null, code: 'shutting_down' } })
    const refusal = await unanswered
    expect(refusal.status).toBe(503)
    expect(((await refusal.json()) as { error: unknown }).error).toMatchObject({ type: 'service_unavailable', code: 'shutting_down' })

    const access = gw.logLines().filter((line) => line.msg === 'request completed')
    expect(access.map((line) => [line.model, line.status, line.error_code]).sort()).toEqual([
      ['held', 503, 'shutting_down'],
      ['slow', 200, 'shutting_down'],
    ])
    held.releaseHeld(1)
  })

  // Regression: a request whose body was still arriving at the end of the grace period had its
  // connection closed without an answer (the cut-off mark was set only once the body was parsed),
  // and its access line said the client had left (499).
  it.each([
    ['/v1/chat/completions', `Bearer ${key.token}`],
    ['/obj/read', `Basic ${Buffer.from('alice:alice-password').toString('base64')}`],
  ])('when the grace period runs out: %s with its body still arriving gets 503 shutting_down', async (path, authorization) => {
    const backend = await cleanups.standIn({ tokens: 2 })
    const objects = await cleanups.standIn({ tokens: 2 })
    const gw = await cleanups.gateway({
      server: { shutdown_grace_ms: 200 },
      auth: { keys: [key.entry], users: [{ username: 'alice', password_scrypt: await hashPassword('alice-password'), scopes: ['objects'] }] },
      models: [{ name: 'm', served_name: 'stand-in-model', backends: [{ url: backend.url, name: 'b1' }] }],
      upstreams: { objects: { url: objects.url } },
    })
    const { port, hostname } = new URL(gw.url)
    const socket = connect(Number(port), hostname)
    cleanups.push(async () => socket.destroy())
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    const continued = new Promise<void>((resolve) => socket.on('data', () => Buffer.concat(received).includes('100 Continue') && resolve()))
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n`)
    // "100 Continue" leaves after the credentials passed, on the way to the body's reader.
    await continued
    socket.write('{"model": "m", ')
    const closed = once(socket, 'close')

    await gw.shutdown()
    await closed
    const responses = parseResponses(Buffer.concat(received).subarray(Buffer.concat(received).indexOf('\r\n\r\n') + 4))
    expect(responses.map((r) => r.status)).toEqual([503])
    expect(JSON.parse(responses[0]!.text)).toEqual({ error: { message: expect.stringContaining('grace period'), type: 'service_unavailable', param: null, code: 'shutting_down' } })
    const access = gw.logLines().filter((line) => line.msg === 'request completed')
    expect(access.map((line) => [line.status, line.error_code])).toEqual([[503, 'shutting_down']])
    expect(backend.received).toHaveLength(0)
    expect(objects.received).toHaveLength(0)
  })

  // Regression (session 23 lifecycle review): admission refused everything once the drain began, so a
  // chat request whose body was still coming got 503 shutting_down with slots free (a training job in
  // the same place was answered); and a retry on another backend of a request in flight was refused.
  it('a chat request whose body was still coming when the drain began gets a free slot and its answer', async () => {
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await cleanups.gateway({ server: { shutdown_grace_ms: LONG_GRACE_MS }, auth: { keys: [key.entry] }, models: [{ name: 'm', served_name: 'stand-in-model', backends: [{ url: backend.url, name: 'b1' }] }] })
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'late body' }] })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    const continued = new Promise<void>((resolve) => socket.on('data', () => Buffer.concat(received).includes('100 Continue') && resolve()))
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`)
    await continued
    socket.write(body.slice(0, 10))
    const closed = once(socket, 'close')

    const stopping = gw.shutdown()
    socket.write(body.slice(10))
    await stopping
    await closed
    const all = Buffer.concat(received)
    const responses = parseResponses(all.subarray(all.indexOf('\r\n\r\n') + 4))
    expect(responses.map((r) => r.status)).toEqual([200])
    expect(backend.received.map(markerOf)).toEqual(['late body'])
  })

  // Regression (code review): the app answers a request that arrives while draining at once,
  // and the connection tracker then set Connection: close on the sent answer; the
  // ERR_HTTP_HEADERS_SENT it threw from Node's parser callback ended the process.
  it('a request arriving on an open connection just as the drain begins: no uncaught error, and the shutdown ends', async () => {
    const uncaught: unknown[] = []
    const onUncaught = (error: unknown) => void uncaught.push(error)
    process.prependListener('uncaughtException', onUncaught)
    cleanups.push(async () => void process.removeListener('uncaughtException', onUncaught))
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await gateway(backend, {})
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    socket.on('error', () => undefined)
    await until(() => gw.openConnections() === 1, 'the gateway holding the connection')

    const stopping = gw.shutdown()
    socket.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.token}\r\n\r\n`)
    await stopping
    expect(uncaught).toEqual([])
  })

  // A grace period far longer than the test may run: a shutdown that finishes at all was held by nothing.
  const LONG_GRACE_MS = 60_000

  // Regression: a keep-alive connection that went idle after draining began held shutdown
  // for the whole grace period (src/connection-drain.ts closes it after its response).
  it('finishes soon after the last in-flight request ended, not at the end of the grace period', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await gateway(backend, {}, [key], LONG_GRACE_MS)
    const running = nextEvents(backend, 'held', 1)
    const busy = send(gw, 'busy')
    await running

    const down = gw.shutdown()
    backend.releaseHeld(1)
    const finished = await busy
    expect(finished.status).toBe(200)
    // Left open, the connection would end only at the keep-alive timeouts (4-5 s), which
    // would also let shutdown finish: the answer itself must say the connection ends with it.
    expect(finished.headers.get('connection')).toBe('close')
    await finished.text()

    await expect(down).resolves.toBeUndefined()
  })

  // Regression: a connection that never sent a request (a preconnect, a TCP probe) held
  // shutdown for the whole grace period.
  it('is not held up by a connection that never sent a request', async () => {
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await gateway(backend, {}, [key], LONG_GRACE_MS)
    const { port, hostname } = new URL(gw.url)
    const silent = connect(Number(port), hostname)
    cleanups.push(async () => silent.destroy())
    await once(silent, 'connect')

    // Nothing else closes a connection that sent nothing before the grace period ends.
    await expect(gw.shutdown()).resolves.toBeUndefined()
  })
})
