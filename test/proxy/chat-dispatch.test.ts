/**
 * dispatchChat when the retry's own admission fails: the answer held for
 * the retry is dropped and its slot released, whatever the store threw. A
 * real model route in front of a node:http backend on port 0; the slot
 * store is a stand-in whose retry admission rejects (a broken Redis reply,
 * a balancer bug).
 */
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { ClientDeparture } from '../../src/proxy/client-departure.js'
import { dispatchChat } from '../../src/proxy/chat-dispatch.js'
import { ModelRoute } from '../../src/routing/model-route.js'
import type { ModelSlots, SlotLease } from '../../src/state/store.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { deferred } from '../support/deferred.js'
import { configFrom } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'

const cleanups = cleanupsAfterEach()

function slotsWhoseRetryFails(backend: string, released: () => void): ModelSlots {
  const lease: SlotLease = { backend, waitedMs: 0, release: released }
  return {
    acquire: () => Promise.resolve(lease),
    tryAcquire: () => Promise.reject(new Error('unexpected reply from the slot store')),
    wake: () => undefined,
    queueDepth: () => 0,
    inFlight: () => 0,
    load: () => 0,
    turnAway: () => undefined,
    close: () => undefined,
  }
}

describe('dispatchChat, a 503 whose retry cannot be admitted', () => {
  it('rejects with the store\'s error, releases the slot and drops the held answer', async () => {
    const answerClosed = deferred()
    const backend = createServer((request, response) => {
      request.resume()
      response.on('close', () => answerClosed.resolve())
      // Head and half a body: the answer is held open until the gateway drops it.
      response.writeHead(503, { 'content-type': 'application/json' })
      response.write('{"error":')
    })
    const url = await listenForTest(backend, cleanups)
    const config = configFrom({ models: [{ name: 'm', retries: 1, backends: [{ url: `${url}/b0`, name: 'b0' }, { url: `${url}/b1`, name: 'b1' }] }] })
    const route = new ModelRoute(config.models[0]!)
    cleanups.push(() => route.close())
    let releases = 0

    const dispatched = dispatchChat({
      now: () => Date.now(),
      route,
      slots: slotsWhoseRetryFails('b0', () => releases++),
      choose: (names) => names[0]!,
      priority: 0,
      payload: '{"messages":[]}',
      bodyBytes: 15,
      headers: { 'content-type': 'application/json' },
      signal: new ClientDeparture(),
      onCall: () => undefined,
      onFailure: () => undefined,
      onRetry: () => undefined,
    })

    await expect(dispatched).rejects.toThrow('unexpected reply from the slot store')
    expect(releases).toBe(1)
    await answerClosed.promise
  })
})
