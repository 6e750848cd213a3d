import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'

const chatKey = makeKey('chat-key', ['chat'])
const trainingKey = makeKey('training-only', ['training'])
let backend: VllmStandIn
let gw: TestGateway

beforeAll(async () => {
  backend = await startVllmStandIn()
  gw = await startTestGateway({ auth: { keys: [chatKey.entry, trainingKey.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })
})

afterAll(async () => {
  await gw.shutdown()
  await backend.close()
})

const validBody = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })

async function call(path: string, authorization: string | undefined, method = 'POST') {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (authorization !== undefined) headers.authorization = authorization
  const response = await fetch(`${gw.url}${path}`, { method, headers, body: method === 'POST' ? validBody : undefined })
  return { status: response.status, challenge: response.headers.get('www-authenticate'), body: (await response.json()) as { error: Record<string, unknown> } }
}

describe('Bearer authentication on chat and /v1/models', () => {
  const cases: [string, string | undefined, string][] = [
    ['no header', undefined, 'missing_credentials'],
    ['empty header', '', 'missing_credentials'],
    ['wrong token', 'Bearer sk-not-a-real-key', 'invalid_credentials'],
    ['a valid token with different case', `Bearer ${chatKey.token.toUpperCase()}`, 'invalid_credentials'],
    ['a valid token with trailing garbage', `Bearer ${chatKey.token}x`, 'invalid_credentials'],
    ['Basic credentials on a Bearer route', `Basic ${Buffer.from('alice:pw').toString('base64')}`, 'wrong_auth_scheme'],
    ['a scheme and nothing else', 'Bearer', 'invalid_credentials'],
  ]

  for (const path of ['/v1/chat/completions', '/v1/models']) {
    it.each(cases)(`${path}: %s → 401 with a Bearer challenge`, async (_name, authorization, code) => {
      const before = backend.received.length
      const { status, challenge, body } = await call(path, authorization, path === '/v1/models' ? 'GET' : 'POST')
      expect(status).toBe(401)
      expect(challenge).toMatch(/^Bearer realm="sluice"/)
      expect(body.error).toEqual({ message: expect.any(String), type: 'authentication_error', param: null, code })
      expect(backend.received.length).toBe(before)
    })
  }

  // Regression (audit): the message echoed the scheme word, which is the token itself when a client sends it without one.
  it('a wrong scheme is named only when it is Basic: an unknown word may be the token', async () => {
    const token = `${chatKey.token} x`
    const unknown = await call('/v1/chat/completions', token)
    expect(unknown.body.error).toMatchObject({ code: 'wrong_auth_scheme', message: 'This route takes Bearer credentials: send "Authorization: Bearer <credentials>".' })
    expect(JSON.stringify(unknown.body).toLowerCase()).not.toContain(chatKey.token.toLowerCase())
    const basic = await call('/v1/chat/completions', `Basic ${Buffer.from('alice:pw').toString('base64')}`)
    expect(basic.body.error.message).toBe('This route takes Bearer credentials, not Basic.')
  })

  it('a valid key without the chat scope gets 403', async () => {
    const before = backend.received.length
    const { status, body } = await call('/v1/chat/completions', `Bearer ${trainingKey.token}`)
    expect(status).toBe(403)
    expect(body.error).toMatchObject({ type: 'permission_error', code: 'insufficient_scope', param: null })
    expect(backend.received.length).toBe(before)
  })

  it('checks credentials before the body: bad JSON without a key is 401, not 400', async () => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{nope' })
    expect(response.status).toBe(401)
  })

  it('accepts the scheme name case-insensitively (RFC 9110)', async () => {
    const { status } = await call('/v1/chat/completions', `bearer ${chatKey.token}`)
    expect(status).toBe(200)
  })

  it('lists the configured public models for a chat key', async () => {
    const response = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${chatKey.token}` } })
    const body = (await response.json()) as { object: string; data: Record<string, unknown>[] }
    expect(response.status).toBe(200)
    expect(body.object).toBe('list')
    expect(body.data).toEqual([{ id: 'm', object: 'model', created: expect.any(Number), owned_by: 'sluice' }])
  })

  it.each([
    ['outside the alphabet', 'bad id'],
    ['over 128 characters', 'x'.repeat(129)],
  ])('/v1/models refuses an X-Request-Id %s (400 invalid_request_id), as chat and the platform routes do', async (_label, id) => {
    const response = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${chatKey.token}`, 'x-request-id': id } })
    const body = (await response.json()) as { error: Record<string, unknown> }
    expect(response.status).toBe(400)
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request_id', param: null })
    // The answer names a generated id, never the refused one.
    expect(response.headers.get('x-request-id')).not.toBe(id)
  })

  it('/v1/models echoes a valid X-Request-Id', async () => {
    const response = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${chatKey.token}`, 'x-request-id': 'list-1' } })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-request-id')).toBe('list-1')
  })

  it('never sends the client token upstream and never logs it', async () => {
    const { status } = await call('/v1/chat/completions', `Bearer ${chatKey.token}`)
    expect(status).toBe(200)
    const forwarded = backend.received.at(-1)!
    expect(forwarded.headers.authorization).toBeUndefined()
    expect(JSON.stringify(forwarded)).not.toContain(chatKey.token)
    // Every request above, accepted or refused, wrote its log line without the secret.
    expect(gw.logText()).not.toContain(chatKey.token)
    expect(gw.logText()).not.toContain(trainingKey.token)
    const lines = gw.logLines().filter((l) => l.msg === 'request completed')
    expect(lines.some((l) => l.principal === 'chat-key' && l.status === 200)).toBe(true)
  })
})
