/**
 * What is served behind an answer still being made on a pipelined
 * connection (src/closing-connections.ts with the drain tracker,
 * src/connection-drain.ts), on a plain node:http server whose handler
 * refuses what the app refuses: a request read off a closing connection
 * is not answered at all.
 */
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { connect } from 'node:net'
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { isClosing, markClosing } from '../src/closing-connections.js'
import { trackConnections } from '../src/connection-drain.js'
import { until } from './support/metrics.js'
import { trackedAfterEach } from './support/tracked.js'

const cleanups = trackedAfterEach()

/** A server that holds each answer until `release` is called, and leaves a request off a closing connection unanswered. */
async function holdingServer() {
  const held: ServerResponse[] = []
  const served: string[] = []
  let seen = 0
  const server = createServer()
  // The tracker hears each request first, as on the gateway's listener (public-listener.ts).
  const connections = trackConnections(server)
  let refused = 0
  // As the gateway's listener does (public-listener.ts) for bytes after whole requests.
  server.on('clientError', (_error, socket: Socket) => {
    refused++
    if (!server.listening || !connections.closeAfterWholeRequests(socket)) socket.destroy()
  })
  server.on('request', (request, response: ServerResponse) => {
    seen++
    if (isClosing(request.socket)) return
    served.push(request.url!)
    held.push(response)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanups.push(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))))
  const release = () => {
    for (const response of held.splice(0)) {
      if (response.headersSent) response.end('ok')
      else response.writeHead(200, { 'content-length': 2 }).end('ok')
    }
  }
  /** Begins the held answers: a head without a length (HTTP/1.0: Node closes after it), or one told to close, and a first chunk. */
  const begin = (close: boolean) => {
    for (const response of held) {
      if (close) markClosing(response)
      response.writeHead(200, close ? { connection: 'close' } : {}).write('o')
    }
  }
  return { port: (server.address() as AddressInfo).port, connections, served, held, release, begin, seen: () => seen, refused: () => refused }
}

describe('a request pipelined behind an HTTP/1.0 answer not yet begun', () => {
  // Regression (diff review, session 27): during a drain, the drain's mark on the earlier answer was taken
  // off when the pipelined request came, the answer went out keep-alive, and the request's refusal reached the client.
  it.each([false, true])('is not served, and the answer before it closes the connection (draining: %s)', async (draining) => {
    const server = await holdingServer()
    const client = connect(server.port, '127.0.0.1')
    cleanups.push(() => client.destroy())
    let received = ''
    client.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    client.write('GET /first HTTP/1.0\r\nConnection: keep-alive\r\n\r\n')
    await until(() => server.held.length === 1, 'the first request')
    if (draining) server.connections.drain()
    client.write('GET /second HTTP/1.0\r\nConnection: keep-alive\r\n\r\n')
    await until(() => server.seen() === 2, 'the second request read')
    server.release()
    await once(client, 'close')
    expect(server.served).toEqual(['/first'])
    expect(received.split('HTTP/1.1 ').length - 1).toBe(1)
    expect(received).toMatch(/connection: close/i)
  })
})

// Regression (diff review, session 27): Node 20 leaves `shouldKeepAlive` true after a closing head, so an answer
// already begun was read as keep-alive and the request behind it served, its answer dropped with the connection.
describe('a request pipelined behind a closing answer already begun', () => {
  it.each([
    ['an HTTP/1.0 stream without a length', 'HTTP/1.0', false],
    ['an HTTP/1.1 answer told Connection: close', 'HTTP/1.1', true],
  ])('is not served: %s', async (_name, version, close) => {
    const server = await holdingServer()
    const client = connect(server.port, '127.0.0.1')
    cleanups.push(() => client.destroy())
    let received = ''
    client.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    client.write(`GET /first ${version}\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`)
    await until(() => server.held.length === 1, 'the first request')
    server.begin(close)
    await until(() => received.includes('\r\n\r\n'), 'the first head')
    client.write(`GET /second ${version}\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`)
    await until(() => server.seen() === 2, 'the second request read')
    server.release()
    await once(client, 'close')
    expect(server.served).toEqual(['/first'])
    expect(received.split('HTTP/1.1 ').length - 1).toBe(1)
  })
})

// Regression (diff review, session 27): a drain after bad bytes took the request given up for the connection's
// last, and the whole answer before it, told to close, went out keep-alive.
describe('a drain after bad bytes behind a whole request', () => {
  it('leaves the whole request its close', async () => {
    const server = await holdingServer()
    const client = connect(server.port, '127.0.0.1')
    cleanups.push(() => client.destroy())
    let received = ''
    client.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    client.write('GET /first HTTP/1.1\r\nHost: x\r\n\r\n')
    await until(() => server.held.length === 1, 'the first request')
    client.write('POST /second HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')
    await until(() => server.refused() === 1, 'the bad bytes')
    server.connections.drain()
    server.release()
    await once(client, 'close')
    expect(received.split('HTTP/1.1 ').length - 1).toBe(1)
    expect(received).toMatch(/connection: close/i)
  })
})
