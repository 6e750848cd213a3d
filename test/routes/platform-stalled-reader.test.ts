/**
 * A client that reads nothing of a platform answer piped from its upstream
 * (an object's value), against a raw upstream that writes as fast as it may.
 *
 * Regression (resource audit): the upstream was paused by the client's
 * backpressure, undici's body timeout does not run on a paused exchange,
 * and nothing else ended it: the upstream connection stayed held for as
 * long as the client stayed connected. And an error answer, read whole to
 * be searched for the gateway's credential, stayed in memory as long.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import { deferred } from '../support/deferred.js'
import { listenForTest } from '../support/listen.js'
import { scrapeMetricSum, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const ALICE = { username: 'alice', password: 'alice-password' }
const READ = JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' })

/** An object store whose every answer is endless; `blocked` once its writes back up, `closed` when its response goes. */
async function pumpingStore() {
  const blocked = deferred()
  const closed = deferred()
  let finished = false
  const chunk = Buffer.alloc(64 * 1024, 'x')
  const server = createServer((req, res) => {
    req.resume()
    res.on('close', () => closed.resolve())
    res.on('finish', () => (finished = true))
    res.writeHead(200, { 'content-type': 'application/octet-stream' })
    const pump = (): void => {
      while (res.write(chunk));
      blocked.resolve()
      res.once('drain', pump)
    }
    pump()
  })
  const url = await listenForTest(server, cleanups)
  return { url, blocked: blocked.promise, closed: closed.promise, finished: () => finished }
}

/** A gateway whose objects upstream is set as given (alice may read), with a chat model no test calls. */
async function objectsGateway(objects: Record<string, unknown>) {
  return cleanups.gateway({
    auth: { users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: { objects },
  })
}

describe('a client that reads nothing of an object and stays connected', () => {
  it('is let go of after client_idle_ms of reading nothing: the upstream request aborted, not counted as its failure', async () => {
    const store = await pumpingStore()
    const gw = await objectsGateway({ url: store.url, timeouts: { client_idle_ms: 300 } })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    socket.pause()
    const authorization = `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`
    socket.write(`POST /obj/read HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\ncontent-length: ${READ.length}\r\n\r\n${READ}`)
    await store.blocked

    await store.closed
    expect(store.finished()).toBe(false)
    await until(() => gw.logLines().some((line) => line.msg === 'client read nothing of its answer for client_idle_ms: connection closed' && line.backend === 'objects'), 'the client let go of', 2000)
    socket.resume()
    await once(socket, 'close')
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { backend: 'objects' })).toBe(0)
  })
})

/** An object store answering every read with `size` bytes, written as fast as the client takes them. */
async function sizedStore(size: number) {
  const chunk = Buffer.alloc(64 * 1024, 'y')
  const server = createServer((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size })
    let left = size
    const pump = (): void => {
      while (left > 0) {
        const piece = left >= chunk.length ? chunk : chunk.subarray(0, left)
        left -= piece.length
        if (!res.write(piece)) return void res.once('drain', pump)
      }
      res.end()
    }
    pump()
  })
  return listenForTest(server, cleanups)
}

// Regression (platform review): the bound was the upstream's first_byte_ms, and the kernel shows a
// reader's progress only every few MiB: a steady reader of a large object was cut off part-way.
describe('a client that reads an object slowly but steadily', () => {
  it('gets all of it, however short the upstream first_byte_ms', async () => {
    const size = 12 * 1024 * 1024
    const gw = await objectsGateway({ url: await sizedStore(size), timeouts: { first_byte_ms: 200 } })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    const authorization = `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`
    socket.write(`POST /obj/read HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${READ.length}\r\n\r\n${READ}`)
    // About 3 MB/s: a pause after every 64 KiB read, so the socket's buffers stay full between reads.
    let received = 0
    socket.on('data', (data: Buffer) => {
      received += data.length
      socket.pause()
      setTimeout(() => socket.resume(), 20)
    })
    await once(socket, 'close')

    const head = 'HTTP/1.1 200'.length
    expect(received).toBeGreaterThan(size + head)
    expect(gw.logLines().some((line) => typeof line.msg === 'string' && line.msg.startsWith('client read nothing'))).toBe(false)
  })
})

/** An object store answering every read with a 500 of `size` bytes (an error quoting a large input). */
async function largeErrorStore(size: number) {
  const server = createServer((req, res) => {
    req.resume()
    res.writeHead(500, { 'content-type': 'application/json', 'content-length': size })
    res.end(Buffer.alloc(size, 'e'))
  })
  return listenForTest(server, cleanups)
}

// Regression (platform review, session 26): an error answer is read whole to search it for the gateway's
// credential and written past fastify with no guard: held in memory for as long as its client, reading nothing, stayed.
describe('a client that reads nothing of a large error answer and stays connected', () => {
  it('is let go of after client_idle_ms of reading nothing', async () => {
    const size = 32 * 1024 * 1024
    const gw = await objectsGateway({ url: await largeErrorStore(size), auth: { bearer: 'store-token' }, timeouts: { client_idle_ms: 300 } })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    socket.pause()
    const authorization = `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`
    socket.write(`POST /obj/read HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\ncontent-length: ${READ.length}\r\n\r\n${READ}`)

    await until(() => gw.logLines().some((line) => line.msg === 'client read nothing of its answer for client_idle_ms: connection closed' && line.backend === 'objects'), 'the client let go of', 5000)
    let received = 0
    socket.on('data', (data: Buffer) => (received += data.length))
    socket.resume()
    await once(socket, 'close')
    expect(received).toBeGreaterThan(0)
    expect(received).toBeLessThan(size)
  })
})
