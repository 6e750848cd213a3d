/**
 * A 403 (valid credentials without the route's scope) is logged under the
 * principal that lacked the scope, whichever way it was identified: a Bearer
 * key (checked synchronously), a Basic user (checked with scrypt, a
 * promise), or credentials the connection had already proved.
 */
import { Agent } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import type { RecordingServer } from '../../src/dev/recording-server.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { okUpstream } from '../support/listen.js'
import { until } from '../support/metrics.js'
import { exactRequest } from '../support/raw-http.js'

const checkpointsKey = makeKey('checkpoints-only', ['checkpoints'])
const BOB = { username: 'bob', password: 'bob-pw-0002' }
const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const JOB = JSON.stringify({ model_id: MODEL, trajectory_groups: [] })

let upstream: RecordingServer
let gw: TestGateway

beforeAll(async () => {
  upstream = await okUpstream()
  gw = await startTestGateway({
    auth: { keys: [checkpointsKey.entry], users: [{ username: BOB.username, password_scrypt: await hashPassword(BOB.password), scopes: [] }] },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: { training: { url: upstream.url }, checkpoints: { url: upstream.url }, objects: { url: upstream.url } },
  })
})

afterAll(async () => {
  await gw?.shutdown()
  await upstream?.close()
})

async function accessLine(requestId: string): Promise<Record<string, unknown>> {
  const find = () => gw.logLines().find((l) => l.msg === 'request completed' && l.request_id === requestId)
  await until(() => find() !== undefined, `the access line of ${requestId}`)
  return find()!
}

const postJob = (authorization: string, requestId: string, agent?: Agent) =>
  exactRequest(gw.url, {
    method: 'POST',
    path: '/v1/preview/training-jobs',
    headers: { authorization, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JOB,
    agent,
  })

describe('the access line of a 403 names the principal', () => {
  it('a Bearer key without the scope', async () => {
    const answer = await postJob(`Bearer ${checkpointsKey.token}`, 'scope-bearer-1')
    expect(answer.status).toBe(403)
    expect(await accessLine('scope-bearer-1')).toMatchObject({ status: 403, principal: 'checkpoints-only', error_code: 'insufficient_scope' })
  })

  it('a Basic user without the scope', async () => {
    const answer = await exactRequest(gw.url, {
      method: 'POST',
      path: '/obj/read',
      headers: { authorization: `Basic ${Buffer.from(`${BOB.username}:${BOB.password}`).toString('base64')}`, 'content-type': 'application/json', 'x-request-id': 'scope-basic-1' },
      body: JSON.stringify({ project_id: 'p', object_id: 'o', digest: 'latest' }),
    })
    expect(answer.status).toBe(403)
    expect(await accessLine('scope-basic-1')).toMatchObject({ status: 403, principal: 'bob', error_code: 'insufficient_scope' })
  })

  it('a key its connection already proved on another route', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const listed = await exactRequest(gw.url, {
        method: 'GET',
        path: `/v1/preview/models/${MODEL}/checkpoints`,
        headers: { authorization: `Bearer ${checkpointsKey.token}`, 'x-request-id': 'scope-proven-0' },
        agent,
      })
      expect(listed.status).toBe(200)
      const answer = await postJob(`Bearer ${checkpointsKey.token}`, 'scope-proven-1', agent)
      expect(answer.status).toBe(403)
      expect(await accessLine('scope-proven-1')).toMatchObject({ status: 403, principal: 'checkpoints-only', error_code: 'insufficient_scope' })
    } finally {
      agent.destroy()
    }
  })

  it('a 401 still names no one', async () => {
    const answer = await postJob('Bearer sk-not-a-key', 'scope-unknown-1')
    expect(answer.status).toBe(401)
    expect(await accessLine('scope-unknown-1')).toMatchObject({ status: 401, principal: null })
  })
})
