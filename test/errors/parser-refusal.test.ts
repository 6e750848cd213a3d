import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parserRefusal } from '../../src/errors/parser-refusal.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { scrapeMetricSum, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'
import { once } from 'node:events'
import { expectErrorBody, rawExchange } from '../support/raw-http.js'

describe('parserRefusal', () => {
  it('maps Node parser errors to DESIGN.md errors: 431 for headers, 408 for a slow request, else 400', () => {
    const of = (code: string, reason?: string) => parserRefusal(Object.assign(new Error('parse error'), { code, reason }))
    expect(of('HPE_HEADER_OVERFLOW')).toMatchObject({ status: 431, code: 'headers_too_large', type: 'invalid_request_error' })
    expect(of('ERR_HTTP_REQUEST_TIMEOUT')).toMatchObject({ status: 408, code: 'request_timeout' })
    expect(of('HPE_INVALID_HEADER_TOKEN', 'Invalid header token')).toMatchObject({ status: 400, code: 'malformed_http', message: 'The request is not valid HTTP/1.1: Invalid header token.' })
    expect(of('HPE_UNEXPECTED_CONTENT_LENGTH')).toMatchObject({ status: 400, code: 'malformed_http', message: 'The request is not valid HTTP/1.1.' })
  })

  it('never echoes a long reason (it would be input, not a fixed phrase)', () => {
    expect(parserRefusal(Object.assign(new Error('x'), { code: 'HPE_X', reason: 'r'.repeat(500) })).message).toBe('The request is not valid HTTP/1.1.')
  })
})

describe('a request the HTTP parser refuses, through a gateway', () => {
  let gw: TestGateway
  const key = makeKey('k', ['chat'])
  beforeAll(async () => {
    gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
  })
  afterAll(() => gw.shutdown())

  const requestsRefused = (status: number) => scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'unknown', model: '', status: String(status) })

  it('is answered in the DESIGN.md shape, the connection closed, and counted in sluice_requests_total', async () => {
    const before = await requestsRefused(400)
    const exchange = await rawExchange(gw.url, 'GET /v1/models HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')
    expect(exchange.responses).toHaveLength(1)
    expect(exchange.responses[0]!.status).toBe(400)
    expect(expectErrorBody(exchange.responses[0]!).code).toBe('malformed_http')
    expect(exchange.responses[0]!.headers['content-type']).toBe('application/json')
    // Written by hand, and dated as Node's own answers are (an HTTP review, session 24).
    expect(Date.parse(exchange.responses[0]!.headers.date!)).toBeGreaterThan(Date.now() - 60_000)
    expect(exchange.closed).toBe(true)
    expect(await requestsRefused(400)).toBe(before + 1)
  })

  // Regression: Node closed a CONNECT's connection without a byte (no route ever saw it).
  // The app refuses it (Node's parser lets it through): it is malformed all the same, so the connection goes too.
  it('an HTTP/1.1 request without Host is 400 malformed_http and its connection closed, like a parser refusal', async () => {
    const exchange = await rawExchange(gw.url, 'GET /healthz HTTP/1.1\r\n\r\n')
    expect(exchange.responses).toHaveLength(1)
    expect(exchange.responses[0]!.status).toBe(400)
    expect(expectErrorBody(exchange.responses[0]!).code).toBe('malformed_http')
    expect(exchange.responses[0]!.headers.connection).toBe('close')
    expect(exchange.closed).toBe(true)
  })

  // Regression: Node answered a bare 417, no body, and kept the connection open for the body the client held back.
  it('an Expect other than 100-continue is 417 in the DESIGN.md shape, its connection closed, counted', async () => {
    const before = await requestsRefused(417)
    const exchange = await rawExchange(gw.url, `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n`)
    expect(exchange.responses.map((response) => response.status)).toEqual([417])
    expect(expectErrorBody(exchange.responses[0]!)).toMatchObject({ type: 'invalid_request_error', code: 'expectation_failed', param: null })
    expect(exchange.responses[0]!.headers.connection).toBe('close')
    expect(exchange.closed).toBe(true)
    expect(await requestsRefused(417)).toBe(before + 1)
  })

  it('a CONNECT gets the unknown-route answer (404 in the DESIGN.md shape), the connection closed, counted', async () => {
    const before = await requestsRefused(404)
    const exchange = await rawExchange(gw.url, 'CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n')
    expect(exchange.responses.map((response) => response.status)).toEqual([404])
    expect(expectErrorBody(exchange.responses[0]!)).toMatchObject({ type: 'not_found_error', code: 'not_found', param: null })
    expect(exchange.closed).toBe(true)
    expect(await requestsRefused(404)).toBe(before + 1)
  })

  // Regression (review): node:http takes its 'error' listener off a CONNECT's socket, so writing
  // the 404 to a socket the client had reset threw, uncaught, and took the gateway down.
  it('a CONNECT whose client resets at once costs nothing: the gateway serves on', async () => {
    const { connect } = await import('node:net')
    const url = new URL(gw.url)
    for (let i = 0; i < 20; i++) {
      const socket = connect(Number(url.port), url.hostname)
      await new Promise((resolve) => socket.once('connect', resolve))
      socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
      socket.resetAndDestroy()
    }
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
  })

  it('a CONNECT behind an unanswered request is not answered for it: no 404 that would read as the first answer', async () => {
    const exchange = await rawExchange(gw.url, 'GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\nCONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
    expect(exchange.responses.map((response) => response.status)).not.toContain(404)
  })

  // Regression (security audit): the refusal was written while the request was still being
  // answered, so the client got 400 for a request the gateway had already sent to a backend.
  it.each([
    ['Connection: close', 'Connection: close\r\n'],
    ['keep-alive', ''],
  ])('bad bytes after a whole request (%s): that request gets its own answer, then the connection closes', async (_name, connection) => {
    const request = `GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\n${connection}\r\n`
    const exchange = await rawExchange(gw.url, `${request}X`)
    expect(exchange.responses.map((response) => response.status)).toEqual([200])
    expect(JSON.parse(exchange.responses[0]!.body.toString('utf8'))).toMatchObject({ object: 'list' })
    expect(exchange.responses[0]!.headers.connection).toBe('close')
    expect(exchange.closed).toBe(true)
  })

  // Regression (HTTP review, session 24): every unsent answer was marked Connection: close, Node took the
  // first for the connection's last and dropped the rest, requests already forwarded upstream among them.
  it('bad bytes after three whole pipelined requests: each gets its answer, in order, the last saying close', async () => {
    const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\n\r\n`
    const exchange = await rawExchange(gw.url, `${request('/healthz')}${request('/v1/models')}${request('/healthz')}X`)
    expect(exchange.responses.map((response) => response.status)).toEqual([200, 200, 200])
    expect(JSON.parse(exchange.responses[1]!.body.toString('utf8'))).toMatchObject({ object: 'list' })
    expect(exchange.responses.map((response) => response.headers.connection)).toEqual(['keep-alive', 'keep-alive', 'close'])
    expect(exchange.closed).toBe(true)
  })

  // Regression (HTTP review, session 27): a body the parser refused after the request's head was read was
  // counted twice, as route="unknown" 400 and as the route's 499, with an access line saying 499.
  it.each([
    ['a chunk size in hex notation', '0x4a\r\n'],
    ['a chunk extension past its limit', `1;${'e'.repeat(20_000)}\r\n`],
  ])('a body refused mid-way (%s) is one 400, counted and logged once', async (_name, chunk) => {
    const before = await requestsRefused(400)
    const chatBefore = await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'chat' })
    const linesBefore = gw.logLines().length
    const exchange = await rawExchange(
      gw.url,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}`,
    )
    expect(exchange.responses.map((response) => [response.status, expectErrorBody(response).code])).toEqual([[400, 'malformed_http']])
    expect(exchange.closed).toBe(true)
    expect(await requestsRefused(400)).toBe(before + 1)
    // The response the route had begun closes after the refusal: served /metrics after it, it would have counted by now.
    await fetch(`${gw.url}/healthz`)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'chat' })).toBe(chatBefore)
    const lines = gw.logLines().slice(linesBefore)
    expect(lines.filter((line) => line.msg === 'request completed' && line.route === 'chat')).toEqual([])
    expect(lines.filter((line) => line.msg === 'request refused by the HTTP parser')).toHaveLength(1)
  })

  it('a client that resets the connection mid-request gets nothing and costs nothing', async () => {
    const { connect } = await import('node:net')
    const url = new URL(gw.url)
    const before = await requestsRefused(400)
    const socket = connect(Number(url.port), url.hostname)
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write('GET /v1/models HTTP/1.1\r\nHost: gw\r\nX-Half: ')
    socket.resetAndDestroy()
    // The gateway still serves, and nothing was counted for the reset connection.
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
    expect(await requestsRefused(400)).toBe(before)
  })
})

// Regressions (diff reviews, session 27): the refusal of a later request's body took away the line and count of a
// request before it, read whole and already at its backend; then, written at once, the refusal read as that
// request's answer, whose real answer was lost with the connection.
describe('a body refused mid-way behind a whole request in progress', () => {
  const cleanups = trackedAfterEach()
  const key = makeKey('k', ['chat'])
  const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })

  /** A gateway before a backend that holds every chat, and a raw connection whose first chat (`version`) it holds. */
  async function heldFirstChat(version = 'HTTP/1.1', extraHeaders = '') {
    const held = await cleanups.standIn({ hold: true })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: held.url }] }] })
    const atBackend = once(held.events, 'held')
    const { connect } = await import('node:net')
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(() => socket.destroy())
    socket.on('error', () => undefined)
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.write(`POST /v1/chat/completions ${version}\r\nHost: gw\r\n${extraHeaders}Authorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`)
    await atBackend
    return { held, gw, socket, received: () => received }
  }

  it.each([
    ['HTTP/1.1', ''],
    ['HTTP/1.0', 'Connection: keep-alive\r\n'],
  ])('leaves the request before it (%s) its own answer, line and count; then the connection closes', async (version, keepAlive) => {
    const { held, gw, socket, received } = await heldFirstChat(version, keepAlive)
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`)
    await until(() => gw.logLines().some((line) => String(line.msg).startsWith('bytes after a request refused by the HTTP parser')), 'the refusal seen')
    expect(received()).toBe('')
    const closed = once(socket, 'close')
    held.releaseHeld()
    await closed

    expect(received().split('HTTP/1.1 ').length - 1).toBe(1)
    expect(received()).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(received()).toMatch(/\r\nconnection: close\r\n/i)
    await until(() => gw.logLines().some((line) => line.msg === 'request completed' && line.route === 'chat'), 'the first request’s line')
    expect(gw.logLines().filter((line) => line.msg === 'request completed' && line.route === 'chat').map((line) => line.status)).toEqual([200])
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'chat' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'unknown' })).toBe(0)
  })

  // Regression (diff review, session 27): the 417 for an unsupported Expect closes the connection but was not
  // marked so; a chat pipelined behind it ran at the backend, its answer dropped, logged 499.
  it('serves nothing pipelined behind a 417 for an unsupported Expect', async () => {
    const held = await cleanups.standIn({ hold: true })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: held.url }] }] })
    const exchange = await rawExchange(
      gw.url,
      `GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nExpect: foo\r\n\r\n` +
        `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`,
    )
    expect(exchange.responses.map((response) => response.status)).toEqual([417])
    expect(exchange.closed).toBe(true)
    // Counted once the 417 is: the chat, had it been served, would have been by then.
    await until(async () => (await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'unknown', status: '417' })) === 1, 'the 417 counted')
    await fetch(`${gw.url}/healthz`)
    expect(held.heldCount()).toBe(0)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'chat' })).toBe(0)
  })

  // Regression (diff review, session 27): every read after the parser failed raised clientError again, and each
  // logged the line: one per ~64 KiB a client sent behind a long answer.
  it('logs bytes behind a refused body once, however many more come', async () => {
    const { held, gw, socket } = await heldFirstChat()
    socket.write('BAD REQUEST LINE\r\n\r\n')
    const refusedLines = () => gw.logLines().filter((line) => String(line.msg).startsWith('bytes after a request refused by the HTTP parser')).length
    await until(() => refusedLines() === 1, 'the refusal seen')
    for (let i = 0; i < 5; i++) socket.write(Buffer.alloc(200_000, 'x'))
    const closed = once(socket, 'close')
    held.releaseHeld()
    await closed
    expect(refusedLines()).toBe(1)
  })
})
