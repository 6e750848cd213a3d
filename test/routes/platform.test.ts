/**
 * The three platform routes end to end: a real gateway on port 0 in front of
 * the training and object store stand-ins (also on port 0). Covers the
 * validation table, exact-bytes forwarding, credential mapping, path safety
 * of the checkpoint `model_id`, pass-through of upstream answers, upstream
 * failures (502/504), unconfigured upstreams and the metrics labels.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import { errors } from 'undici'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import type { CheckpointList } from '../../src/dev/checkpoint-pages.js'
import { startObjectStoreStandIn, type ObjectStoreStandIn } from '../../src/dev/object-store-stand-in.js'
import type { RecordedRequest } from '../../src/dev/recording-server.js'
import { startTrainingStandIn, type TrainingStandIn } from '../../src/dev/training-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { until } from '../support/metrics.js'

const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const PAGED_MODEL = 'ckpt-model-45'
const UNKNOWN_MODEL = '7d4c0a0e-1111-4222-8333-944455556666'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const TRAINING_TOKEN = 'upstream-training-tok'
const CHECKPOINTS_TOKEN = 'upstream-checkpoints-tok'
const STORE_USER = { username: 'gateway-svc', password: 'store-Pa55:word' }
const STORE_AUTHORIZATION = `Basic ${Buffer.from(`${STORE_USER.username}:${STORE_USER.password}`).toString('base64')}`

const platformKey = makeKey('platform', ['training', 'checkpoints'])
const chatKey = makeKey('chat-only', ['chat'])
const ALICE = { username: 'alice', password: 'alice-S3cret:with:colons' }
const aliceAuthorization = `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`
const bearer = `Bearer ${platformKey.token}`

const MODELS = [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }]

// ---------------------------------------------------------------- helpers

interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  text: string
  body: Buffer
}

/**
 * node:http sends the request target exactly as written: no dot-segment
 * normalisation (global fetch and undici's `request(url)` both resolve
 * `%2e%2e` before sending).
 */
function rawRequest(base: string, options: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<RawAnswer> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: options.method ?? 'GET', path: options.path, headers: options.headers ?? {} },
      (res) => {
        const parts: Buffer[] = []
        res.on('data', (part: Buffer) => parts.push(part))
        res.on('error', reject)
        res.on('end', () => {
          const body = Buffer.concat(parts)
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: body.toString('utf8'), body })
        })
      },
    )
    req.on('error', reject)
    req.end(options.body)
  })
}

function postJson(gw: TestGateway, path: string, body: string | Buffer, authorization: string, extra: Record<string, string> = {}): Promise<RawAnswer> {
  return rawRequest(gw.url, { method: 'POST', path, headers: { 'content-type': 'application/json', authorization, ...extra }, body })
}

function getPath(gw: TestGateway, path: string, authorization = bearer, extra: Record<string, string> = {}): Promise<RawAnswer> {
  return rawRequest(gw.url, { path, headers: { authorization, ...extra } })
}

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null }
}

/** The DESIGN.md error shape: exactly four keys, a message that says something. */
function expectGatewayError(answer: RawAnswer, status: number, expected: { type: string; param?: string | null; code?: string }): ErrorBody['error'] {
  expect(answer.status).toBe(status)
  expect(answer.headers['content-type']).toMatch(/^application\/json/)
  const body = JSON.parse(answer.text) as ErrorBody
  expect(Object.keys(body)).toEqual(['error'])
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type'])
  expect(body.error.message.length).toBeGreaterThan(10)
  expect(body.error.type).toBe(expected.type)
  if ('param' in expected) expect(body.error.param).toBe(expected.param)
  if (expected.code !== undefined) expect(body.error.code).toBe(expected.code)
  return body.error
}

async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())))
  return port
}

function lastOf(received: readonly RecordedRequest[]): RecordedRequest {
  const last = received.at(-1)
  if (last === undefined) throw new Error('the upstream received nothing')
  return last
}

function trajectory(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { messages_and_choices: [{ role: 'user', content: 'hi' }], reward: 0.5, ...extra }
}

function jobBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { model_id: MODEL, trajectory_groups: [{ trajectories: [trajectory()] }], ...overrides }
}

/** A body whose bad trajectory sits at groups[1].trajectories[2], so the path's indices are checked too. */
function jobWithTrajectory(bad: Record<string, unknown>): Record<string, unknown> {
  return jobBody({ trajectory_groups: [{ trajectories: [trajectory()] }, { trajectories: [trajectory(), trajectory(), trajectory(bad)] }] })
}

const BAD_TRAJECTORY = 'trajectory_groups.1.trajectories.2'

// ---------------------------------------------------------------- the main gateway

let training: TrainingStandIn
let checkpoints: TrainingStandIn
let store: ObjectStoreStandIn
let gw: TestGateway

/** A training job sent while the training stand-in runs with `options` over its own. */
async function trainingJobWith(options: Partial<TrainingStandIn['options']>): Promise<RawAnswer> {
  const previous = training.options
  training.options = { ...previous, ...options }
  try {
    return await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer)
  } finally {
    training.options = previous
  }
}

beforeAll(async () => {
  training = await startTrainingStandIn({ expectAuthorization: `Bearer ${TRAINING_TOKEN}`, checkpoints: { [MODEL]: 3 } })
  checkpoints = await startTrainingStandIn({ expectAuthorization: `Bearer ${CHECKPOINTS_TOKEN}`, checkpoints: { [PAGED_MODEL]: 45, [MODEL]: 3 } })
  store = await startObjectStoreStandIn({ expectAuthorization: STORE_AUTHORIZATION })
  gw = await startTestGateway({
    auth: {
      keys: [platformKey.entry, chatKey.entry],
      users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }],
    },
    models: MODELS,
    upstreams: {
      training: { url: training.url, auth: { bearer: TRAINING_TOKEN } },
      checkpoints: { url: checkpoints.url, auth: { bearer: CHECKPOINTS_TOKEN } },
      objects: { url: store.url, auth: { basic: STORE_USER } },
    },
  })
})

afterAll(async () => {
  await gw?.shutdown()
  await Promise.all([training?.close(), checkpoints?.close(), store?.close()])
})

/** Gateways and servers a single test starts, closed after it. */
const perTest: (() => Promise<void>)[] = []
afterEach(async () => {
  await Promise.all(perTest.splice(0).map((close) => close()))
})

async function extraGateway(config: Record<string, unknown>): Promise<TestGateway> {
  const extra = await startTestGateway({ models: MODELS, ...config })
  perTest.push(() => extra.shutdown())
  return extra
}

function openai(): OpenAI {
  return new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: platformKey.token, maxRetries: 0 })
}

// ---------------------------------------------------------------- openai client as a generic HTTP client

describe('the official openai client as a generic HTTP client', () => {
  it('creates a training job and gets back the upstream id', async () => {
    const body = jobBody()
    const created = await openai().post<{ id: string }>('/preview/training-jobs', { body })
    expect(created).toEqual({ id: expect.stringMatching(UUID) })
    expect(training.jobs.at(-1)).toMatchObject({ id: created.id, model_id: MODEL, body })
    expect(lastOf(training.received).rawBody.toString('utf8')).toBe(JSON.stringify(body))
  })

  async function walk(order: 'asc' | 'desc' | undefined, limit: number | undefined): Promise<CheckpointList[]> {
    const client = openai()
    const pages: CheckpointList[] = []
    let after: string | undefined
    for (let guard = 0; guard < 20; guard++) {
      const page = await client.get<CheckpointList>(`/preview/models/${PAGED_MODEL}/checkpoints`, { query: { limit, order, after } })
      pages.push(page)
      if (!page.has_more) return pages
      after = page.last_id
    }
    throw new Error('pagination never ended')
  }

  it.each([
    ['asc', Array.from({ length: 45 }, (_, i) => i + 1)],
    ['desc', Array.from({ length: 45 }, (_, i) => 45 - i)],
  ] as const)('walks 45 checkpoints with limit 20 in %s order, each exactly once', async (order, steps) => {
    const before = checkpoints.received.length
    const pages = await walk(order, 20)
    expect(pages.map((page) => page.data.length)).toEqual([20, 20, 5])
    expect(pages.map((page) => page.has_more)).toEqual([true, true, false])
    const seen = pages.flatMap((page) => page.data)
    expect(seen.map((checkpoint) => checkpoint.step)).toEqual(steps)
    expect(new Set(seen.map((checkpoint) => checkpoint.id)).size).toBe(45)
    for (const page of pages) {
      expect(page.first_id).toBe(page.data[0]?.id)
      expect(page.last_id).toBe(page.data.at(-1)?.id)
    }
    // One upstream call per page, each one naming limit and order, and the cursor after page 1.
    const urls = checkpoints.received.slice(before).map((request) => request.url)
    expect(urls).toEqual([
      `/v1/preview/models/${PAGED_MODEL}/checkpoints?limit=20&order=${order}`,
      `/v1/preview/models/${PAGED_MODEL}/checkpoints?limit=20&order=${order}&after=${pages[0]?.last_id}`,
      `/v1/preview/models/${PAGED_MODEL}/checkpoints?limit=20&order=${order}&after=${pages[1]?.last_id}`,
    ])
  })

  it('fills in limit=20 and order=asc upstream when the client omits them', async () => {
    const before = checkpoints.received.length
    const pages = await walk(undefined, undefined)
    expect(pages.flatMap((page) => page.data).map((c) => c.step)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1))
    const urls = checkpoints.received.slice(before).map((request) => new URL(request.url, 'http://x'))
    expect(urls).toHaveLength(3)
    for (const url of urls) {
      expect(url.searchParams.getAll('limit')).toEqual(['20'])
      expect(url.searchParams.getAll('order')).toEqual(['asc'])
    }
  })

  it('fills in only what is missing: order=desc alone gets limit=20', async () => {
    const page = await openai().get<CheckpointList>(`/preview/models/${PAGED_MODEL}/checkpoints`, { query: { order: 'desc' } })
    expect(page.data[0]?.step).toBe(45)
    expect(lastOf(checkpoints.received).url).toBe(`/v1/preview/models/${PAGED_MODEL}/checkpoints?limit=20&order=desc`)
  })
})

// ---------------------------------------------------------------- validation

describe('training job validation: 400 naming the field, nothing forwarded', () => {
  const cases: [string, string, unknown, string][] = [
    ['model_id not a UUID', 'model_id', jobBody({ model_id: 'not-a-uuid' }), 'invalid_value'],
    ['model_id a number', 'model_id', jobBody({ model_id: 42 }), 'invalid_value'],
    ['model_id missing', 'model_id', { trajectory_groups: [] }, 'missing_field'],
    ['trajectory_groups not an array', 'trajectory_groups', jobBody({ trajectory_groups: { trajectories: [] } }), 'invalid_value'],
    ['trajectory_groups missing', 'trajectory_groups', { model_id: MODEL }, 'missing_field'],
    ['a group without trajectories', 'trajectory_groups.1.trajectories', jobBody({ trajectory_groups: [{ trajectories: [] }, {}] }), 'missing_field'],
    ['trajectories not an array', 'trajectory_groups.0.trajectories', jobBody({ trajectory_groups: [{ trajectories: 'many' }] }), 'invalid_value'],
    ['reward "x"', `${BAD_TRAJECTORY}.reward`, jobWithTrajectory({ reward: 'x' }), 'invalid_value'],
    ['initial_policy_version 1.5', `${BAD_TRAJECTORY}.initial_policy_version`, jobWithTrajectory({ initial_policy_version: 1.5 }), 'invalid_value'],
    ['final_policy_version "2"', `${BAD_TRAJECTORY}.final_policy_version`, jobWithTrajectory({ final_policy_version: '2' }), 'invalid_value'],
    ['start_time "yesterday"', `${BAD_TRAJECTORY}.start_time`, jobWithTrajectory({ start_time: 'yesterday' }), 'invalid_value'],
    ['tools[].function.name 3', `${BAD_TRAJECTORY}.tools.0.function.name`, jobWithTrajectory({ tools: [{ function: { name: 3 } }] }), 'invalid_value'],
    ['metrics []', `${BAD_TRAJECTORY}.metrics`, jobWithTrajectory({ metrics: [] }), 'invalid_value'],
    ['metadata "m"', `${BAD_TRAJECTORY}.metadata`, jobWithTrajectory({ metadata: 'm' }), 'invalid_value'],
    ['experimental_config.ppo "yes"', 'experimental_config.ppo', jobBody({ experimental_config: { ppo: 'yes' } }), 'invalid_value'],
    ['experimental_config.learning_rate "fast"', 'experimental_config.learning_rate', jobBody({ experimental_config: { learning_rate: 'fast' } }), 'invalid_value'],
    ['experimental_config not an object', 'experimental_config', jobBody({ experimental_config: [1] }), 'invalid_value'],
  ]

  it.each(cases)('%s → 400 param %s', async (_name, param, body, code) => {
    const before = training.received.length
    const answer = await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(body), bearer)
    const error = expectGatewayError(answer, 400, { type: 'invalid_request_error', param, code })
    expect(error.message).toContain(param)
    expect(training.received.length).toBe(before)
  })

  it('a body that is not a JSON object is 400 with param null, nothing forwarded', async () => {
    const before = training.received.length
    for (const text of ['[1,2]', '"job"', '{not json']) {
      expectGatewayError(await postJson(gw, '/v1/preview/training-jobs', text, bearer), 400, { type: 'invalid_request_error', param: null })
    }
    expect(training.received.length).toBe(before)
  })

  it.each(['2024-05-01T10:00:00', '2024-05-01T10:00:00.123456', '2024-05-01T10:00:00Z', '2024-05-01T10:00:00+02:00', '2024-05-01t10:00:00z', '2024-05-01 10:00:00', '2024-05-01T10:00:00.1234567890Z', '2024-05-01T10:00:00,5Z'])(
    'start_time %s (ISO 8601, timezone optional) is accepted and forwarded',
    async (startTime) => {
      const text = JSON.stringify(jobWithTrajectory({ start_time: startTime }))
      const answer = await postJson(gw, '/v1/preview/training-jobs', text, bearer)
      expect(answer.status).toBe(200)
      expect(lastOf(training.received).rawBody.toString('utf8')).toBe(text)
    },
  )

  // Regression: Date.parse rolled impossible days over; the format now range-checks every component.
  // Year 0000: regression (platform review); Python's datetime (and pydantic) refuse it, so the upstream would have.
  it.each(['2024-02-30T10:00:00', '0000-01-01T00:00:00'])('start_time on a day that does not exist (%s) is 400', async (startTime) => {
    const before = training.received.length
    const answer = await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(jobWithTrajectory({ start_time: startTime })), bearer)
    expectGatewayError(answer, 400, { type: 'invalid_request_error', param: `${BAD_TRAJECTORY}.start_time` })
    expect(training.received.length).toBe(before)
  })

  it('unknown members pass through: the upstream receives the exact bytes sent', async () => {
    const text =
      '{\n  "trajectory_groups" : [ { "group_note": "kept", "trajectories":[{"reward":1e0, "future_member": {"deep": [1, 2.50, null]},' +
      '"tools":[{"type":"function","function":{"name":"f","x-extra":true}}] }] } ],\t"model_id":"' +
      MODEL +
      '" ,  "not_in_the_interface":"caf\\u00e9 é" , "experimental_config":{"ppo":true,"brand_new_knob":7}  }\r\n'
    const answer = await postJson(gw, '/v1/preview/training-jobs', text, bearer)
    expect(answer.status).toBe(200)
    const forwarded = lastOf(training.received)
    expect(forwarded.rawBody.equals(Buffer.from(text, 'utf8'))).toBe(true)
    expect(forwarded.headers['content-type']).toBe('application/json')
    expect(forwarded.headers['content-length']).toBe(String(Buffer.byteLength(text)))
  })
})

describe('checkpoint query validation: 400 naming the parameter, nothing forwarded', () => {
  const cases: [string, string][] = [
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['order=up', 'order'],
    ['order=ASC', 'order'],
    ['order=asc&order=desc', 'order'],
  ]

  it.each(cases)('?%s → 400 param %s', async (query, param) => {
    const before = checkpoints.received.length
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints?${query}`)
    const error = expectGatewayError(answer, 400, { type: 'invalid_request_error', param, code: 'invalid_value' })
    expect(error.message).toContain(param)
    expect(checkpoints.received.length).toBe(before)
  })

  it.each([
    ['limit=1', 'limit=1&order=asc'],
    ['limit=100&order=desc', 'limit=100&order=desc'],
  ])('?%s is accepted and sent as ?%s', async (query, sent) => {
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints?${query}`)
    expect(answer.status).toBe(200)
    expect(lastOf(checkpoints.received).url).toBe(`/v1/preview/models/${MODEL}/checkpoints?${sent}`)
  })
})

describe('object read validation: 400 naming the field, nothing forwarded', () => {
  const valid = { project_id: 'demo/project', object_id: 'config', digest: 'latest' }
  const cases: [string, string, unknown, string][] = [
    ['project_id missing', 'project_id', { object_id: 'config', digest: 'latest' }, 'missing_field'],
    ['object_id missing', 'object_id', { project_id: 'demo/project', digest: 'latest' }, 'missing_field'],
    ['digest empty', 'digest', { ...valid, digest: '' }, 'invalid_value'],
    ['digest a number', 'digest', { ...valid, digest: 1 }, 'invalid_value'],
    ['metadata_only "yes"', 'metadata_only', { ...valid, metadata_only: 'yes' }, 'invalid_value'],
    ['include_tags_and_aliases 1', 'include_tags_and_aliases', { ...valid, include_tags_and_aliases: 1 }, 'invalid_value'],
  ]

  it.each(cases)('%s → 400 param %s', async (_name, param, body, code) => {
    const before = store.received.length
    const answer = await postJson(gw, '/obj/read', JSON.stringify(body), aliceAuthorization)
    const error = expectGatewayError(answer, 400, { type: 'invalid_request_error', param, code })
    expect(error.message).toContain(param)
    expect(store.received.length).toBe(before)
  })

  it('include_tags_and_aliases: null and metadata_only: null are accepted; unknown members and odd spacing reach the store as sent', async () => {
    const text = '{"digest":"latest" ,\n"include_tags_and_aliases":null,"metadata_only" : null, "object_id":"config","project_id":"demo/project","client_hint":[true]}'
    const answer = await postJson(gw, '/obj/read', text, aliceAuthorization)
    expect(answer.status).toBe(200)
    const obj = (JSON.parse(answer.text) as { obj: Record<string, unknown> }).obj
    expect(obj).toMatchObject({ project_id: 'demo/project', object_id: 'config', version_index: 2, is_latest: 1 })
    expect(lastOf(store.received).rawBody.equals(Buffer.from(text))).toBe(true)
  })
})

// Regression (contract audit): the gateway read past a leading byte order mark and passed the body on
// with it; the upstreams (Python's json) refused it with 422, after the gateway had accepted it.
describe('a body with a leading byte order mark', () => {
  it('a training job reaches its upstream without it, every other byte as sent', async () => {
    const text = JSON.stringify(jobBody())
    expect((await postJson(gw, '/v1/preview/training-jobs', `\ufeff${text}`, bearer)).status).toBe(200)
    expect(lastOf(training.received).rawBody.equals(Buffer.from(text, 'utf8'))).toBe(true)
  })

  it('an object read reaches its store without it, every other byte as sent', async () => {
    const text = '{"project_id":"demo/project", "object_id":"config","digest":"latest"}'
    expect((await postJson(gw, '/obj/read', `\ufeff${text}`, aliceAuthorization)).status).toBe(200)
    expect(lastOf(store.received).rawBody.equals(Buffer.from(text, 'utf8'))).toBe(true)
  })
})

// ---------------------------------------------------------------- credentials

describe('credentials', () => {
  it('training: the upstream gets its configured Bearer token, never the client key', async () => {
    const text = JSON.stringify(jobBody())
    const answer = await postJson(gw, '/v1/preview/training-jobs', text, bearer, { cookie: `session=${platformKey.token}` })
    // expectAuthorization makes the stand-in refuse anything else with 401.
    expect(answer.status).toBe(200)
    const forwarded = lastOf(training.received)
    expect(forwarded.headers.authorization).toBe(`Bearer ${TRAINING_TOKEN}`)
    expect(forwarded.headers.cookie).toBeUndefined()
    expect(JSON.stringify(forwarded.headers)).not.toContain(platformKey.token)
    expect(forwarded.rawBody.toString('utf8')).not.toContain(platformKey.token)
  })

  it('checkpoints: the upstream gets its own configured token, not the training one nor the client key', async () => {
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints`)
    expect(answer.status).toBe(200)
    const forwarded = lastOf(checkpoints.received)
    expect(forwarded.headers.authorization).toBe(`Bearer ${CHECKPOINTS_TOKEN}`)
    expect(JSON.stringify(forwarded)).not.toContain(platformKey.token)
  })

  it('objects: the store gets its configured Basic credentials, never the client password', async () => {
    const text = JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'v0' })
    const answer = await postJson(gw, '/obj/read', text, aliceAuthorization, { 'proxy-authorization': aliceAuthorization })
    expect(answer.status).toBe(200)
    const forwarded = lastOf(store.received)
    expect(forwarded.headers.authorization).toBe(STORE_AUTHORIZATION)
    expect(forwarded.headers['proxy-authorization']).toBeUndefined()
    const seen = JSON.stringify(forwarded.headers) + forwarded.rawBody.toString('utf8')
    expect(seen).not.toContain(ALICE.password)
    expect(seen).not.toContain(aliceAuthorization.slice('Basic '.length))
  })

  it('an upstream refusing the configured credentials is passed through (401 from the upstream, not the gateway)', async () => {
    const answer = await trainingJobWith({ expectAuthorization: 'Bearer something-else' })
    expect(answer.status).toBe(401)
    expect(answer.text).toBe('{"detail":"Not authenticated"}')
  })

  it('forward_client: true passes the client Authorization header on unchanged', async () => {
    const clientBearer = `bearer ${platformKey.token}` // lower-case scheme: must arrive exactly like this
    const ownTraining = await startTrainingStandIn({ expectAuthorization: clientBearer, checkpoints: { [MODEL]: 2 } })
    const ownStore = await startObjectStoreStandIn({ expectAuthorization: aliceAuthorization })
    perTest.push(() => ownTraining.close(), () => ownStore.close())
    const forwarding = await extraGateway({
      auth: { keys: [platformKey.entry], users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
      upstreams: {
        training: { url: ownTraining.url, auth: { forward_client: true } },
        checkpoints: { url: ownTraining.url, auth: { forward_client: true } },
        objects: { url: ownStore.url, auth: { forward_client: true } },
      },
    })
    const job = await postJson(forwarding, '/v1/preview/training-jobs', JSON.stringify(jobBody()), clientBearer)
    expect(job.status).toBe(200)
    const list = await getPath(forwarding, `/v1/preview/models/${MODEL}/checkpoints`, clientBearer)
    expect(list.status).toBe(200)
    expect(ownTraining.received.map((r) => r.headers.authorization)).toEqual([clientBearer, clientBearer])
    const read = await postJson(forwarding, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }), aliceAuthorization)
    expect(read.status).toBe(200)
    expect(lastOf(ownStore.received).headers.authorization).toBe(aliceAuthorization)
  })

  it('an upstream without auth gets no Authorization header at all', async () => {
    const bare = await startTrainingStandIn({ checkpoints: { [MODEL]: 1 } })
    perTest.push(() => bare.close())
    const noAuth = await extraGateway({ auth: { keys: [platformKey.entry] }, upstreams: { checkpoints: { url: bare.url } } })
    const answer = await getPath(noAuth, `/v1/preview/models/${MODEL}/checkpoints`)
    expect(answer.status).toBe(200)
    expect(lastOf(bare.received).headers.authorization).toBeUndefined()
  })

  it('propagates X-Request-Id upstream and back on every route', async () => {
    const ids = ['req-train.1:a', 'req-ckpt.2:b', 'req-obj.3:c']
    const answers = [
      await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer, { 'x-request-id': ids[0]! }),
      await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints`, bearer, { 'x-request-id': ids[1]! }),
      await postJson(gw, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }), aliceAuthorization, { 'x-request-id': ids[2]! }),
    ]
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
    expect(answers.map((a) => a.headers['x-request-id'])).toEqual(ids)
    expect([training, checkpoints, store].map((s) => lastOf(s.received).headers['x-request-id'])).toEqual(ids)
  })

  it('without X-Request-Id the upstream and the client see the same generated id', async () => {
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints`)
    expect(answer.status).toBe(200)
    const id = answer.headers['x-request-id']
    expect(typeof id).toBe('string')
    expect(String(id).length).toBeGreaterThan(8)
    expect(lastOf(checkpoints.received).headers['x-request-id']).toBe(id)
  })

  it('never logs the client key, the client password or the upstream credentials', () => {
    const log = gw.logText()
    expect(log.length).toBeGreaterThan(0)
    for (const secret of [platformKey.token, ALICE.password, aliceAuthorization.slice(6), TRAINING_TOKEN, CHECKPOINTS_TOKEN, STORE_USER.password]) {
      expect(log).not.toContain(secret)
    }
  })
})

// ---------------------------------------------------------------- path safety

describe('checkpoint model_id path safety (raw request targets via node:http)', () => {
  const segments = ['..%2F..%2Fobj%2Fread', 'a%2Fb', 'a%5Cb', '%2e%2e', '%2E%2E', '%2e', '..', '%00', 'x'.repeat(600), '%252F', 'a%3Fb%23c', '%2e%2e%2f%2e%2e%2fv1%2fpreview%2ftraining-jobs']
  const SAFE_TARGET = /^\/v1\/preview\/models\/([^/?#]+)\/checkpoints\?limit=20&order=asc$/

  it.each(segments.map((s) => [s.length > 40 ? `${s.slice(0, 20)}…(${s.length} chars)` : s, s]))('%s: 400 in the error shape, or one encoded segment upstream', async (_label, segment) => {
    const before = checkpoints.received.length
    const answer = await getPath(gw, `/v1/preview/models/${segment}/checkpoints`)
    const reached = checkpoints.received.slice(before)
    // A decoded "/", "\\" or "%" is refused outright (src/schemas/checkpoints.ts).
    if (/[/\\%]/.test(decodeURIComponent(segment))) expect(answer.status).toBe(400)
    if (answer.status === 400) {
      expectGatewayError(answer, 400, { type: 'invalid_request_error', param: null })
      expect(reached).toEqual([])
      return
    }
    expect(reached).toHaveLength(1)
    const target = reached[0]!.url
    const match = SAFE_TARGET.exec(target)
    expect(match, `upstream was reached at ${target}`).not.toBeNull()
    // The segment decodes to exactly what the client's segment decoded to.
    expect(decodeURIComponent(match![1]!)).toBe(decodeURIComponent(segment))
    // The stand-in does not know such a model: its own 404 comes back unchanged.
    expect(answer.status).toBe(404)
    expect(JSON.parse(answer.text)).toEqual({ detail: `Model ${decodeURIComponent(segment)} not found` })
  })

  it('a cursor cannot smuggle query parameters: after=x&limit=500 arrives as one encoded value', async () => {
    const before = checkpoints.received.length
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints?after=x%26limit%3D500%26order%3Ddesc&limit=5`)
    expect(answer.status).toBe(400)
    expect(answer.text).toBe('{"detail":"Unknown cursor"}')
    const reached = checkpoints.received.slice(before)
    expect(reached.map((r) => r.url)).toEqual([`/v1/preview/models/${MODEL}/checkpoints?limit=5&order=asc&after=x%26limit%3D500%26order%3Ddesc`])
  })

  // Regression (security audit): model_id refused control characters, the cursor did not, and
  // `after=%0d%0aX-Evil:1` reached the upstream (its access log, at least) as a line break.
  it('a cursor with a control character is 400 on param after; nothing is forwarded', async () => {
    const before = checkpoints.received.length
    for (const after of ['%0d%0aX-Evil%3A1', 'abc%00', '%7f', '%c2%85']) {
      const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints?after=${after}`)
      expectGatewayError(answer, 400, { type: 'invalid_request_error', param: 'after' })
    }
    expect(checkpoints.received.length).toBe(before)
  })

  it('the dot-segment ids are refused by the gateway, not resolved', async () => {
    for (const segment of ['%2e%2e', '..', '%2e', '.']) {
      const answer = await getPath(gw, `/v1/preview/models/${segment}/checkpoints`)
      expectGatewayError(answer, 400, { type: 'invalid_request_error', param: null })
    }
  })

  // Regression (noticed by an audit, left until now): a server that normalizes what it decodes (NFKC)
  // reads the full-width dots U+FF0E as "..", and U+FF0F, U+FF3C, U+FF05 as "/", "\\", "%".
  it('the full-width forms of the dot segments and of / \\ % are refused too; other non-ASCII ids pass', async () => {
    const before = checkpoints.received.length
    for (const id of ['．．', '．', '‥', 'a／b', 'a＼b', 'a％2Fb', '﹒﹒']) {
      const answer = await getPath(gw, `/v1/preview/models/${encodeURIComponent(id)}/checkpoints`)
      expectGatewayError(answer, 400, { type: 'invalid_request_error', param: null })
    }
    expect(checkpoints.received.length).toBe(before)
    const answer = await getPath(gw, `/v1/preview/models/${encodeURIComponent('modèle-ｌｌａｍａ')}/checkpoints`)
    expect(answer.status).toBe(404)
    expect(checkpoints.received.length).toBe(before + 1)
  })

  it('nothing but the checkpoint path was ever requested from the checkpoints upstream', () => {
    for (const request of checkpoints.received) {
      expect(request.method).toBe('GET')
      expect(request.url).toMatch(/^\/v1\/preview\/models\/[^/?#]+\/checkpoints\?limit=\d+&order=(asc|desc)(&after=[^&/]+)?$/)
    }
  })

  // Regression: the router's own refusals (bad percent-encoding) now use the DESIGN.md error shape.
  it('a model_id with broken percent-encoding is 400 in the error shape', async () => {
    const before = checkpoints.received.length
    const answer = await getPath(gw, '/v1/preview/models/%E0%A4%A/checkpoints')
    expectGatewayError(answer, 400, { type: 'invalid_request_error' })
    expect(checkpoints.received.length).toBe(before)
  })

  // Regression (design review, session 24): the router's 400 came before credentials and scope, against
  // DESIGN.md's order, although the path is the checkpoint listing's.
  it('a model_id the router cannot decode is still 401 without credentials and 403 without the scope', async () => {
    const before = checkpoints.received.length
    for (const path of ['/v1/preview/models/%ZZ/checkpoints', '/v1/preview/models/%E0%A4%A/checkpoints/']) {
      const anonymous = await rawRequest(gw.url, { path })
      expectGatewayError(anonymous, 401, { type: 'authentication_error', code: 'missing_credentials' })
      expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer/)
      expectGatewayError(await getPath(gw, path, `Bearer ${chatKey.token}`), 403, { type: 'permission_error' })
      expectGatewayError(await getPath(gw, path), 400, { type: 'invalid_request_error', code: 'invalid_url' })
    }
    expect(checkpoints.received.length).toBe(before)
  })

  // Regression (platform review, session 24): an absolute-form target with a fragment, which the router
  // refuses, was told to check its percent-encoding.
  it('an absolute-form target with a fragment is 400 saying so', async () => {
    const before = checkpoints.received.length
    const answer = await getPath(gw, 'http://gateway.test/v1/preview/models/a/checkpoints#x')
    expectGatewayError(answer, 400, { type: 'invalid_request_error', code: 'invalid_url' })
    expect(JSON.parse(answer.text).error.message).toContain('fragment')
    expect(checkpoints.received.length).toBe(before)
  })

  // Regression (code review, session 24): the credential check ran for every method, so a POST was
  // challenged where the route serves only GET and HEAD (and a decodable one is a 404 at once).
  it('the same path with a method the route does not serve is 400 for anyone, and an encoding problem is named as one', async () => {
    const anonymous = await rawRequest(gw.url, { method: 'POST', path: '/v1/preview/models/%ZZ/checkpoints' })
    expectGatewayError(anonymous, 400, { type: 'invalid_request_error', code: 'invalid_url' })
    // In origin form a # is a query's start to the router: the refusal is the encoding's, and says so.
    const encoded = await getPath(gw, '/v1/preview/models/%ZZ/checkpoints#x')
    expectGatewayError(encoded, 400, { type: 'invalid_request_error', code: 'invalid_url' })
    expect(JSON.parse(encoded.text).error.message).toContain('percent-encoding')
  })

  // Regression: an over-long path segment reaches the route, so credentials are checked first (DESIGN.md), then model_id.
  it('a 5000-character model_id is answered in the error shape: 400 (param null: a path segment), 401 without credentials', async () => {
    const before = checkpoints.received.length
    const path = `/v1/preview/models/${'x'.repeat(5000)}/checkpoints`
    expectGatewayError(await getPath(gw, path), 400, { type: 'invalid_request_error', param: null, code: 'invalid_value' })
    const anonymous = await rawRequest(gw.url, { path })
    expectGatewayError(anonymous, 401, { type: 'authentication_error', code: 'missing_credentials' })
    expect(checkpoints.received.length).toBe(before)
  })
})

// ---------------------------------------------------------------- upstream answers

describe("upstream answers pass through unchanged", () => {
  it('checkpoints of an unknown model: the upstream 404 {"detail"} byte for byte', async () => {
    const answer = await getPath(gw, `/v1/preview/models/${UNKNOWN_MODEL}/checkpoints`)
    expect(answer.status).toBe(404)
    expect(answer.text).toBe(JSON.stringify({ detail: `Model ${UNKNOWN_MODEL} not found` }))
    expect(answer.headers['content-type']).toBe('application/json')
  })

  it('a training job for an unknown model: the upstream 404 byte for byte', async () => {
    const answer = await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(jobBody({ model_id: UNKNOWN_MODEL })), bearer)
    expect(answer.status).toBe(404)
    expect(answer.text).toBe(JSON.stringify({ detail: `Model ${UNKNOWN_MODEL} not found` }))
  })

  it("the object store's 404 {\"reason\"} byte for byte", async () => {
    const answer = await postJson(gw, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'nope', digest: 'latest' }), aliceAuthorization)
    expect(answer.status).toBe(404)
    expect(answer.text).toBe(JSON.stringify({ reason: 'Object demo/project/nope:latest not found' }))
  })

  it('an unknown cursor: the upstream 400 {"detail":"Unknown cursor"}, not a gateway error', async () => {
    const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints?after=${UNKNOWN_MODEL}`)
    expect(answer.status).toBe(400)
    expect(answer.text).toBe('{"detail":"Unknown cursor"}')
    expect(lastOf(checkpoints.received).url).toBe(`/v1/preview/models/${MODEL}/checkpoints?limit=20&order=asc&after=${UNKNOWN_MODEL}`)
  })

  it('a 422 the gateway could not foresee comes back as the upstream sent it', async () => {
    const answer = await trainingJobWith({ fail: 'status422' })
    expect(answer.status).toBe(422)
    expect(answer.text).toBe('{"detail":[{"type":"value_error","loc":["body","model_id"],"msg":"Value error, model is not trainable"}]}')
  })

  it('status 500 from the upstream is passed through, not turned into a gateway error', async () => {
    const previous = checkpoints.options
    checkpoints.options = { ...previous, fail: 'status500' }
    const previousStore = store.options
    store.options = { ...previousStore, fail: 'status500' }
    try {
      const answer = await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints`)
      expect(answer.status).toBe(500)
      expect(answer.text).toBe('{"detail":"stand-in failure"}')
      const read = await postJson(gw, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }), aliceAuthorization)
      expect(read.status).toBe(500)
      expect(read.text).toBe('{"reason":"stand-in failure"}')
    } finally {
      checkpoints.options = previous
      store.options = previousStore
    }
  })

  it('status, body bytes and end-to-end headers pass through; hop-by-hop headers do not', async () => {
    const answerBody = '{ "detail" : [ {"loc": ["body", "x"], "msg":"odd \\u00e9 spacing"} ] }\n\n'
    const seen: IncomingHttpHeaders[] = []
    const upstream: Server = createServer((req, res) => {
      seen.push(req.headers)
      req.resume()
      req.on('end', () => {
        res.writeHead(422, {
          'content-type': 'application/problem+json; charset=utf-8',
          'x-upstream-trace': 'abc123',
          'cache-control': 'no-store',
          'keep-alive': 'timeout=5, max=977',
          connection: 'x-private-hop',
          'x-private-hop': 'must-not-leak',
        })
        res.end(answerBody)
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    perTest.push(() => new Promise<void>((resolve) => upstream.close(() => resolve())))
    const port = (upstream.address() as AddressInfo).port
    const passing = await extraGateway({ auth: { keys: [platformKey.entry] }, upstreams: { training: { url: `http://127.0.0.1:${port}` } } })
    const answer = await postJson(passing, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer)
    expect(answer.status).toBe(422)
    expect(answer.text).toBe(answerBody)
    expect(answer.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(answer.headers['x-upstream-trace']).toBe('abc123')
    expect(answer.headers['cache-control']).toBe('no-store')
    expect(answer.headers['x-private-hop']).toBeUndefined()
    expect(String(answer.headers['keep-alive'] ?? '')).not.toContain('max=977')
    expect(seen).toHaveLength(1)
  })
})

describe('upstream failures', () => {
  it('an upstream with nothing listening → 502 upstream_error', async () => {
    const port = await closedPort()
    const down = await extraGateway({
      auth: { keys: [platformKey.entry] },
      upstreams: { training: { url: `http://127.0.0.1:${port}` }, checkpoints: { url: `http://127.0.0.1:${port}` } },
    })
    expectGatewayError(await postJson(down, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer), 502, { type: 'upstream_error', param: null })
    expectGatewayError(await getPath(down, `/v1/preview/models/${MODEL}/checkpoints`), 502, { type: 'upstream_error', param: null })
  })

  it('an upstream that never answers, with first_byte_ms 50 → 504 upstream_timeout, by the gateway’s own timer', async () => {
    const hanging = await startTrainingStandIn({ checkpoints: { [MODEL]: 1 }, fail: 'hang' })
    const hangingStore = await startObjectStoreStandIn({ fail: 'hang' })
    perTest.push(() => hanging.close(), () => hangingStore.close())
    const slow = await extraGateway({
      auth: { keys: [platformKey.entry], users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
      upstreams: {
        checkpoints: { url: hanging.url, timeouts: { first_byte_ms: 50 } },
        objects: { url: hangingStore.url, timeouts: { connect_ms: 1000, first_byte_ms: 50 } },
      },
    })
    // The gateway's timer and undici's own headers timeout (which cannot fire before its
    // first 499 ms tick) end the call with the same error class, so both give a 504; only
    // the gateway's builds it through undici's exports, which the spy sees.
    const ours = vi.spyOn(errors, 'HeadersTimeoutError')
    perTest.push(async () => ours.mockRestore())
    const started = performance.now()
    expectGatewayError(await getPath(slow, `/v1/preview/models/${MODEL}/checkpoints`), 504, { type: 'upstream_timeout', param: null })
    const elapsed = performance.now() - started
    expect(hanging.received).toHaveLength(1)
    expect(elapsed).toBeGreaterThanOrEqual(49)
    expect(ours).toHaveBeenCalledTimes(1)
    const read = await postJson(slow, '/obj/read', JSON.stringify({ project_id: 'p', object_id: 'o', digest: 'latest' }), aliceAuthorization)
    expectGatewayError(read, 504, { type: 'upstream_timeout', param: null })
    expect(ours).toHaveBeenCalledTimes(2)
  })
})

describe('shutdown', () => {
  it('a platform call still waiting for its upstream when the grace period runs out gets 503 shutting_down', async () => {
    const hanging = await startTrainingStandIn({ checkpoints: { [MODEL]: 1 }, fail: 'hang' })
    perTest.push(() => hanging.close())
    const draining = await startTestGateway({ models: MODELS, server: { shutdown_grace_ms: 200 }, auth: { keys: [platformKey.entry] }, upstreams: { checkpoints: { url: hanging.url } } })
    perTest.push(() => draining.shutdown())
    const listing = getPath(draining, `/v1/preview/models/${MODEL}/checkpoints`)
    await until(() => hanging.received.length === 1, 'the upstream holding the listing')
    await draining.shutdown()
    expectGatewayError(await listing, 503, { type: 'service_unavailable', param: null })
    const access = draining.logLines().filter((line) => line.msg === 'request completed')
    expect(access.map((line) => [line.status, line.error_code])).toEqual([[503, 'shutting_down']])
  })
})

describe('an upstream that is not configured', () => {
  it('has its route answered 404 in the error shape, even with valid credentials', async () => {
    const trainingOnly = await extraGateway({
      auth: { keys: [platformKey.entry], users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
      upstreams: { training: { url: training.url, auth: { bearer: TRAINING_TOKEN } } },
    })
    const before = checkpoints.received.length + store.received.length
    expectGatewayError(await getPath(trainingOnly, `/v1/preview/models/${MODEL}/checkpoints`), 404, { type: 'not_found_error', param: null, code: 'not_found' })
    const read = await postJson(trainingOnly, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }), aliceAuthorization)
    expectGatewayError(read, 404, { type: 'not_found_error', param: null, code: 'not_found' })
    expect(checkpoints.received.length + store.received.length).toBe(before)
    // The configured one still works.
    expect((await postJson(trainingOnly, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer)).status).toBe(200)
  })

  it('with no upstreams at all, all three routes are 404', async () => {
    const none = await extraGateway({ auth: { keys: [platformKey.entry] } })
    expectGatewayError(await postJson(none, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer), 404, { type: 'not_found_error', code: 'not_found' })
    expectGatewayError(await getPath(none, `/v1/preview/models/${MODEL}/checkpoints`), 404, { type: 'not_found_error', code: 'not_found' })
    expectGatewayError(await postJson(none, '/obj/read', '{}', aliceAuthorization), 404, { type: 'not_found_error', code: 'not_found' })
  })
})

// ---------------------------------------------------------------- metrics

describe('metrics', () => {
  function samples(text: string, name: string): Record<string, string>[] {
    return text
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`))
      .map((line) => Object.fromEntries([...line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!])))
  }

  it('counts each route family by name, with no raw path in any label', async () => {
    // One call per family, plus hostile paths, so the labels have something to leak.
    expect((await postJson(gw, '/v1/preview/training-jobs', JSON.stringify(jobBody()), bearer)).status).toBe(200)
    expect((await getPath(gw, `/v1/preview/models/${MODEL}/checkpoints`)).status).toBe(200)
    expect((await getPath(gw, `/v1/preview/models/${UNKNOWN_MODEL}/checkpoints`)).status).toBe(404)
    expect((await getPath(gw, '/v1/preview/models/..%2F..%2Fobj%2Fread/checkpoints')).status).toBe(400)
    expect((await getPath(gw, '/v1/preview/models/%2e%2e/checkpoints')).status).toBe(400)
    expect((await postJson(gw, '/obj/read', JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }), aliceAuthorization)).status).toBe(200)
    expect((await getPath(gw, '/no/such/path/secret-looking')).status).toBe(404)

    const response = await fetch(`${gw.url}/metrics`)
    expect(response.status).toBe(200)
    const text = await response.text()
    const requests = samples(text, 'sluice_requests_total')
    for (const route of ['training', 'checkpoints', 'objects']) {
      expect(requests.some((labels) => labels.route === route && labels.status === '200')).toBe(true)
    }
    expect(requests.some((l) => l.route === 'checkpoints' && l.status === '404')).toBe(true)
    expect(requests.some((l) => l.route === 'checkpoints' && l.status === '400')).toBe(true)
    const families = new Set(['chat', 'models', 'training', 'checkpoints', 'objects', 'service', 'unknown'])
    for (const labels of [...requests, ...samples(text, 'sluice_request_duration_seconds_count')]) {
      expect(families.has(labels.route ?? '')).toBe(true)
      expect(['', 'm']).toContain(labels.model)
    }
    for (const line of text.split('\n').filter((l) => l.startsWith('sluice_'))) {
      for (const leak of ['/v1/', '/obj', 'preview', '..', '%2', MODEL, UNKNOWN_MODEL, PAGED_MODEL, 'secret-looking', 'no/such']) {
        expect(line).not.toContain(leak)
      }
    }
  })
})
