/**
 * `sluice_queue_depth` while two generations serve after a reload: the
 * gauge is the sum of both queues (metrics/queue-depths.ts). Each queue set
 * it as it changed, so it showed the last writer: 2 waiting read as 1.
 */
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { configFrom, makeKey, type TestGateway } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { scrapeMetricSum, until } from '../support/metrics.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

function chat(gw: TestGateway): Promise<number> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  }).then((r) => r.status)
}

describe('sluice_queue_depth across a reload', () => {
  it('counts the waiters of the old and the new generation together', async () => {
    const held = await cleanups.standIn({ hold: true })
    const object = { auth: { keys: [key.entry] }, models: [{ name: 'm', max_concurrency_per_backend: 1, queue: { max_wait_ms: 10_000 }, backends: [{ url: held.url, name: 'b' }] }] }
    const gw = await cleanups.gateway(object)
    const depth = () => scrapeMetricSum(gw.url, 'sluice_queue_depth', { model: 'm' })

    const heldFirst = once(held.events, 'held')
    const answers = [chat(gw)]
    await heldFirst
    answers.push(chat(gw))
    await until(async () => (await depth()) === 1, 'one waiter in the old generation')

    await gw.reload(configFrom({ ...object, server: { port: 0 } }))
    answers.push(chat(gw))
    await until(async () => (await depth()) === 2, 'the new generation\'s waiter counted with the old one\'s')

    // Each answer frees the slot for the next waiter, which the stand-in holds in turn.
    for (let i = 0; i < 3; i++) {
      const next = i < 2 ? once(held.events, 'held') : null
      held.releaseHeld(1)
      await next
    }
    expect(await Promise.all(answers)).toEqual([200, 200, 200])
    await until(async () => (await depth()) === 0, 'no waiters left')
  })
})
