/**
 * Observability end to end (issue 7): one gateway takes a scripted mix of
 * requests (whole and streamed chats, a bad body, a missing key, a bogus
 * model, a bogus path, a rate-limited request, a stream the client aborts,
 * and one call to each platform upstream). Then /metrics, parsed with
 * parse-prometheus-text-format, must show exactly the expected counters,
 * token totals, histogram counts and gauges; the captured log must hold
 * exactly one 'request completed' line per request with every field, and
 * none of the secrets configured anywhere in the setup.
 */
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import parsePrometheusText from 'parse-prometheus-text-format'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import { startObjectStoreStandIn, type ObjectStoreStandIn } from '../../src/dev/object-store-stand-in.js'
import { startTrainingStandIn, type TrainingStandIn } from '../../src/dev/training-stand-in.js'
import { startVllmStandIn, type StandInOptions, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'

const hex = () => randomBytes(8).toString('hex')
const basic = (user: { username: string; password: string }) => Buffer.from(`${user.username}:${user.password}`).toString('base64')

const MODEL = 'm'
const BACKEND = 'b1'
/** Completion tokens the stand-in generates when max_tokens does not cut the answer shorter. */
const TOKENS = 5
/**
 * Chat requests of the script that pass validation and reach the key's
 * limiter: 3 whole, 3 streamed, 1 aborted. The key allows exactly that many
 * per minute, so the next one is the single 429. (The bucket refills one
 * request every 60/7 ≈ 8.6 s; the script runs in well under a second.)
 */
const ADMITTED_CHATS = 7

// Every secret in the setup, each random so a match in the log cannot be a coincidence.
const BACKEND_API_KEY = `vllm-api-key-${hex()}`
const TRAINING_TOKEN = `training-upstream-${hex()}`
const CHECKPOINTS_TOKEN = `checkpoints-upstream-${hex()}`
const STORE_USER = { username: 'gateway-svc', password: `store-pw-${hex()}` }
const ALICE = { username: 'alice', password: `alice-pw-${hex()}` }
const chatKey = makeKey('chat-team', ['chat'], { limits: { requests_per_minute: ADMITTED_CHATS } })
const platformKey = makeKey('platform-team', ['training', 'checkpoints'])

const TRAINING_MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const GIVEN_CHAT_ID = 'obs-given:Chat_1.a-2'
const GIVEN_TRAINING_ID = 'obs-given.training-7'
const BOGUS_MODEL = `bogus-model-${hex()}`
const BOGUS_PATH = `/v1/bogus-path-${hex()}`
const BOGUS_QUERY = hex()

type Route = 'chat' | 'training' | 'checkpoints' | 'objects' | 'unknown'
interface Usage {
  readonly prompt: number
  readonly completion: number
}

/** One request of the script and what it must leave in the metrics and the log. */
interface Sent {
  readonly name: string
  readonly route: Route
  /** The `model` label ('' when no configured model applies). */
  readonly model: string
  /** The status the client saw, and the one it should have seen. */
  readonly seen: number
  readonly expectedSeen: number
  /** The status metrics and the log must record (499 for the aborted stream). */
  readonly logged: number
  /** The X-Request-Id response header. */
  readonly requestId: string | null
  readonly principal: string | null
  readonly backend: string | null
  /** Tokens charged: as the stand-in computes them for a completed answer, the gateway's estimate for a cut stream. */
  readonly tokens: Usage | null
  /** The stream was cut before its usage chunk: `tokens` is the gateway's estimate (src/proxy/usage-estimate.ts). */
  readonly estimated?: boolean
  /** A stream that sent content to the client: it must have a time to first token. */
  readonly streamedContent: boolean
  /** `error.code` of an error body, null for answers. */
  readonly errorCode: string | null
}

/** The stand-in's usage (src/dev/chat-answer.ts): ceil(characters / 4) prompt tokens, min(max_tokens, TOKENS) completion. */
function standInUsage(content: string, maxTokens?: number): Usage {
  return { prompt: Math.max(1, Math.ceil(content.length / 4)), completion: Math.min(maxTokens ?? TOKENS, TOKENS) }
}

function dataEvents(text: string): unknown[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((event) => event.startsWith('data: ') && event !== 'data: [DONE]')
    .map((event) => JSON.parse(event.slice('data: '.length)) as unknown)
}

interface Chunk {
  choices?: { delta?: { content?: string } }[]
  usage?: { prompt_tokens: number; completion_tokens: number } | null
}

function contentChunks(events: unknown[]): number {
  return (events as Chunk[]).filter((e) => (e.choices?.[0]?.delta?.content ?? '') !== '').length
}

async function waitUntil(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
}

let vllm: VllmStandIn
let training: TrainingStandIn
let checkpoints: TrainingStandIn
let store: ObjectStoreStandIn
let gw: TestGateway
const sent: Sent[] = []
/** Client-side observations the tests check beyond the Sent records. */
const observed: { retryAfter: string | null; wholeUsages: Usage[]; streamUsage: Usage | null; streamContentCounts: number[] } = {
  retryAfter: null,
  wholeUsages: [],
  streamUsage: null,
  streamContentCounts: [],
}
let metricsText = ''
let metricsRequestId: string | null = null

function chatCall(body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${chatKey.token}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  })
}

const messagesOf = (content: string) => [{ role: 'user', content }]

async function errorCodeOf(response: Response): Promise<string | null> {
  const body = (await response.json()) as { error?: { code?: string | null } }
  return body.error?.code ?? null
}

async function wholeChat(name: string, content: string, maxTokens?: number, headers: Record<string, string> = {}): Promise<void> {
  const body = { model: MODEL, messages: messagesOf(content), ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }) }
  const response = await chatCall(body, headers)
  const json = (await response.json()) as { usage?: { prompt_tokens: number; completion_tokens: number } }
  if (json.usage !== undefined) observed.wholeUsages.push({ prompt: json.usage.prompt_tokens, completion: json.usage.completion_tokens })
  sent.push({
    name,
    route: 'chat',
    model: MODEL,
    seen: response.status,
    expectedSeen: 200,
    logged: 200,
    requestId: response.headers.get('x-request-id'),
    principal: chatKey.id,
    backend: BACKEND,
    tokens: standInUsage(content, maxTokens),
    streamedContent: false,
    errorCode: null,
  })
}

async function streamedChat(name: string, content: string, extra: Record<string, unknown>, maxTokens?: number): Promise<void> {
  const body = { model: MODEL, messages: messagesOf(content), stream: true, ...extra, ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }) }
  const response = await chatCall(body)
  const events = dataEvents(await response.text())
  observed.streamContentCounts.push(contentChunks(events))
  const usage = (events as Chunk[]).find((e) => e.usage !== undefined && e.usage !== null)?.usage
  if (usage !== undefined && usage !== null) observed.streamUsage = { prompt: usage.prompt_tokens, completion: usage.completion_tokens }
  sent.push({
    name,
    route: 'chat',
    model: MODEL,
    seen: response.status,
    expectedSeen: 200,
    logged: 200,
    requestId: response.headers.get('x-request-id'),
    principal: chatKey.id,
    backend: BACKEND,
    tokens: standInUsage(content, maxTokens),
    streamedContent: true,
    errorCode: null,
  })
}

interface Refusal {
  name: string
  route: Route
  model: string
  status: number
  principal: string | null
}

async function refused(response: Response, expected: Refusal): Promise<void> {
  sent.push({
    name: expected.name,
    route: expected.route,
    model: expected.model,
    seen: response.status,
    expectedSeen: expected.status,
    logged: expected.status,
    requestId: response.headers.get('x-request-id'),
    principal: expected.principal,
    backend: null,
    tokens: null,
    streamedContent: false,
    errorCode: await errorCodeOf(response),
  })
}

async function platformCall(name: string, route: Route, path: string, init: RequestInit, principal: string): Promise<void> {
  const response = await fetch(`${gw.url}${path}`, init)
  await response.arrayBuffer()
  sent.push({
    name,
    route,
    model: '',
    seen: response.status,
    expectedSeen: 200,
    logged: 200,
    requestId: response.headers.get('x-request-id'),
    principal,
    backend: route,
    tokens: null,
    streamedContent: false,
    errorCode: null,
  })
}

/**
 * A stream the client abandons once it has received the first content chunk.
 * The stand-in writes its first token at once, then (switched on its 'chunk'
 * event, before it schedules the next token) waits a minute: the abort always
 * lands mid-stream.
 */
async function abortedStream(): Promise<void> {
  const base: StandInOptions = vllm.options
  vllm.options = { ...base, interTokenDelayMs: 0 }
  const slowDown = (index: number) => {
    if (index === 0) vllm.options = { ...vllm.options, interTokenDelayMs: 60_000 }
  }
  vllm.events.on('chunk', slowDown)
  const clientClosed = once(vllm.events, 'client-closed')
  const controller = new AbortController()
  try {
    const response = await chatCall({ model: MODEL, messages: messagesOf('Abort me halfway'), stream: true }, {}, controller.signal)
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ''
    while (!text.includes('tok0')) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`the stream ended before its first content chunk: ${text}`)
      text += decoder.decode(value, { stream: true })
    }
    controller.abort()
    await clientClosed
    sent.push({
      name: 'aborted stream',
      route: 'chat',
      model: MODEL,
      seen: response.status,
      expectedSeen: 200,
      logged: 499,
      requestId: response.headers.get('x-request-id'),
      principal: chatKey.id,
      backend: BACKEND,
      // 'Abort me halfway' is 16 characters: 4 prompt tokens; the role event and tok0's: 1 completion token.
      tokens: { prompt: 4, completion: 1 },
      estimated: true,
      streamedContent: true,
      errorCode: null,
    })
  } finally {
    vllm.events.off('chunk', slowDown)
    vllm.options = base
  }
}

async function runScript(): Promise<void> {
  const bearerPlatform = `Bearer ${platformKey.token}`
  const json = { 'content-type': 'application/json' }

  await wholeChat('whole, default length', 'Hello there', undefined)
  await wholeChat('whole, given X-Request-Id', 'Please count to five.', 3, { 'x-request-id': GIVEN_CHAT_ID })
  await refused(await chatCall({ model: MODEL, messages: 'not a list' }), { name: 'bad body', route: 'chat', model: '', status: 400, principal: chatKey.id })
  const noKey = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: json, body: JSON.stringify({ model: MODEL, messages: messagesOf('hi') }) })
  await refused(noKey, { name: 'no key', route: 'chat', model: '', status: 401, principal: null })
  await refused(await chatCall({ model: BOGUS_MODEL, messages: messagesOf('hi') }), { name: 'bogus model', route: 'chat', model: '', status: 400, principal: chatKey.id })
  await streamedChat('stream, no stream_options', 'Tell me a story about a sluice gate', {})
  await streamedChat('stream, include_usage true', 'abc defg', { stream_options: { include_usage: true } }, 2)
  await wholeChat('whole, max_tokens above the answer', 'Hi', 7)
  await streamedChat('stream, include_usage false', 'x'.repeat(17), { stream_options: { include_usage: false } }, 4)

  const job = JSON.stringify({ model_id: TRAINING_MODEL, trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: 'user', content: 'hi' }], reward: 1 }] }] })
  await platformCall('training job', 'training', '/v1/preview/training-jobs', { method: 'POST', headers: { ...json, authorization: bearerPlatform, 'x-request-id': GIVEN_TRAINING_ID }, body: job }, platformKey.id)
  await platformCall('checkpoint listing', 'checkpoints', `/v1/preview/models/${TRAINING_MODEL}/checkpoints`, { headers: { authorization: bearerPlatform } }, platformKey.id)
  const read = JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' })
  await platformCall('object read', 'objects', '/obj/read', { method: 'POST', headers: { ...json, authorization: `Basic ${basic(ALICE)}` }, body: read }, ALICE.username)
  await refused(await fetch(`${gw.url}${BOGUS_PATH}?signature=${BOGUS_QUERY}`), { name: 'bogus path', route: 'unknown', model: '', status: 404, principal: null })

  await abortedStream()
  const limited = await chatCall({ model: MODEL, messages: messagesOf('one too many') })
  observed.retryAfter = limited.headers.get('retry-after')
  await refused(limited, { name: 'rate limited', route: 'chat', model: MODEL, status: 429, principal: chatKey.id })
}

const completedLines = () => gw.logLines().filter((line) => line.msg === 'request completed')

beforeAll(async () => {
  vllm = await startVllmStandIn({ tokens: TOKENS, apiKey: BACKEND_API_KEY })
  training = await startTrainingStandIn({ expectAuthorization: `Bearer ${TRAINING_TOKEN}`, checkpoints: { [TRAINING_MODEL]: 3 } })
  checkpoints = await startTrainingStandIn({ expectAuthorization: `Bearer ${CHECKPOINTS_TOKEN}`, checkpoints: { [TRAINING_MODEL]: 4 } })
  store = await startObjectStoreStandIn({ expectAuthorization: `Basic ${basic(STORE_USER)}` })
  gw = await startTestGateway({
    server: { shutdown_grace_ms: 1000 },
    auth: {
      keys: [chatKey.entry, platformKey.entry],
      users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }],
    },
    models: [{ name: MODEL, served_name: 'stand-in-model', backends: [{ url: vllm.url, name: BACKEND, api_key: BACKEND_API_KEY }] }],
    upstreams: {
      training: { url: training.url, auth: { bearer: TRAINING_TOKEN } },
      checkpoints: { url: checkpoints.url, auth: { bearer: CHECKPOINTS_TOKEN } },
      objects: { url: store.url, auth: { basic: STORE_USER } },
    },
  })

  await runScript()
  // Everything has ended: every line written, every slot back (the aborted stream's is freed asynchronously).
  await waitUntil('one access log line per request', () => completedLines().length >= sent.length)
  await waitUntil('every chat slot released', () => gw.context.state.slots.get(MODEL)?.inFlight(BACKEND) === 0 && vllm.inFlight() === 0)

  const scrape = await fetch(`${gw.url}/metrics`)
  metricsText = await scrape.text()
  metricsRequestId = scrape.headers.get('x-request-id')
  await waitUntil("the scrape's own access log line", () => completedLines().length >= sent.length + 1)
})

afterAll(async () => {
  await gw?.shutdown()
  await Promise.all([vllm?.close(), training?.close(), checkpoints?.close(), store?.close()])
})

// ---------------------------------------------------------------- the script itself

describe('the scripted mix', () => {
  it('every request got the status it was scripted for', () => {
    expect(sent.map((s) => [s.name, s.seen])).toEqual(sent.map((s) => [s.name, s.expectedSeen]))
    expect(sent).toHaveLength(15)
  })

  it('exactly the admitted chats reached the backend, with the configured api_key and never the client key', () => {
    expect(vllm.received).toHaveLength(ADMITTED_CHATS)
    for (const request of vllm.received) {
      expect(request.headers.authorization).toBe(`Bearer ${BACKEND_API_KEY}`)
      expect(JSON.stringify(request)).not.toContain(chatKey.token)
    }
    expect(JSON.stringify(vllm.received)).not.toContain(BOGUS_MODEL)
    expect(JSON.stringify(vllm.received)).not.toContain('one too many')
  })

  it('the platform upstreams were reached with their configured credentials', () => {
    expect(training.received.map((r) => r.headers.authorization)).toEqual([`Bearer ${TRAINING_TOKEN}`])
    expect(checkpoints.received.map((r) => r.headers.authorization)).toEqual([`Bearer ${CHECKPOINTS_TOKEN}`])
    expect(store.received.map((r) => r.headers.authorization)).toEqual([`Basic ${basic(STORE_USER)}`])
  })

  it('the 429 carries Retry-After in whole seconds', () => {
    expect(observed.retryAfter).toMatch(/^[1-9]\d*$/)
  })

  it("the stand-in's reported usage is what the expected totals are computed from", () => {
    const whole = sent.filter((s) => s.route === 'chat' && s.tokens !== null && !s.streamedContent)
    expect(observed.wholeUsages).toEqual(whole.map((s) => s.tokens))
    expect(observed.streamUsage).toEqual(standInUsage('abc defg', 2))
    const streams = sent.filter((s) => s.tokens !== null && s.streamedContent && s.estimated !== true)
    expect(observed.streamContentCounts).toEqual(streams.map((s) => s.tokens!.completion))
  })
})

// ---------------------------------------------------------------- metrics

type Families = ReturnType<typeof parsePrometheusText>

/**
 * parse-prometheus-text-format 1.1.1 folds every labelled histogram into one
 * label-less sample (its flattenMetrics only keeps `le`), so histogram series
 * are read from a second parse in which histograms are declared untyped:
 * their `_count`, `_sum` and `_bucket` lines then come out as plain samples
 * with their labels.
 */
function parseBoth(text: string): { typed: Families; untyped: Families } {
  return { typed: parsePrometheusText(text), untyped: parsePrometheusText(text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped')) }
}

/** Every sample of `name` (a family may be split in several in the untyped parse) as "label|label|…" → value. */
function series(families: Families, name: string, labelNames: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const sample of families.filter((f) => f.name === name).flatMap((f) => f.metrics)) {
    const key = labelNames.map((label) => sample.labels?.[label] ?? '<absent>').join('|')
    expect(out[key], `duplicate series ${name}{${key}}`).toBeUndefined()
    out[key] = Number(sample.value)
  }
  return out
}

function countBy(items: readonly Sent[], key: (s: Sent) => string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1
  return out
}

/** The scrape itself is counted under route "service" only once it has been answered. */
const withoutService = (map: Record<string, number>) => Object.fromEntries(Object.entries(map).filter(([key]) => !key.startsWith('service|')))

describe('/metrics after the mix', () => {
  let typed: Families
  let untyped: Families
  beforeAll(() => {
    ;({ typed, untyped } = parseBoth(metricsText))
  })

  it('declares the sluice_ families with their types', () => {
    const types = Object.fromEntries(typed.filter((f) => f.name.startsWith('sluice_')).map((f) => [f.name, f.type]))
    expect(types).toMatchObject({
      sluice_requests_total: 'COUNTER',
      sluice_request_duration_seconds: 'HISTOGRAM',
      sluice_time_to_first_token_seconds: 'HISTOGRAM',
      sluice_tokens_total: 'COUNTER',
      sluice_queue_depth: 'GAUGE',
      sluice_queue_wait_seconds: 'HISTOGRAM',
      sluice_inflight_requests: 'GAUGE',
      sluice_backend_up: 'GAUGE',
      sluice_rejections_total: 'COUNTER',
    })
  })

  it('sluice_requests_total{route,model,status}: exactly one series per combination, with its count (499 for the aborted stream)', () => {
    const expected = countBy(sent, (s) => `${s.route}|${s.model}|${s.logged}`)
    expect(expected).toEqual({
      'chat|m|200': 6,
      'chat||400': 2,
      'chat||401': 1,
      'chat|m|499': 1,
      'chat|m|429': 1,
      'training||200': 1,
      'checkpoints||200': 1,
      'objects||200': 1,
      'unknown||404': 1,
    })
    expect(withoutService(series(typed, 'sluice_requests_total', ['route', 'model', 'status']))).toEqual(expected)
  })

  it('sluice_request_duration_seconds_count{route,model} equals the number of requests of each', () => {
    const expected = countBy(sent, (s) => `${s.route}|${s.model}`)
    expect(withoutService(series(untyped, 'sluice_request_duration_seconds_count', ['route', 'model']))).toEqual(expected)
    // The +Inf bucket holds every observation too.
    const infBuckets = series(
      untyped.map((f) => ({ ...f, metrics: f.metrics.filter((m) => m.labels?.le === '+Inf') })),
      'sluice_request_duration_seconds_bucket',
      ['route', 'model'],
    )
    expect(withoutService(infBuckets)).toEqual(expected)
  })

  it('sluice_tokens_total{model,key,kind}: the sums of what the stand-in reported for the completed answers, and the estimate for the cut stream', () => {
    const charged = sent.filter((s) => s.tokens !== null)
    expect(charged).toHaveLength(7)
    const prompt = charged.reduce((sum, s) => sum + s.tokens!.prompt, 0)
    const completion = charged.reduce((sum, s) => sum + s.tokens!.completion, 0)
    // Worked out by hand from the stand-in's rules (the cut stream's last), so a slip in standInUsage cannot hide one in the gateway.
    expect([prompt, completion]).toEqual([3 + 6 + 9 + 2 + 1 + 5 + 4, 5 + 3 + 5 + 2 + 5 + 4 + 1])
    expect(series(typed, 'sluice_tokens_total', ['model', 'key', 'kind'])).toEqual({
      [`${MODEL}|${chatKey.id}|prompt`]: prompt,
      [`${MODEL}|${chatKey.id}|completion`]: completion,
    })
  })

  it('sluice_rejections_total: the one rate-limited request, and nothing else', () => {
    // Every reason is at 0 from the start (zeroed-counters.test.ts).
    const zeros = { queue_full: 0, queue_timeout: 0, rate_limit_tokens: 0, concurrency: 0, priority_forbidden: 0, shutting_down: 0, credential_checks_busy: 0 }
    expect(series(typed, 'sluice_rejections_total', ['reason'])).toEqual({ ...zeros, rate_limit_requests: 1 })
  })

  it('sluice_time_to_first_token_seconds_count{model}: one per stream that sent content (the aborted one included)', () => {
    const streams = sent.filter((s) => s.streamedContent).length
    expect(streams).toBe(4)
    expect(series(untyped, 'sluice_time_to_first_token_seconds_count', ['model'])).toEqual({ [MODEL]: streams })
  })

  it('sluice_queue_wait_seconds_count{model}: one per chat that got a slot', () => {
    expect(series(untyped, 'sluice_queue_wait_seconds_count', ['model'])).toEqual({ [MODEL]: ADMITTED_CHATS })
  })

  it('at the end nothing is in flight or queued', () => {
    expect(series(typed, 'sluice_inflight_requests', ['model', 'backend'])).toEqual({ [`${MODEL}|${BACKEND}`]: 0 })
    expect(series(typed, 'sluice_queue_depth', ['model'])).toEqual({ [MODEL]: 0 })
  })

  it('no upstream error was counted: a client abort is not a backend failure', () => {
    // Every configured backend's and upstream's reasons are at 0 from the start (zeroed-counters.test.ts).
    const counted = series(typed, 'sluice_upstream_errors_total', ['model', 'backend', 'reason'])
    expect(Object.keys(counted)).toContain(`${MODEL}|${BACKEND}|reset`)
    expect(Object.entries(counted).filter(([, value]) => value !== 0)).toEqual([])
  })

  it('no label value comes from raw request input', () => {
    expect(metricsText).not.toContain(BOGUS_MODEL)
    expect(metricsText).not.toContain(BOGUS_PATH)
    expect(metricsText).not.toContain(BOGUS_PATH.slice(1).split('/').at(-1)!)
    expect(metricsText).not.toContain(GIVEN_CHAT_ID)
    const allowed: Record<string, (value: string) => boolean> = {
      route: (v) => ['chat', 'models', 'training', 'checkpoints', 'objects', 'service', 'unknown'].includes(v),
      model: (v) => ['', MODEL].includes(v),
      backend: (v) => [BACKEND, 'training', 'checkpoints', 'objects'].includes(v),
      key: (v) => [chatKey.id, platformKey.id, ALICE.username].includes(v),
      kind: (v) => ['prompt', 'completion'].includes(v),
      // sluice_config_reloads_total, every result at 0 from the start.
      result: (v) => ['ok', 'invalid', 'failed'].includes(v),
      status: (v) => /^[1-5]\d\d$/.test(v),
      // Admission refusals (state/store.ts, key-policy.ts) and upstream failures (upstream-errors.ts, chat-dispatch.ts, chat-stream.ts, refused-credentials.ts).
      reason: (v) =>
        ['queue_full', 'queue_timeout', 'shutting_down', 'rate_limit_requests', 'rate_limit_tokens', 'concurrency', 'priority_forbidden', 'credential_checks_busy'].includes(v) ||
        ['connect', 'timeout', 'reset', 'bad_response', 'status_5xx', 'mid_stream', 'error_event', 'auth_refused'].includes(v),
    }
    const histograms = new Set(typed.filter((f) => f.type === 'HISTOGRAM').map((f) => f.name))
    const isBucket = (name: string) => name.endsWith('_bucket') && histograms.has(name.slice(0, -'_bucket'.length))
    let checked = 0
    for (const family of untyped.filter((f) => f.name.startsWith('sluice_'))) {
      for (const sample of family.metrics) {
        for (const [label, value] of Object.entries(sample.labels ?? {})) {
          checked++
          const where = `${family.name}{${label}="${value}"}`
          if (label === 'le' && isBucket(family.name)) expect(value, where).toMatch(/^(\+Inf|\d+(\.\d+)?(e[+-]?\d+)?)$/)
          else expect(allowed[label]?.(value), where).toBe(true)
        }
      }
    }
    expect(checked).toBeGreaterThan(0)
  })
})

// ---------------------------------------------------------------- the access log

const FIELDS = [
  'request_id',
  'principal',
  'route',
  'model',
  'backend',
  'status',
  'duration_ms',
  'queue_wait_ms',
  'ttft_ms',
  'prompt_tokens',
  'completion_tokens',
  'retries',
  'error_code',
  'path',
  'client_address',
] as const

describe('the access log', () => {
  it('every response carries an X-Request-Id, each one different', () => {
    const ids = sent.map((s) => s.requestId)
    for (const [i, id] of ids.entries()) expect(id, sent[i]!.name).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("exactly one 'request completed' line per request (the scrape's own included), and no other", () => {
    const lines = completedLines()
    expect(lines).toHaveLength(sent.length + 1)
    const logged = lines.map((line) => line.request_id).sort()
    expect(logged).toEqual([...sent.map((s) => s.requestId), metricsRequestId].sort())
  })

  it('each line has every field', () => {
    for (const line of completedLines()) {
      for (const field of FIELDS) expect(Object.hasOwn(line, field), `${field} in ${JSON.stringify(line)}`).toBe(true)
    }
  })

  it("each request's line says who, where, what status, tokens and timings", () => {
    for (const s of sent) {
      const line = completedLines().find((l) => l.request_id === s.requestId)
      expect(line, s.name).toBeDefined()
      const gotSlot = s.backend === BACKEND
      expect(line, s.name).toMatchObject({
        principal: s.principal,
        route: s.route,
        model: s.model === '' ? null : s.model,
        backend: s.backend,
        status: s.logged,
        retries: 0,
        prompt_tokens: s.tokens?.prompt ?? null,
        completion_tokens: s.tokens?.completion ?? null,
      })
      if (s.logged !== 499) expect(line!.error_code, s.name).toBe(s.errorCode)
      const duration = line!.duration_ms as number
      expect(typeof duration, s.name).toBe('number')
      expect(duration, s.name).toBeGreaterThanOrEqual(0)
      if (gotSlot) {
        expect(typeof line!.queue_wait_ms, s.name).toBe('number')
        expect(line!.queue_wait_ms as number, s.name).toBeLessThanOrEqual(duration)
      } else {
        expect(line!.queue_wait_ms, s.name).toBeNull()
      }
      if (s.streamedContent) {
        expect(typeof line!.ttft_ms, s.name).toBe('number')
        expect(line!.ttft_ms as number, s.name).toBeLessThanOrEqual(duration)
      } else {
        expect(line!.ttft_ms, s.name).toBeNull()
      }
    }
  })

  it('each line names the path the client asked for, without its query string, and where the client connected from', () => {
    const byName = (name: string) => completedLines().find((l) => l.request_id === sent.find((s) => s.name === name)!.requestId)
    expect(byName('bogus path')).toMatchObject({ path: BOGUS_PATH, client_address: '127.0.0.1' })
    expect(byName('no key')).toMatchObject({ path: '/v1/chat/completions' })
    for (const line of completedLines()) expect(line.client_address).toBe('127.0.0.1')
    expect(JSON.stringify(gw.logLines())).not.toContain(BOGUS_QUERY)
  })

  it('the error lines carry the error code of the body the client got', () => {
    const codes = Object.fromEntries(sent.filter((s) => s.errorCode !== null).map((s) => [s.name, s.errorCode]))
    expect(codes).toEqual({
      'bad body': expect.any(String),
      'no key': 'missing_credentials',
      'bogus model': 'model_not_found',
      'bogus path': 'not_found',
      'rate limited': 'rate_limit_requests',
    })
  })

  it('the captured log holds none of the secrets configured or sent', () => {
    const log = gw.logText()
    expect(log.length).toBeGreaterThan(0)
    const secrets = {
      'chat key token': chatKey.token,
      'platform key token': platformKey.token,
      'Basic password': ALICE.password,
      'Basic credentials, base64': basic(ALICE),
      'backend api_key': BACKEND_API_KEY,
      'training upstream bearer': TRAINING_TOKEN,
      'checkpoints upstream bearer': CHECKPOINTS_TOKEN,
      'object store password': STORE_USER.password,
      'object store credentials, base64': basic(STORE_USER),
    }
    for (const [what, secret] of Object.entries(secrets)) expect(log.includes(secret), what).toBe(false)
  })
})

describe('a request that names its X-Request-Id', () => {
  for (const [name, id] of [
    ['whole, given X-Request-Id', GIVEN_CHAT_ID],
    ['training job', GIVEN_TRAINING_ID],
  ] as const) {
    it(`${name}: the response echoes it and the log line carries it`, () => {
      const s = sent.find((x) => x.name === name)!
      expect(s.requestId).toBe(id)
      const lines = completedLines().filter((l) => l.request_id === id)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({ route: s.route, status: 200 })
    })
  }

  it('the chat id is the one sent upstream, in the header and the body', () => {
    const upstream = vllm.received.find((r) => r.headers['x-request-id'] === GIVEN_CHAT_ID)
    expect(upstream).toBeDefined()
    expect((upstream!.body as { request_id?: unknown }).request_id).toBe(GIVEN_CHAT_ID)
  })
})
