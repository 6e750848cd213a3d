/**
 * A request answered before its body was read (no credentials: 401; unknown
 * path: 404) while the body is still coming. Node would read and discard the
 * rest of it, however long, to keep the connection; no body limit applies
 * there, since no route reads it. The answer says `Connection: close` and the
 * connection goes instead, unless the body was announced small (64 KiB at
 * most), as the usual request's is.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { expectErrorBody, rawExchange } from '../support/raw-http.js'

describe('an answer sent before the request body was read', () => {
  let gw: TestGateway
  const key = makeKey('k', ['chat'])
  beforeAll(async () => {
    gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
  })
  afterAll(() => gw.shutdown())

  // 5 MB announced, or chunked; 1,000 bytes sent: the rest would have been read and thrown away, for as long as the client sent it.
  const FRAMINGS = {
    'Content-Length': `Content-Length: 5000000\r\n\r\n${'x'.repeat(1000)}`,
    chunked: `Transfer-Encoding: chunked\r\n\r\n100000\r\n${'x'.repeat(1000)}`,
  }
  const ROUTES = [
    { route: 'unknown path: 404', head: 'POST /nope HTTP/1.1\r\nHost: gw\r\n', status: 404, code: 'not_found' },
    { route: 'no credentials: 401', head: 'POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n', status: 401, code: 'missing_credentials' },
  ]

  // Regression: both kept the connection and read on (200 MiB in a probe, with no limit in sight); a
  // 404 with a JSON Content-Type read and parsed the body, up to body_limit_bytes, before answering.
  it.each(ROUTES.flatMap((r) => Object.entries(FRAMINGS).map(([framing, rest]) => ({ ...r, framing, rest }))))('$route, $framing: with Connection: close, and the connection closed while the body is still coming', async ({ head, rest, status, code }) => {
    const exchange = await rawExchange(gw.url, `${head}Content-Type: application/json\r\n${rest}`)

    expect(exchange.responses.map((response) => response.status)).toEqual([status])
    expect(expectErrorBody(exchange.responses[0]!).code).toBe(code)
    expect(exchange.responses[0]!.headers.connection).toBe('close')
    expect(exchange.closed).toBe(true)
  })

  // Regression (HTTP review): GET routes read no body, and Node read one to its end (200 MB in a probe).
  it.each(Object.entries(FRAMINGS))('GET /healthz with a %s body still coming: answered, then the connection closed', async (_framing, rest) => {
    const exchange = await rawExchange(gw.url, `GET /healthz HTTP/1.1\r\nHost: gw\r\n${rest}`)

    expect(exchange.responses.map((response) => response.status)).toEqual([200])
    expect(exchange.responses[0]!.headers.connection).toBe('close')
    expect(exchange.closed).toBe(true)
  })

  it('control: a GET with a short body keeps the connection', async () => {
    const exchange = await rawExchange(gw.url, 'GET /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')

    expect(exchange.responses.map((response) => response.status)).toEqual([200, 200])
    expect(exchange.responses[0]!.headers.connection).toBe('keep-alive')
  })

  // Regression (HTTP review): fastify closed the connection after every body-parser refusal.
  it.each([
    ['invalid JSON', '{'],
    ['an empty body', ''],
    ['bytes that are not UTF-8', '"\xff"'],
  ])('a body read to its end and refused (%s) keeps the connection', async (_name, body) => {
    const bytes = Buffer.from(body, 'latin1')
    const refused = Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`), bytes])
    const exchange = await rawExchange(gw.url, Buffer.concat([refused, Buffer.from('GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')]))

    expect(exchange.responses.map((response) => response.status)).toEqual([400, 200])
    expect(expectErrorBody(exchange.responses[0]!).code).toBe('invalid_json')
    // No Connection header: HTTP/1.1's default, persistent.
    expect(exchange.responses[0]!.headers.connection).toBeUndefined()
  })

  it('a small body keeps the connection: the next requests on it are answered', async () => {
    const request = (path: string, connection: string) => `POST ${path} HTTP/1.1\r\nHost: gw\r\nConnection: ${connection}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`

    const exchange = await rawExchange(gw.url, `${request('/v1/chat/completions', 'keep-alive')}${request('/nope', 'keep-alive')}${request('/nope', 'close')}`)

    expect(exchange.responses.map((response) => response.status)).toEqual([401, 404, 404])
    expect(exchange.responses.slice(0, 2).map((response) => response.headers.connection)).toEqual(['keep-alive', 'keep-alive'])
  })
})
