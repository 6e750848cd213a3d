/**
 * Platform upstream answers the gateway cannot pass on as they are: a body
 * broken off after the headers, a status outside 200–599, a HEAD, and an
 * upstream naming its own request id. Each test starts its own upstream on
 * port 0 (node:http, or a raw socket where node:http would refuse to write
 * the answer) and a gateway in front of it.
 */
import { Agent, request as httpRequest, type ServerResponse } from 'node:http'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { RecordingServer, type RecordedRequest } from '../../src/dev/recording-server.js'
import { trackedAfterEach } from '../support/tracked.js'
import { deferred } from '../support/deferred.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { scrapeMetricSum, until, untilMetric } from '../support/metrics.js'
import { exactRequest, expectErrorBody, rawExchange } from '../support/raw-http.js'

const key = makeKey('ckpt-reader', ['checkpoints', 'training'])
const LISTING = '/v1/preview/models/m-1/checkpoints'
const cleanups = trackedAfterEach()

function gatewayFor(upstreamUrl: string, firstByteMs = 5000): Promise<TestGateway> {
  return cleanups.gateway({
    auth: { keys: [key.entry] },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: {
      checkpoints: { url: upstreamUrl, timeouts: { first_byte_ms: firstByteMs } },
      training: { url: upstreamUrl, timeouts: { first_byte_ms: firstByteMs } },
    },
  })
}

/** A node:http upstream answering every request with `answer`. */
async function httpUpstream(answer: (res: ServerResponse, request: RecordedRequest) => void): Promise<RecordingServer> {
  const server = new RecordingServer((request, res) => answer(res, request))
  await server.listen()
  cleanups.push(() => server.close())
  return server
}

/** A raw TCP upstream: `answer` writes whatever bytes it likes to each connection that sends a request. */
async function tcpUpstream(answer: (socket: Socket) => void): Promise<{ url: string; answered: Socket[] }> {
  const sockets: Socket[] = []
  const answered: Socket[] = []
  const server: Server = createServer((socket) => {
    sockets.push(socket)
    socket.on('error', () => undefined)
    socket.once('data', () => {
      answered.push(socket)
      answer(socket)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answered }
}

function listingRequest(gw: TestGateway, extra = ''): string {
  return `GET ${LISTING} HTTP/1.1\r\nHost: ${new URL(gw.url).host}\r\nAuthorization: Bearer ${key.token}\r\n${extra}\r\n`
}

async function accessLine(gw: TestGateway): Promise<Record<string, unknown>> {
  const line = () => gw.logLines().find((l) => l.msg === 'request completed' && l.route === 'checkpoints')
  await until(() => line() !== undefined, 'the access line of the listing')
  return line()!
}

describe('an upstream that breaks off its body after the headers', () => {
  async function brokenOff(gw: TestGateway, expected: { part: string; errorCode: string }): Promise<void> {
    // Keep-alive: only the gateway can close this connection, and it must, before the body's end.
    const exchange = await rawExchange(gw.url, listingRequest(gw), 10_000)
    expect(exchange.closed).toBe(true)
    expect(exchange.responses).toHaveLength(1)
    expect(exchange.responses[0]!.status).toBe(200)
    expect(exchange.responses[0]!.text).toBe(expected.part)
    expect(exchange.wire).not.toMatch(/\r\n0\r\n\r\n$/)
    const line = await accessLine(gw)
    // The gateway closed the client's socket before the line was written: the address is still known (a review found null).
    expect(line).toMatchObject({ status: 200, error_code: expected.errorCode, backend: 'checkpoints', client_address: '127.0.0.1' })
    await untilMetric(gw.url, 'sluice_upstream_errors_total', { model: '', backend: 'checkpoints', reason: 'mid_stream' }, 1)
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total')).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'checkpoints', status: '200' })).toBe(1)
    expect(await scrapeMetricSum(gw.url, 'sluice_requests_total', { route: 'checkpoints', status: '499' })).toBe(0)
  }

  it('closing mid-body: the client keeps its 200 and loses the connection; logged 200 upstream_bad_response, counted mid_stream', async () => {
    const upstream = await httpUpstream((res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"data":[', () => res.socket!.destroy())
    })
    await brokenOff(await gatewayFor(upstream.url), { part: '{"data":[', errorCode: 'upstream_bad_response' })
  })

  it('closing after the headers, before any body byte: the same, not a 500', async () => {
    const upstream = await tcpUpstream((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n', () => socket.destroy())
    })
    await brokenOff(await gatewayFor(upstream.url), { part: '', errorCode: 'upstream_bad_response' })
  })

  it('going silent mid-body past the timeout: logged 200 upstream_timeout, counted mid_stream', async () => {
    const upstream = await httpUpstream((res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"data":[')
    })
    await brokenOff(await gatewayFor(upstream.url, 100), { part: '{"data":[', errorCode: 'upstream_timeout' })
  })

  it('a client that leaves mid-body is still 499 with no error code, and no upstream error is counted', async () => {
    const upstream = await httpUpstream((res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"data":[')
    })
    const upstreamLeft = deferred()
    upstream.events.on('client-closed', upstreamLeft.resolve)
    const gw = await gatewayFor(upstream.url)
    const client = connect(Number(new URL(gw.url).port), '127.0.0.1')
    client.on('error', () => undefined)
    client.write(listingRequest(gw))
    // Leaves as soon as the first body bytes are in.
    client.on('data', (data: Buffer) => {
      if (data.includes('{"data":[')) client.destroy()
    })
    await upstreamLeft.promise
    const line = await accessLine(gw)
    expect(line).toMatchObject({ status: 499, error_code: null, client_address: '127.0.0.1' })
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total')).toBe(0)
  })
})

describe('an upstream status outside 200–599', () => {
  it.each(['600', '999'])('HTTP/1.1 %s → 502 upstream_bad_response, its body dropped, counted bad_response', async (code) => {
    const upstream = await tcpUpstream((socket) => {
      // A body that would never end: the gateway must drop it, not read it.
      socket.write(`HTTP/1.1 ${code} Whatever\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n`)
    })
    const gw = await gatewayFor(upstream.url)
    const answer = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization: `Bearer ${key.token}` } })
    expect(answer.status).toBe(502)
    expect(expectErrorBody(answer)).toMatchObject({ type: 'upstream_error', code: 'upstream_bad_response', param: null })
    await until(() => upstream.answered.length === 1 && upstream.answered[0]!.closed, 'the gateway to close the upstream connection')
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { model: '', backend: 'checkpoints', reason: 'bad_response' })).toBe(1)
    expect(await accessLine(gw)).toMatchObject({ status: 502, error_code: 'upstream_bad_response' })
  })
})

describe('HEAD on the checkpoint listing', () => {
  it('is forwarded as HEAD: the upstream sends no body, the client gets the status and headers', async () => {
    const upstream = await httpUpstream((res, request) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1 << 20, 'x-upstream': 'yes' })
      // A GET would get a large body; a HEAD answer carries none.
      res.end(request.method === 'HEAD' ? undefined : 'x'.repeat(1 << 20))
    })
    const answered = deferred()
    upstream.events.on('answered', answered.resolve)
    const gw = await gatewayFor(upstream.url)
    const answer = await exactRequest(gw.url, { method: 'HEAD', path: LISTING, headers: { authorization: `Bearer ${key.token}` } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-upstream']).toBe('yes')
    // Regression (audit): the length of the body a GET would get was dropped, and a HEAD tells it nowhere else.
    expect(answer.headers['content-length']).toBe(String(1 << 20))
    expect(answer.body.length).toBe(0)
    await answered.promise
    expect(upstream.received.map((r) => [r.method, r.url])).toEqual([['HEAD', `${LISTING}?limit=20&order=asc`]])
  })
})

describe('an upstream that cannot be reached', () => {
  // Regression (audit): the access line said backend null, while the metric named the upstream.
  it('is a 502 whose access line names the upstream', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    // Closed again: a connection to it is refused.
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const gw = await gatewayFor(`http://127.0.0.1:${port}`)

    const answer = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization: `Bearer ${key.token}` } })

    expect(answer.status).toBe(502)
    expect(expectErrorBody(answer).code).toBe('upstream_unreachable')
    expect(await accessLine(gw)).toMatchObject({ status: 502, backend: 'checkpoints', error_code: 'upstream_unreachable' })
  })
})

describe("the upstream's Content-Length", () => {
  // Regression (audit): dropped as if hop-by-hop, so every platform answer went out chunked.
  it('is kept on an answer whose body goes through unchanged; a chunked answer stays chunked', async () => {
    const body = '{"data":[],"has_more":false}'
    const upstream = await httpUpstream((res, request) => {
      if (request.method === 'POST') return void res.writeHead(200, { 'content-type': 'application/json' }).end(body)
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
    const gw = await gatewayFor(upstream.url)
    const authorization = `Bearer ${key.token}`

    const listed = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization } })
    expect(listed.headers['content-length']).toBe(String(Buffer.byteLength(body)))
    expect(listed.headers['transfer-encoding']).toBeUndefined()
    expect(listed.text).toBe(body)

    const job = JSON.stringify({ model_id: '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11', trajectory_groups: [] })
    const chunked = await exactRequest(gw.url, { method: 'POST', path: '/v1/preview/training-jobs', headers: { authorization, 'content-type': 'application/json' }, body: job })
    expect(chunked.headers['content-length']).toBeUndefined()
    expect(chunked.headers['transfer-encoding']).toBe('chunked')
    expect(chunked.text).toBe(body)
  })
})

// Regression (platform review, session 24): the 502 told an object-read client to "ask for a stream instead".
describe('an upstream error answer larger than server.answer_limit_bytes', () => {
  it('is a 502 that says why it was read whole, and offers no stream', async () => {
    const upstream = await httpUpstream((res) => res.writeHead(500, { 'content-type': 'text/plain' }).end('x'.repeat(5000)))
    const gw = await cleanups.gateway({
      server: { answer_limit_bytes: 4096 },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
      upstreams: { checkpoints: { url: upstream.url, auth: { bearer: 'upstream-secret-token' } } },
    })
    const answer = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization: `Bearer ${key.token}` } })
    expect(answer.status).toBe(502)
    const error = expectErrorBody(answer)
    expect(error.message).toContain('server.answer_limit_bytes')
    expect(error.message).toContain('this 500 answer is read whole')
    expect(error.message).not.toContain('ask for a stream')
  })
})

// Regression (platform review, session 24): undici refuses an interim 100 nobody asked for, and the
// 502 said the upstream had "closed the connection before answering".
describe('an upstream that sends an interim 100 Continue nobody asked for', () => {
  it('is a 502 upstream_bad_response that says the answer was broken, counted bad_response', async () => {
    const upstream = await tcpUpstream((socket) => socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}'))
    const gw = await gatewayFor(upstream.url)
    const answer = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization: `Bearer ${key.token}` } })
    expect(answer.status).toBe(502)
    expect(expectErrorBody(answer)).toMatchObject({ code: 'upstream_bad_response', message: 'Upstream "checkpoints" sent a broken response.' })
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { backend: 'checkpoints', reason: 'bad_response' })).toBe(1)
  })
})

// Regression (platform review, session 24): a 304 carrying Content-Length reached the client as nothing at
// all (undici read the missing bytes as a body cut short), while its access line said 304.
describe('an upstream answer that has no body by its status', () => {
  it.each([
    { status: '304 Not Modified', code: 304, length: '7' },
    { status: '204 No Content', code: 204, length: undefined },
  ])('$status with a Content-Length of 7 is passed on as a head, and the client connection goes on', async ({ status, code, length }) => {
    const upstream = await tcpUpstream((socket) => socket.write(`HTTP/1.1 ${status}\r\nETag: "v1"\r\nContent-Length: 7\r\n\r\n`))
    const gw = await gatewayFor(upstream.url)
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    cleanups.push(() => agent.destroy())
    const get = (path: string) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: string; socket: unknown }>((resolve, reject) => {
        const req = httpRequest(`${gw.url}${path}`, { agent, headers: { authorization: `Bearer ${key.token}` } }, (res) => {
          let body = ''
          res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk))
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, socket: req.socket }))
        })
        req.on('error', reject).end()
      })

    const answer = await get(LISTING)
    expect(answer).toMatchObject({ status: code, body: '' })
    expect(answer.headers.etag).toBe('"v1"')
    expect(answer.headers['content-length']).toBe(length)
    expect(answer.headers['x-request-id']).toEqual(expect.any(String))
    const after = await get('/healthz')
    expect(after.status).toBe(200)
    expect(after.socket).toBe(answer.socket)
    expect(await accessLine(gw)).toMatchObject({ status: code, error_code: null })
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total')).toBe(0)
  })
})

describe("the upstream's own X-Request-Id", () => {
  it("is replaced by the gateway's on every answer, success or error", async () => {
    const upstream = await httpUpstream((res, request) => {
      res.writeHead(request.method === 'POST' ? 422 : 200, { 'content-type': 'application/json', 'x-request-id': 'upstream-own-id' })
      res.end('{}')
    })
    const gw = await gatewayFor(upstream.url)
    const authorization = `Bearer ${key.token}`
    const chosen = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization, 'x-request-id': 'client-id-1' } })
    expect(chosen.status).toBe(200)
    expect(chosen.headers['x-request-id']).toBe('client-id-1')
    const generated = await exactRequest(gw.url, { method: 'GET', path: LISTING, headers: { authorization } })
    expect(generated.headers['x-request-id']).toBe(upstream.received[1]!.headers['x-request-id'])
    expect(generated.headers['x-request-id']).not.toBe('upstream-own-id')
    const refused = await exactRequest(gw.url, {
      method: 'POST',
      path: '/v1/preview/training-jobs',
      headers: { authorization, 'content-type': 'application/json', 'x-request-id': 'client-id-2' },
      body: JSON.stringify({ model_id: '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11', trajectory_groups: [] }),
    })
    expect(refused.status).toBe(422)
    expect(refused.headers['x-request-id']).toBe('client-id-2')
  })
})
