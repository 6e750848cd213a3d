/**
 * A reload while Redis is away (Redis mode). Each generation falls back to
 * local limits of its own; the new one's started from zero, so the requests
 * the previous generation still ran did not count: a chaos audit saw a key
 * at 5 against a max_concurrency of 3, and a backend at 2 against 1 slot.
 * Local limits now count the other generations' requests (slot-peers.ts).
 */
import { expect, it } from 'vitest'
import type { VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { configFrom, makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { startRedisTestGateway } from '../support/redis-gateway.js'
import { describeWithRedis, skipUnlessControllable, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { scrapeMetric, until, untilMetric } from '../support/metrics.js'
import { nextEvents } from '../support/stand-in-events.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const limited = makeKey('limited', ['chat'], { limits: { max_concurrency: 1 } })
const free = makeKey('free', ['chat'])

function config(redis: TestRedis, prefix: string, backend: VllmStandIn, servedName: string): Record<string, unknown> {
  return {
    server: { port: 0, shutdown_grace_ms: 200 },
    state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
    auth: { keys: [limited.entry, free.entry] },
    models: [{ name: 'm', served_name: servedName, max_concurrency_per_backend: 1, backends: [{ url: backend.url, name: 'b' }] }],
  }
}

function chat(gw: TestGateway, as: TestKey): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
}

/** A gateway whose first generation runs one request of `as`, held at the backend, then Redis frozen and a reload. */
async function reloadedDuringOutage(as: TestKey, context: Parameters<typeof skipUnlessControllable>[1]) {
  const redis = await startTestRedis()
  cleanups.push(() => redis.close())
  skipUnlessControllable(redis, context)
  const backend = await cleanups.standIn({ hold: true, tokens: 2 })
  const prefix = uniquePrefix('reload-outage')
  const gw = await startRedisTestGateway(config(redis, prefix, backend, 'stand-in-model'), { healthIntervalMs: 100, callBudgetMs: 200 })
  cleanups.push(() => gw.shutdown())
  await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up')
  const held = nextEvents(backend, 'held', 1)
  const first = chat(gw, as)
  await held

  redis.pause()
  cleanups.push(async () => redis.resume())
  await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 0, 'Redis seen down')
  await gw.reload(configFrom(config(redis, prefix, backend, 'stand-in-model-renamed')))
  return { gw, backend, first }
}

describeWithRedis('a reload while Redis is away', () => {
  it("the key's concurrency counts the previous generation's request: the second gets 429", async (context) => {
    const { gw, backend, first } = await reloadedDuringOutage(limited, context)

    const second = await chat(gw, limited)
    expect(second.status).toBe(429)
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('concurrency')
    expect(backend.received).toHaveLength(1)
    backend.releaseHeld(1)
    expect((await first).status).toBe(200)
  })

  it("the backend's slot counts the previous generation's request: the second waits for it", async (context) => {
    const { gw, backend, first } = await reloadedDuringOutage(free, context)

    const running = nextEvents(backend, 'held', 1)
    const second = chat(gw, free)
    await untilMetric(gw.url, 'sluice_queue_depth', { model: 'm' }, 1)
    expect(backend.received).toHaveLength(1)

    backend.releaseHeld(1)
    await running
    expect(backend.received).toHaveLength(2)
    backend.releaseHeld(1)
    expect(((await Promise.all([first, second])).map((r) => r.status))).toEqual([200, 200])
  })
})
