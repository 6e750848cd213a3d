/**
 * A secret a client puts in its request target, where no route reads it: a
 * fragment (`#token=…`) or an absolute-form target's `user:pw@` authority.
 * Neither may reach the access log or an error body (a security review,
 * 2026-11-28: both kept them, cutting only at `?`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { until } from '../support/metrics.js'
import { rawExchange } from '../support/raw-http.js'

const key = makeKey('reader', ['chat'])
let backend: VllmStandIn
let gw: TestGateway

beforeAll(async () => {
  backend = await startVllmStandIn()
  gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })
})

afterAll(async () => {
  await gw.shutdown()
  await backend.close()
})

function get(target: string, authorized: boolean): Promise<Awaited<ReturnType<typeof rawExchange>>> {
  const authorization = authorized ? `Authorization: Bearer ${key.token}\r\n` : ''
  return rawExchange(gw.url, `GET ${target} HTTP/1.1\r\nHost: gateway.test\r\n${authorization}Connection: close\r\n\r\n`)
}

describe('secrets in a request target', () => {
  it.each([
    // A fragment is refused (RFC 9112 §3.2: an HTTP review, session 27), and its secret still shown nowhere.
    ['a fragment on a served path', '/v1/models#token=FRAGMENT-SECRET-1', true, 400, '/v1/models'],
    ['a fragment on an unknown path', '/nothing#token=FRAGMENT-SECRET-2', false, 404, '/nothing'],
    ['an absolute-form target with userinfo', 'http://user:USERINFO-SECRET-3@evil.example/v1/models', true, 200, '/v1/models'],
    ['an absolute-form target with userinfo, unknown path', 'http://user:USERINFO-SECRET-4@evil.example/nothing', false, 404, '/nothing'],
  ])('%s: the answer and the access line show the path alone', async (_label, target, authorized, status, path) => {
    const secret = /[A-Z]+-SECRET-\d/.exec(target)![0]
    const exchange = await get(target, authorized)
    expect(exchange.responses[0]!.status).toBe(status)
    expect(exchange.wire).not.toContain(secret)
    await until(() => gw.logText().includes(`"path":"${path}"`) && gw.logLines().some((l) => l.msg === 'request completed' && l.path === path && l.status === status), 'the access line', 2000)
    expect(gw.logText()).not.toContain(secret)
  })
})
