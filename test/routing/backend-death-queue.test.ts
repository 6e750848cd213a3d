/**
 * A backend dies while every slot is taken and requests wait in the queue.
 * Its requests in flight fail (the client's answer had not started: a 502
 * after the retry finds the other backend full). The slots they free go to
 * waiters, which may be sent to the dead backend before anything marks it
 * down; their connection is refused. Such a waiter goes back to waiting for
 * a slot on a backend that is up, instead of failing too.
 *
 * Two node:http backends on port 0: `a` holds every chat request until it
 * is killed; `b` holds them until the test lets them go. Three slots per
 * backend, all taken, and three more requests queued.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { makeKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { deferred } from '../support/deferred.js'
import { listenForTest } from '../support/listen.js'
import { scrape, metricSum, until } from '../support/metrics.js'
import { GOOD_COMPLETION } from '../support/good-completion.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()

/** Answers health checks; holds each chat request until `answer` is called for it. */
async function holdingBackend(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  const sockets = new Set<Socket>()
  const server = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
    req.resume()
    answer(req, res)
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  const url = await listenForTest(server, cleanups)
  /** Stops listening and resets every connection: requests in flight fail, new ones are refused. */
  const kill = () => {
    server.close()
    for (const socket of sockets) socket.resetAndDestroy()
  }
  return { url, kill }
}

describe('a backend that dies while requests wait in the queue', () => {
  // Regression (audit): the waiters handed the dead backend's slots were sent there, refused, and got a 502
  // each, since their one retry found the other backend full; with 64 slots, 64 more failed requests.
  it('its requests in flight fail; the waiters sent to it wait for the live backend and get 200s', async () => {
    const a = await holdingBackend(() => undefined)
    const release = deferred()
    const b = await holdingBackend((_req, res) => {
      void release.promise.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(GOOD_COMPLETION))
    })
    const gw = await cleanups.gateway({
      auth: { keys: [key.entry] },
      models: [
        {
          name: 'm',
          max_concurrency_per_backend: 3,
          retries: 1,
          queue: { max_wait_ms: 20_000 },
          // Passive ejection after resets would change which waiter meets the dead backend; only connect failures eject here.
          health: { interval_ms: 60_000, unhealthy_after: 100 },
          backends: [
            { url: a.url, name: 'a' },
            { url: b.url, name: 'b' },
          ],
        },
      ],
    })
    const post = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(15_000),
      }).then(
        (response) => response.status,
        // Counted as no answer: a failed test leaves none of these unhandled.
        () => -1,
      )
    const metric = async (name: string, labels: Record<string, string> = {}) => metricSum(await scrape(gw.url), name, { model: 'm', ...labels })

    const running = Array.from({ length: 6 }, post)
    await until(async () => (await metric('sluice_inflight_requests', { backend: 'a' })) === 3 && (await metric('sluice_inflight_requests', { backend: 'b' })) === 3, 'three in flight on each backend')
    const waiting = Array.from({ length: 3 }, post)
    await until(async () => (await metric('sluice_queue_depth')) === 3, 'three waiting')

    a.kill()
    // The dead backend's requests have failed, and nothing is on it or on its way there: every waiter waits again.
    await until(
      async () =>
        (await metric('sluice_upstream_errors_total', { backend: 'a', reason: 'reset' })) === 3 &&
        (await metric('sluice_inflight_requests', { backend: 'a' })) === 0 &&
        (await metric('sluice_queue_depth')) === 3,
      'the dead backend emptied, three waiting again',
    )
    release.resolve()

    expect(await Promise.all(waiting)).toEqual([200, 200, 200])
    expect((await Promise.all(running)).sort()).toEqual([200, 200, 200, 502, 502, 502])
  })
})
