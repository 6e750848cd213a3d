/**
 * server.max_connections: past it Node closes a new connection as it is
 * accepted ('drop'), before a byte is read. The connections already open
 * keep being served, and a freed slot takes a new one.
 */
import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { makeKey } from '../support/gateway.js'
import { scrape, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Everything the socket receives until it closes (an error, a reset, counts as closed). */
function received(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
    socket.on('error', () => undefined)
    socket.once('close', () => resolve(text))
  })
}

describe('server.max_connections', () => {
  it('closes a connection past the cap unread, serves the open ones, counts and logs the drop, and takes one again once a slot frees', async () => {
    const gw = await cleanups.gateway({ server: { port: 0, max_connections: 2 }, auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
    const port = Number(new URL(gw.url).port)
    // Accepted in the order they connected: the first two are counted before the third is looked at.
    const held = [await open(port), await open(port)]
    const third = await open(port)
    expect(await received(third)).toBe('')

    const heldAnswer = received(held[0]!)
    held[0]!.end('GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')
    expect(await heldAnswer).toMatch(/^HTTP\/1\.1 200 /)

    const drops = gw.logLines().filter((line) => line.msg === 'connection closed as it was accepted: server.max_connections are open')
    expect(drops).toEqual([expect.objectContaining({ level: 40, max_connections: 2, dropped: 1 })])

    held[1]!.destroy()
    // The slot frees when the gateway reads the close: until then a new connection may still be dropped.
    let metrics = ''
    await until(async () => {
      metrics = await scrape(gw.url).catch(() => '')
      return metrics !== ''
    }, 'a connection to be taken once a slot freed')
    expect(metrics).toMatch(/^sluice_connections_dropped_total [1-9]\d*$/m)
  })
})
