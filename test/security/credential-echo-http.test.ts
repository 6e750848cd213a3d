/**
 * An upstream whose error answer quotes the credential the gateway sent it
 * ("Incorrect API key provided: Bearer …", as OpenAI-style servers and
 * proxies write a 401): the client gets the answer with that credential
 * replaced by `[redacted]`, status and every other byte as they were.
 * Regression (security review, 2026-11-28): the gateway's own api_key,
 * bearer token and Basic credentials reached the client that way.
 */
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { listenForTest } from '../support/listen.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { exactRequest } from '../support/raw-http.js'

const cleanups = trackedAfterEach()
const key = makeKey('client', ['chat', 'training'])
const API_KEY = 'sk-BACKEND-SECRET-1234'
const TRAINING_TOKEN = 'TRAINING-SECRET-5678'
const MODEL_ID = '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43'

/** Answers every request 401, quoting the Authorization header it received. */
async function echoingUpstream(): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const body = JSON.stringify({ error: { message: `Incorrect API key provided: ${req.headers.authorization ?? ''}`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
      res.writeHead(401, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
  })
  return listenForTest(server, cleanups)
}

async function gatewayFor(url: string): Promise<TestGateway> {
  return cleanups.gateway({
    auth: { keys: [key.entry] },
    models: [{ name: 'm', retries: 0, health: { unhealthy_after: 10 }, backends: [{ url, name: 'b', api_key: API_KEY }] }],
    upstreams: { training: { url, auth: { bearer: TRAINING_TOKEN } } },
  })
}

function post(gw: TestGateway, path: string, body: unknown) {
  return exactRequest(gw.url, { method: 'POST', path, headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body), timeoutMs: 5000 })
}

describe('an upstream error answer that quotes the gateway credential', () => {
  it('chat: the backend api_key is replaced, the status and the rest of the body kept', async () => {
    const gw = await gatewayFor(await echoingUpstream())
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(401)
    expect(answer.text).not.toContain(API_KEY)
    expect(JSON.parse(answer.text)).toEqual({ error: { message: 'Incorrect API key provided: Bearer [redacted]', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.text))
  })

  it('training: the upstream bearer token is replaced likewise', async () => {
    const gw = await gatewayFor(await echoingUpstream())
    const answer = await post(gw, '/v1/preview/training-jobs', { model_id: MODEL_ID, trajectory_groups: [] })
    expect(answer.status).toBe(401)
    expect(answer.text).not.toContain(TRAINING_TOKEN)
    expect(JSON.parse(answer.text).error.message).toBe('Incorrect API key provided: Bearer [redacted]')
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.text))
  })
})
