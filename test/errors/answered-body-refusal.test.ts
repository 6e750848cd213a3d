/**
 * A parser error or timeout on a connection whose latest request was
 * answered before its (small) body was read: Node reads and throws that
 * body away to keep the connection, and a client trickling it a byte a
 * second ran into Node's requestTimeout (300 s).
 *
 * Regression (resources review): the listener answered that timeout with a
 * 408 after the 401 already sent, an answer to a request the client never
 * made, and counted the one request twice. The timeout is Node's, checked
 * every 30 s; the test raises the same 'clientError' Node raises then.
 */
import { once } from 'node:events'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../src/metrics/registry.js'
import { createPublicListener } from '../../src/public-listener.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()

async function listener() {
  const metrics = createMetrics()
  // Answers at once, reading nothing of the body: as the gateway's 401 before credentials.
  const { server } = createPublicListener((_request, response) => response.writeHead(401, { 'content-length': 0 }).end(), metrics, pino({ level: 'silent' }))
  const serverSockets: Socket[] = []
  server.on('connection', (socket: Socket) => serverSockets.push(socket))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(async () => {
    server.closeAllConnections()
    server.close()
  })
  const unknownRefusals = async () => (await metrics.registry.getSingleMetric('sluice_requests_total')!.get()).values.filter((v) => v.labels.route === 'unknown').length
  return { port: (server.address() as AddressInfo).port, server, serverSockets, unknownRefusals }
}

/** Sends a request announcing `length` body bytes and `sent` of them; resolves with the client socket once the whole answer head is in. */
async function answeredBeforeBody(port: number, length: number, sent: number): Promise<{ client: Socket; received: () => string }> {
  const client = connect(port, '127.0.0.1')
  cleanups.push(async () => client.destroy())
  let text = ''
  client.on('data', (data: Buffer) => (text += data.toString('latin1')))
  client.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n${'x'.repeat(sent)}`)
  while (!text.includes('\r\n\r\n')) await once(client, 'data')
  return { client, received: () => text }
}

describe('a timeout while the body of an answered request still comes', () => {
  it('closes the connection without a second answer, and counts nothing more', async () => {
    const gw = await listener()
    const { client, received } = await answeredBeforeBody(gw.port, 100, 10)
    expect(received()).toMatch(/^HTTP\/1\.1 401 /)

    const timeout = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' })
    gw.server.emit('clientError', timeout, gw.serverSockets[0])
    await once(client, 'close')

    expect(received().match(/HTTP\/1\.1 /g)).toHaveLength(1)
    expect(await gw.unknownRefusals()).toBe(0)
  })

  it('control: the same timeout on a connection whose request was not answered is a 408, counted', async () => {
    const gw = await listener()
    const client = connect(gw.port, '127.0.0.1')
    cleanups.push(async () => client.destroy())
    let text = ''
    client.on('data', (data: Buffer) => (text += data.toString('latin1')))
    client.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n')
    while (gw.serverSockets.length === 0) await once(gw.server, 'connection')

    const timeout = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' })
    gw.server.emit('clientError', timeout, gw.serverSockets[0])
    await once(client, 'close')

    expect(text).toMatch(/^HTTP\/1\.1 408 /)
    expect(await gw.unknownRefusals()).toBe(1)
  })
})
