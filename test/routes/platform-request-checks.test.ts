/**
 * What the platform routes check before forwarding, beyond the body and
 * query tables of platform.test.ts: the `X-Request-Id` header (400, after
 * the credentials, as on the chat route), the edges of the checkpoint
 * `model_id` (C1 controls, 512 characters counted as code points), the
 * checkpoint query members that are dropped, Content-Encoding (415), and
 * prototype keys in a free-form member (400 naming the key). A
 * gateway on port 0 in front of recording upstreams that answer 200.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import type { RecordingServer } from '../../src/dev/recording-server.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { okUpstream } from '../support/listen.js'
import { exactRequest, expectErrorBody, type RawResponse } from '../support/raw-http.js'

const platformKey = makeKey('platform', ['training', 'checkpoints'])
const chatKey = makeKey('chat-only', ['chat'])
const ALICE = { username: 'alice', password: 'alice-pw-0001' }
const BOB = { username: 'bob', password: 'bob-pw-0002' }
const bearer = `Bearer ${platformKey.token}`
const basic = (user: { username: string; password: string }) => `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`
const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'

let upstream: RecordingServer
let gw: TestGateway

beforeAll(async () => {
  upstream = await okUpstream()
  gw = await startTestGateway({
    auth: {
      keys: [platformKey.entry, chatKey.entry],
      users: [
        { username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] },
        { username: BOB.username, password_scrypt: await hashPassword(BOB.password), scopes: [] },
      ],
    },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: { training: { url: upstream.url }, checkpoints: { url: upstream.url }, objects: { url: upstream.url } },
  })
})

afterAll(async () => {
  await gw?.shutdown()
  await upstream?.close()
})

interface PlatformCall {
  readonly name: string
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly authorization: string
  /** Valid credentials without the route's scope. */
  readonly lacksScope: string
  readonly body: string | null
}

const CALLS: readonly PlatformCall[] = [
  { name: 'training', method: 'POST', path: '/v1/preview/training-jobs', authorization: bearer, lacksScope: `Bearer ${chatKey.token}`, body: JSON.stringify({ model_id: MODEL, trajectory_groups: [] }) },
  { name: 'checkpoints', method: 'GET', path: `/v1/preview/models/${MODEL}/checkpoints`, authorization: bearer, lacksScope: `Bearer ${chatKey.token}`, body: null },
  { name: 'objects', method: 'POST', path: '/obj/read', authorization: basic(ALICE), lacksScope: basic(BOB), body: JSON.stringify({ project_id: 'p', object_id: 'o', digest: 'latest' }) },
]

function send(call: PlatformCall, headers: Record<string, string>): Promise<RawResponse> {
  const contentType: Record<string, string> = call.body === null ? {} : { 'content-type': 'application/json' }
  return exactRequest(gw.url, { method: call.method, path: call.path, headers: { ...contentType, ...headers }, body: call.body })
}

describe('X-Request-Id on the platform routes', () => {
  const invalid = ['bad id with spaces', 'x'.repeat(129), 'id/with/slashes']

  describe.each(CALLS)('$name', (call) => {
    it.each(invalid.map((id) => [id.length > 40 ? `${id.slice(0, 10)}…(${id.length})` : id, id]))('%s → 400 invalid_request_id, nothing forwarded', async (_label, id) => {
      const before = upstream.received.length
      const answer = await send(call, { authorization: call.authorization, 'x-request-id': id })
      expect(answer.status).toBe(400)
      expect(expectErrorBody(answer)).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request_id', param: null })
      expect(answer.headers['x-request-id']).not.toBe(id)
      expect(upstream.received.length).toBe(before)
    })

    it('credentials come first: without them 401, with the wrong scope 403', async () => {
      const before = upstream.received.length
      const missing = await send(call, { 'x-request-id': 'bad id' })
      expect(missing.status).toBe(401)
      expect(expectErrorBody(missing).code).toBe('missing_credentials')
      const refused = await send(call, { authorization: call.lacksScope, 'x-request-id': 'bad id' })
      expect(refused.status).toBe(403)
      expect(expectErrorBody(refused).code).toBe('insufficient_scope')
      expect(upstream.received.length).toBe(before)
    })

    it('an empty header counts as absent: forwarded under a generated id', async () => {
      const answer = await send(call, { authorization: call.authorization, 'x-request-id': '' })
      expect(answer.status).toBe(200)
      const id = answer.headers['x-request-id']
      expect(id).toMatch(/^[A-Za-z0-9._:-]{8,128}$/)
      expect(upstream.received.at(-1)!.headers['x-request-id']).toBe(id)
    })
  })
})

describe('checkpoint model_id edges', () => {
  const listing = (segment: string) => exactRequest(gw.url, { method: 'GET', path: `/v1/preview/models/${segment}/checkpoints`, headers: { authorization: bearer } })

  it.each(['%C2%80', '%C2%85', '%C2%9F', 'a%C2%9Bb'])('%s (a C1 control character) → 400 naming model_id, nothing forwarded', async (segment) => {
    const before = upstream.received.length
    const answer = await listing(segment)
    expect(answer.status).toBe(400)
    expect(expectErrorBody(answer)).toMatchObject({ type: 'invalid_request_error', param: null, message: expect.stringContaining("The path's model_id") })
    expect(upstream.received.length).toBe(before)
  })

  it('%C2%A0 (the first character past C1) is forwarded', async () => {
    const answer = await listing('%C2%A0')
    expect(answer.status).toBe(200)
    expect(upstream.received.at(-1)!.url).toBe('/v1/preview/models/%C2%A0/checkpoints?limit=20&order=asc')
  })

  it('512 characters outside the BMP (1024 UTF-16 units) are forwarded; 513 are 400', async () => {
    const emoji = '%F0%9F%98%80'
    const accepted = await listing(emoji.repeat(512))
    expect(accepted.status).toBe(200)
    expect(upstream.received.at(-1)!.url).toBe(`/v1/preview/models/${emoji.repeat(512)}/checkpoints?limit=20&order=asc`)
    const before = upstream.received.length
    const refused = await listing(emoji.repeat(513))
    expect(refused.status).toBe(400)
    expect(expectErrorBody(refused).param).toBeNull()
    expect(upstream.received.length).toBe(before)
  })
})

describe('checkpoint query members the interface does not list', () => {
  it('are dropped: the upstream, answering the gateway’s credential, sees only limit, order and after', async () => {
    const query = 'limit=5&foo=bar&order=desc&include_deleted=true&%3Flimit=500&after=ck-9&owner=other-team'
    const answer = await exactRequest(gw.url, { method: 'GET', path: `/v1/preview/models/${MODEL}/checkpoints?${query}`, headers: { authorization: bearer } })
    expect(answer.status).toBe(200)
    expect(upstream.received.at(-1)!.url).toBe(`/v1/preview/models/${MODEL}/checkpoints?limit=5&order=desc&after=ck-9`)
  })
})

describe('checkpoint query percent-encoding', () => {
  const listing = (query: string) => exactRequest(gw.url, { method: 'GET', path: `/v1/preview/models/${MODEL}/checkpoints?${query}`, headers: { authorization: bearer } })

  // Regression (audit): `after=%FF` reached the upstream as `after=%25FF`, another cursor than the client's.
  it.each(['after=%FF', 'after=%zz', 'after=ab%', 'af%74er=%C3', 'limit=5&after=ck%E2%82'])('%s → 400 param after, nothing forwarded', async (query) => {
    const before = upstream.received.length
    const answer = await listing(query)
    expect(answer.status).toBe(400)
    expect(expectErrorBody(answer)).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'after' })
    expect(upstream.received.length).toBe(before)
  })

  it('valid escapes are decoded and re-encoded; a broken one in a dropped member does not matter; leading zeros in limit are fine', async () => {
    const answer = await listing('after=ck%2D9%20%E2%82%AC&x=%FF&limit=00005')
    expect(answer.status).toBe(200)
    expect(upstream.received.at(-1)!.url).toBe(`/v1/preview/models/${MODEL}/checkpoints?limit=5&order=asc&after=ck-9+%E2%82%AC`)
  })
})

describe('Content-Encoding on the platform bodies', () => {
  const withBody = CALLS.filter((call) => call.body !== null)

  it.each(withBody.map((call) => [call.name, call] as const))('%s: gzip → 415 unsupported_media_type, nothing forwarded; without credentials 401 first', async (_name, call) => {
    const before = upstream.received.length
    const refused = await send(call, { authorization: call.authorization, 'content-encoding': 'gzip' })
    expect(refused.status).toBe(415)
    expect(expectErrorBody(refused)).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_media_type', param: null })
    const anonymous = await send(call, { 'content-encoding': 'gzip' })
    expect(anonymous.status).toBe(401)
    expect(upstream.received.length).toBe(before)
  })
})

describe('a prototype key in a free-form member of a training job', () => {
  // Regression (audit): refused as "not valid JSON" with param null, so the client could not tell what to change.
  it.each([
    ['metadata.__proto__', { metadata: JSON.parse('{"__proto__": "x"}') as unknown }, 'trajectory_groups.0.trajectories.0.metadata.__proto__'],
    ['metadata.constructor.prototype', { metadata: { constructor: { prototype: 1 } } }, 'trajectory_groups.0.trajectories.0.metadata.constructor'],
  ])('%s: 400 invalid_value naming the key, nothing forwarded', async (_name, trajectory, param) => {
    const before = upstream.received.length
    const body = JSON.stringify({ model_id: MODEL, trajectory_groups: [{ trajectories: [trajectory] }] })
    expect(body).toContain(param.split('.').at(-1)!)

    const refused = await exactRequest(gw.url, { method: 'POST', path: '/v1/preview/training-jobs', headers: { authorization: bearer, 'content-type': 'application/json' }, body })

    expect(refused.status).toBe(400)
    const error = expectErrorBody(refused)
    expect(error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param })
    expect(error.message).toContain('rename it')
    expect(upstream.received.length).toBe(before)
  })
})
