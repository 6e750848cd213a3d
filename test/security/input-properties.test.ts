/**
 * Hostile input, property-based (issue 9, item 1): fast-check drives all four
 * operations through real HTTP against one gateway, run as a child process
 * (`node dist/main.js --config FILE`) in front of the four stand-ins. Bodies
 * start valid and are mutated (any JSON value in any member, members
 * dropped, prototype keys, deep nesting, arrays at the body limit, extreme
 * numbers and duplicated keys as raw text, invalid UTF-8, odd Content-Types);
 * checkpoint listings get arbitrary path segments and query strings.
 *
 * For every request: an answer arrives within 10 s; the gateway is still
 * alive (GET /healthz); either exactly the route's stand-in received it, the
 * oracle (test/support/*-oracle.ts, written from the contract) does not call
 * it invalid and the stand-in got what the contract says it must get, or no
 * stand-in received anything, the answer is a 4xx in DESIGN.md's error shape
 * and the oracle does not call the request valid. At the end, the child's
 * resident memory, read from /proc after a full GC (SIGUSR2 to the
 * test/support/gc-on-signal.mjs preload), is back within 96 MiB of its
 * baseline.
 *
 * Runs are reproducible: fixed seed per property (printed on failure with
 * the shrunk counterexample).
 */
import { readFileSync } from 'node:fs'
import { Agent } from 'node:http'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatCompletionRequest } from '../../src/schemas/chat.js'
import { ObjectReadRequest } from '../../src/schemas/objects.js'
import { TrainingJobRequest, Trajectory } from '../../src/schemas/training.js'
import { bodySpecArbitrary, encodeBody } from '../support/body-mutations.js'
import { chatVerdict, expectedChatUpstream, expectedRequestId, type ChatSetup } from '../support/chat-oracle.js'
import { checkpointJudgement, targetMismatch } from '../support/checkpoint-oracle.js'
import { exactRequest, isErrorBody, type RawResponse } from '../support/raw-http.js'
import { combine, schemaOracle, transportVerdict, type Verdict } from '../support/request-oracle.js'
import { anyString, plainSchema, schemaArbitrary } from '../support/schema-arbitrary.js'
import { basicHeader, BODY_LIMIT, CHECKPOINT_MODEL, SERVED_M, startSecurityFixture, TRAINING_MODEL, type SecurityFixture, type StandInCounts } from '../support/security-fixture.js'

const SEED = 0x51_1ce
const CHAT_SETUP: ChatSetup = {
  models: { m: { servedName: SERVED_M, priorityScheduling: false }, prio: { servedName: 'prio', priorityScheduling: true } },
  defaultModel: 'm',
}
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const MiB = 1024 * 1024

let fx: SecurityFixture
let agent: Agent
let baselineRss = 0

/** Resident set size of a process, from /proc (Linux). */
function rssOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? NaN) * 1024
}

type Route = keyof StandInCounts

interface Probe {
  readonly route: Route
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: Buffer | null
  readonly label: string
}

/** Header values as the server sees them: HTTP strips surrounding spaces and tabs. */
const seen = (value: string | undefined) => value?.replace(/^[ \t]+|[ \t]+$/g, '')

beforeAll(async () => {
  // Cheap scrypt (N=1024) for the Basic user: the property sends hundreds of object reads.
  fx = await startSecurityFixture({ asProcess: true, scryptN: 1024 })
  agent = new Agent({ keepAlive: true, maxSockets: 1 })
  // Warm up, so the baseline includes compiled code and the upstream connection pools.
  for (let i = 0; i < 20; i++) {
    await exactRequest(fx.url, { method: 'POST', path: '/v1/chat/completions', agent, headers: chatHeaders(), body: '{"messages":[{"role":"user","content":"hi"}]}' })
    await exactRequest(fx.url, { method: 'GET', path: `/v1/preview/models/${CHECKPOINT_MODEL}/checkpoints`, agent, headers: { authorization: `Bearer ${fx.keys.all.token}` } })
  }
  baselineRss = await rssAfterCollection(() => false, 5)
}, 30_000)

afterAll(async () => {
  agent?.destroy()
  await fx?.close()
})

function chatHeaders(): Record<string, string> {
  return { authorization: `Bearer ${fx.keys.all.token}`, 'content-type': 'application/json' }
}

/**
 * The child's RSS after a full garbage collection (SIGUSR2, see
 * test/support/gc-on-signal.mjs): the lowest of up to `attempts` readings,
 * each after another collection and a /healthz round trip, stopping early
 * once `enough` says so. No fixed sleep.
 */
async function rssAfterCollection(enough: (rss: number) => boolean, attempts = 10): Promise<number> {
  let rss = Infinity
  for (let i = 0; i < attempts && !(rss < Infinity && enough(rss)); i++) {
    fx.collectGarbage()
    await exactRequest(fx.url, { method: 'GET', path: '/healthz', agent })
    rss = Math.min(rss, rssOf(fx.pid!))
  }
  return rss
}

function isReset(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return code === 'ECONNRESET' || code === 'EPIPE'
}

/**
 * Sends one probe and checks the invariants common to every route; calls
 * `onForward` with the stand-in's record when the request was forwarded.
 */
async function exchange(probe: Probe, verdict: Verdict, onForward: (response: RawResponse) => void): Promise<void> {
  const before = fx.counts()
  let response: RawResponse
  try {
    response = await exactRequest(fx.url, { method: probe.method, path: probe.path, headers: probe.headers, body: probe.body, agent, timeoutMs: 10_000 })
  } catch (error) {
    // A body over the limit may be cut off while still being written: refused, which is fine.
    if (probe.body !== null && probe.body.length > BODY_LIMIT && isReset(error)) {
      expect(fx.counts(), probe.label).toEqual(before)
      expect(fx.alive()).toBe(true)
      return
    }
    throw new Error(`no answer (${String(error)}) to ${probe.label}`)
  }
  const after = fx.counts()
  for (const route of Object.keys(after) as Route[]) {
    if (route !== probe.route) expect(after[route], `${route} upstream reached by ${probe.label}`).toBe(before[route])
  }
  const forwarded = after[probe.route] - before[probe.route]
  const context = `${response.status} ${response.text.slice(0, 300)} ← ${probe.label} [oracle: ${verdict.kind}, ${verdict.why}]`
  expect(forwarded, context).toBeLessThanOrEqual(1)
  expect(response.status, context).toBeLessThan(500)
  if (forwarded === 1) {
    expect(verdict.kind, `forwarded although invalid: ${context}`).not.toBe('invalid')
    onForward(response)
  } else {
    expect(response.status >= 400 && response.status < 500, context).toBe(true)
    expect(isErrorBody(response), `not the DESIGN.md error shape: ${context}`).toBe(true)
    expect(verdict.kind, `refused although valid: ${context}`).not.toBe('valid')
  }
  const health = await exactRequest(fx.url, { method: 'GET', path: '/healthz', agent, timeoutMs: 5000 })
  expect(health.status).toBe(200)
  expect(fx.alive()).toBe(true)
}

const contentTypes = fc.oneof(
  { weight: 14, arbitrary: fc.constant<string | undefined>('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom<string | undefined>(
      undefined,
      '',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=utf-8',
      'Application/JSON',
      'application/json;charset=UTF-16',
      'application/jsonx',
      'application/vnd.api+json',
      'multipart/form-data; boundary=x',
      'application/json, text/plain',
    ),
  },
)
const validId = fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/)
const headerText = fc.string({ unit: 'grapheme-ascii', maxLength: 40 })
const optionalHeader = (arbitrary: fc.Arbitrary<string>) => fc.option(arbitrary, { freq: 3, nil: undefined })

describe('chat completions: arbitrary bodies through real HTTP', () => {
  const message = fc.oneof(
    fc.record({ role: fc.constantFrom('user', 'system', 'developer', 'tool'), content: fc.oneof(anyString, fc.constant([{ type: 'text', text: 'hi' }])) }),
    fc.record({ role: fc.constant('assistant'), content: fc.constant(null), tool_calls: fc.constant([{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }]) }),
  )
  // The members the cross-field rules and the normalization read are drawn more often.
  const ruleMembers = ['model', 'priority', 'stream', 'stream_options', 'logprobs', 'top_logprobs', 'prompt_logprobs', 'continue_final_message', 'add_generation_prompt', 'cache_salt', 'max_tokens', 'max_completion_tokens', 'request_id']
  const base = schemaArbitrary(plainSchema(ChatCompletionRequest), {
    maxOptional: 3,
    favoured: ruleMembers,
    overrides: {
      messages: fc.array(message, { minLength: 1, maxLength: 3 }),
      model: fc.constantFrom('m', 'prio', null, 'no-such-model'),
      priority: fc.oneof(fc.constant(0), fc.integer({ min: -3, max: 3 })),
      stream: fc.oneof(fc.boolean(), fc.constant(null)),
      top_logprobs: fc.oneof(fc.constant(null), fc.integer({ min: -1, max: 3 })),
      cache_salt: fc.oneof(fc.constant(''), fc.constant(null), anyString),
      request_id: fc.oneof(validId, anyString),
    },
  })
  // Nesting stays under ~4,000 levels here: deeper is a known defect with its own test (input-edges).
  const specs = bodySpecArbitrary(base, { maxDepth: 1500, bodyLimit: BODY_LIMIT }, ['model', 'messages', 'stream', 'priority', 'request_id', 'seed', '__proto__'])

  it('every answer is a correct forward of a valid request or a 4xx in the error shape', async () => {
    await fc.assert(
      fc.asyncProperty(specs, contentTypes, optionalHeader(fc.oneof(validId, headerText)), optionalHeader(headerText), async (spec, contentType, requestIdHeader, userAgent) => {
        const { bytes, label } = encodeBody(spec)
        const headers: Record<string, string> = { authorization: `Bearer ${fx.keys.all.token}` }
        if (contentType !== undefined) headers['content-type'] = contentType
        if (requestIdHeader !== undefined) headers['x-request-id'] = requestIdHeader
        if (userAgent !== undefined) headers['user-agent'] = userAgent
        const transport = transportVerdict(contentType, bytes, BODY_LIMIT)
        const header = seen(requestIdHeader)
        const verdict = transport.value === undefined ? transport.verdict : combine(transport.verdict, chatVerdict(transport.value, header, CHAT_SETUP))
        const probe: Probe = { route: 'chat', method: 'POST', path: '/v1/chat/completions', headers, body: bytes, label: `${label} headers=${JSON.stringify(headers)}` }
        await exchange(probe, verdict, (response) => {
          const got = fx.vllm.received.at(-1)!
          const sent = transport.value as Record<string, unknown>
          const requestId = expectedRequestId(sent, header) ?? String((got.body as Record<string, unknown>).request_id)
          expect(requestId).toMatch(REQUEST_ID)
          // Compared as JSON text reads back: the gateway forwards the client's own bytes when it can
          // (a -0 stays -0) and serializes otherwise (JSON.stringify writes 0); the backend gets the same values.
          expect(JSON.parse(JSON.stringify(got.body)), probe.label).toEqual(expectedChatUpstream(sent, CHAT_SETUP, requestId))
          expect(got.headers['x-request-id']).toBe(requestId)
          expect(got.headers.authorization).toBe(fx.upstreamAuthorization.chat)
          if (seen(userAgent)) expect(got.headers['user-agent']).toBe(seen(userAgent))
          expect(response.status).toBe(200)
          expect(response.headers['x-request-id']).toBe(requestId)
        })
      }),
      { seed: SEED, numRuns: 400 },
    )
  }, 60_000)
})

/** Training jobs and object reads: checked, then forwarded as the exact bytes received (less a byte order mark). */
function describeRawForward(route: 'training' | 'objects', setup: { path: string; schema: unknown; base: fc.Arbitrary<unknown>; authorization: () => string; duplicates: string[] }): void {
  const oracle = schemaOracle(setup.schema)
  const specs = bodySpecArbitrary(setup.base, { maxDepth: 30_000, bodyLimit: BODY_LIMIT }, setup.duplicates)
  it(`${setup.path}: every answer is an exact-bytes forward of a valid body or a 4xx in the error shape`, async () => {
    await fc.assert(
      fc.asyncProperty(specs, contentTypes, async (spec, contentType) => {
        const { bytes, label } = encodeBody(spec)
        const headers: Record<string, string> = { authorization: setup.authorization() }
        if (contentType !== undefined) headers['content-type'] = contentType
        const transport = transportVerdict(contentType, bytes, BODY_LIMIT)
        const verdict = transport.value === undefined ? transport.verdict : combine(transport.verdict, oracle.check(transport.value))
        const probe: Probe = { route, method: 'POST', path: setup.path, headers, body: bytes, label: `${label} content-type=${contentType}` }
        await exchange(probe, verdict, () => {
          const got = (route === 'training' ? fx.training : fx.store).received.at(-1)!
          expect(got.method).toBe('POST')
          expect(got.url).toBe(setup.path)
          // Less a leading byte order mark, which Python's json (the upstreams') refuses.
          const sent = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes
          expect(got.rawBody.equals(sent), `bytes changed on the way: ${probe.label}`).toBe(true)
          expect(got.headers.authorization).toBe(fx.upstreamAuthorization[route])
          expect(got.headers['content-type']).toBe('application/json')
        })
      }),
      { seed: SEED, numRuns: 250 },
    )
  }, 60_000)
}

describe('training jobs and object reads: arbitrary bodies through real HTTP', () => {
  const trajectory = schemaArbitrary(plainSchema(Trajectory), { maxOptional: 3 })
  const trainingBase = schemaArbitrary(plainSchema(TrainingJobRequest), {
    overrides: {
      model_id: fc.oneof(fc.constant(TRAINING_MODEL), fc.uuid(), anyString),
      trajectory_groups: fc.array(fc.record({ trajectories: fc.array(trajectory, { maxLength: 2 }) }), { maxLength: 2 }),
    },
  })
  describeRawForward('training', {
    path: '/v1/preview/training-jobs',
    schema: TrainingJobRequest,
    base: trainingBase,
    authorization: () => `Bearer ${fx.keys.all.token}`,
    duplicates: ['model_id', 'trajectory_groups', 'experimental_config', '__proto__'],
  })
  const objectBase = schemaArbitrary(plainSchema(ObjectReadRequest), {
    overrides: { project_id: fc.oneof(fc.constant('demo/project'), anyString), object_id: fc.oneof(fc.constant('config'), anyString), digest: fc.oneof(fc.constant('latest'), anyString) },
  })
  describeRawForward('objects', {
    path: '/obj/read',
    schema: ObjectReadRequest,
    base: objectBase,
    authorization: () => basicHeader(fx.users.alice),
    duplicates: ['project_id', 'object_id', 'digest', 'metadata_only', 'constructor'],
  })
})

describe('checkpoint listing: arbitrary path segments and query strings', () => {
  const text = fc.string({ unit: 'grapheme', maxLength: 16 })
  const segment = fc.oneof(
    { weight: 4, arbitrary: fc.constant(CHECKPOINT_MODEL) },
    { weight: 4, arbitrary: text.map(encodeURIComponent) },
    { weight: 1, arbitrary: text.map((t) => encodeURIComponent(encodeURIComponent(t))) },
    {
      weight: 2,
      arbitrary: fc.constantFrom('.', '..', '%2e', '%2E%2E', '%2e%2e', 'a%2Fb', '%2F', '%00', '%0d%0a', '%252F', '%25', '%E0%A4%A', '%ED%A0%80', '%C0%AF', 'x'.repeat(512), 'x'.repeat(513), 'x'.repeat(4100), '~u', "!$&'()*+,;=:@"),
    },
  )
  const limitValue = fc.oneof(fc.integer({ min: -2, max: 102 }).map(String), fc.constantFrom('007', '00005', '+5', ' 5', '5.0', '1e1', '0x10', '', 'abc', '100', '101', '9999', '1'))
  const member = fc.oneof(
    fc.tuple(fc.constant('limit'), limitValue),
    fc.tuple(fc.constant('order'), fc.constantFrom('asc', 'desc', 'ASC', '', 'random')),
    fc.tuple(fc.constant('after'), fc.oneof(text, fc.constant(''))),
    fc.tuple(fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', '2', 'x', 'limit[]', 'a.b', 'a b', '&', '='), text),
    fc.tuple(text, text),
  )
  const encoding = fc.constantFrom('component' as const, 'form' as const, 'bare' as const)
  const query = fc.array(fc.tuple(member, encoding), { maxLength: 4 }).map((members) =>
    members
      .map(([[name, value], how]) => {
        if (how === 'form') return new URLSearchParams([[name, value]]).toString()
        if (how === 'bare' && value === '') return encodeURIComponent(name)
        return `${encodeURIComponent(name)}=${encodeURIComponent(value)}`
      })
      .join('&'),
  )

  it('every answer is a forward to the one canonical upstream target or a 4xx in the error shape', async () => {
    await fc.assert(
      fc.asyncProperty(segment, query, async (rawSegment, queryText) => {
        const judgement = checkpointJudgement(rawSegment, queryText)
        const path = `/v1/preview/models/${rawSegment}/checkpoints${queryText === '' ? '' : `?${queryText}`}`
        const probe: Probe = { route: 'checkpoints', method: 'GET', path, headers: { authorization: `Bearer ${fx.keys.all.token}` }, body: null, label: `GET ${path.slice(0, 400)}` }
        await exchange(probe, judgement.verdict, () => {
          const got = fx.checkpoints.received.at(-1)!
          expect(got.method).toBe('GET')
          expect(got.headers.authorization).toBe(fx.upstreamAuthorization.checkpoints)
          const match = /^\/v1\/preview\/models\/([^/?#]+)\/checkpoints\?limit=\d+&order=(asc|desc)(&|$)/.exec(got.url)
          expect(match, `upstream target ${got.url} ← ${probe.label}`).not.toBeNull()
          expect(decodeURIComponent(match![1]!)).toBe(judgement.modelId)
          if (judgement.target !== null && judgement.verdict.kind === 'valid') expect(targetMismatch(got.url, judgement.target), probe.label).toBe('')
        })
      }),
      { seed: SEED, numRuns: 300 },
    )
  }, 60_000)
})

describe('memory', () => {
  it('the gateway process returns near its baseline RSS after the property runs', async () => {
    const before = rssOf(fx.pid!)
    const limit = baselineRss + 96 * MiB
    const after = await rssAfterCollection((rss) => rss < limit)
    // eslint-disable-next-line no-console
    console.log(`gateway RSS: baseline ${(baselineRss / MiB).toFixed(1)} MiB; after the properties ${(before / MiB).toFixed(1)} MiB, after a full GC ${(after / MiB).toFixed(1)} MiB`)
    expect(after).toBeLessThan(limit)
    expect(fx.alive()).toBe(true)
  }, 20_000)
})
