/**
 * A client that reads nothing of a platform answer piped from its upstream
 * (an object's value), against a raw upstream that writes as fast as it may.
 *
 * Regression (resource audit): the upstream was paused by the client's
 * backpressure, undici's body timeout does not run on a paused exchange,
 * and nothing else ended it: the upstream connection stayed held for as
 * long as the client stayed connected.
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

describe('a client that reads nothing of an object and stays connected', () => {
  it('is let go of after first_byte_ms of reading nothing: the upstream request aborted, not counted as its failure', async () => {
    const store = await pumpingStore()
    const gw = await cleanups.gateway({
      auth: { users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
      models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
      upstreams: { objects: { url: store.url, timeouts: { first_byte_ms: 300 } } },
    })
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    cleanups.push(async () => socket.destroy())
    socket.pause()
    const authorization = `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`
    socket.write(`POST /obj/read HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\ncontent-length: ${READ.length}\r\n\r\n${READ}`)
    await store.blocked

    await store.closed
    expect(store.finished()).toBe(false)
    await until(() => gw.logLines().some((line) => line.msg === 'client read nothing of its answer for first_byte_ms: connection closed' && line.backend === 'objects'), 'the client let go of', 2000)
    socket.resume()
    await once(socket, 'close')
    expect(await scrapeMetricSum(gw.url, 'sluice_upstream_errors_total', { backend: 'objects' })).toBe(0)
  })
})
