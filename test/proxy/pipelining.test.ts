/**
 * HTTP/1.1 pipelining: requests written back to back on one connection.
 * Node answers them in order, and a later request's response has no socket
 * of its own until the ones before it are sent.
 *
 * Regressions (security audit): a pipelined chat or platform request after
 * the first was taken for one whose client had left (its response had no
 * socket) and never answered; and when the client hung up, the waiting
 * responses got no 'close' from Node, so their access lines, slots and
 * upstream calls waited for good.
 */
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { parseResponses, type RawResponse } from '../support/raw-http.js'
import { nextEvents } from '../support/stand-in-events.js'
import { scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()

function chatRequest(marker: string): string {
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: marker }] })
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

/** Writes `requests` at once on one connection and reads until `count` answers came. */
async function pipelined(gw: TestGateway, requests: string, count: number): Promise<RawResponse[]> {
  const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
  cleanups.push(async () => socket.destroy())
  const received: Buffer[] = []
  const answered = new Promise<void>((resolve) =>
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk)
      if (parseResponses(Buffer.concat(received)).length === count) resolve()
    }),
  )
  socket.write(requests)
  await answered
  return parseResponses(Buffer.concat(received))
}

describe('pipelined requests', () => {
  it('three chat requests written at once are all answered, in order', async () => {
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })

    const responses = await pipelined(gw, chatRequest('one') + chatRequest('two') + chatRequest('three'), 3)
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200])
    expect(backend.received.map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content)).toEqual(['one', 'two', 'three'])
  })

  // Regression (HTTP review): the refusal said `Connection: close` while the request behind it had
  // been dispatched already: that one reached the backend, and its answer was never sent.
  it('a bad body between two chat requests: all three answered in order on the one connection, only the good ones forwarded', async () => {
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })
    const bad = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n{`

    const responses = await pipelined(gw, chatRequest('one') + bad + chatRequest('three'), 3)
    expect(responses.map((r) => r.status)).toEqual([200, 400, 200])
    expect(responses.map((r) => r.headers.connection)).toEqual(['keep-alive', 'keep-alive', 'keep-alive'])
    expect(backend.received.map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content)).toEqual(['one', 'three'])
  })

  // Regression (code review): the stall guard took a pipelined answer's bytes, waiting for the
  // answers before it, for bytes its client did not read, and dropped it after idle_ms.
  it('a whole answer pipelined behind a stream longer than idle_ms is answered too', async () => {
    const backend = await cleanups.standIn({ tokens: 8, interTokenDelayMs: 150 })
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', timeouts: { idle_ms: 300 }, backends: [{ url: backend.url }] }] })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    const received: Buffer[] = []
    const ended = new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        received.push(chunk)
        if (parseResponses(Buffer.concat(received)).length === 2) resolve()
      })
      socket.on('close', () => resolve())
    })
    const streamed = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'stream' }] })
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(streamed)}\r\n\r\n${streamed}` + chatRequest('whole'))
    await ended

    expect(parseResponses(Buffer.concat(received)).map((r) => r.status)).toEqual([200, 200])
    expect(gw.logLines().filter((line) => String(line.msg).includes('read nothing'))).toEqual([])
  })

  it('a client that hangs up with answers still waiting: every request logged 499, the backend calls aborted, the slots free', async () => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const gw = await cleanups.gateway({ server: { shutdown_grace_ms: 200 }, auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url, name: 'b' }] }] })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    const held = nextEvents(backend, 'held', 2)
    socket.write(chatRequest('one') + chatRequest('two'))
    await held

    const closed = nextEvents(backend, 'client-closed', 2)
    socket.destroy()
    await closed
    await until(() => gw.logLines().filter((line) => line.msg === 'request completed').length === 2, 'both access lines', 2000)
    expect(gw.logLines().filter((line) => line.msg === 'request completed').map((line) => line.status)).toEqual([499, 499])
    expect(await scrapeMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b' })).toBe(0)
  })
})
