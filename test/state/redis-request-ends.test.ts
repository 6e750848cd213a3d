/**
 * How a request's hold on Redis ends when it ends unusually:
 * - a client that leaves while its key's limits are being checked in Redis
 *   (a round trip the chat route awaits): once, the close went unseen, the
 *   request was forwarded anyway, its stream never settled and its slot
 *   stayed leased (renewed for good) on every replica;
 * - a replica that drains with a request in flight gives its slot and key
 *   ticket back: once, Redis was quit before their releases were sent, and
 *   the leases blocked those slots on the other replicas until their TTL.
 */
import { connect } from 'node:net'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startVllmStandIn, type StandInOptions, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey } from '../support/gateway.js'
import { until } from '../support/metrics.js'
import { startRedisTestGateway } from '../support/redis-gateway.js'
import type { RedisTimings } from '../../src/state/redis-link.js'
import { describeWithRedis, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'

const key = makeKey('team-a', ['chat'], { limits: { max_concurrency: 5 } })
const CHAT = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })

function chat(url: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: CHAT })
}

describeWithRedis('a request that ends unusually in Redis mode', () => {
  let redis: TestRedis
  let control: Redis
  const backends: VllmStandIn[] = []

  beforeAll(async () => {
    redis = await startTestRedis()
    control = new Redis(redis.url)
  })

  afterAll(async () => {
    for (const backend of backends) await backend.close()
    control?.disconnect()
    await redis?.close()
  })

  /** A gateway with one model, one slot on one stand-in backend, the key's limits in Redis. */
  async function oneSlot(options: StandInOptions, server: Record<string, unknown> = {}, redisTimings: RedisTimings = {}) {
    const backend = await startVllmStandIn(options)
    backends.push(backend)
    const prefix = uniquePrefix('ends')
    const gw = await startRedisTestGateway({
      server,
      state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', max_concurrency_per_backend: 1, queue: { max_wait_ms: 1500 }, backends: [{ url: backend.url, name: 'b' }] }],
    }, redisTimings)
    // Ready: Redis answers (admissions go there, not to the local fallback) and the backend passed a check.
    await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'the gateway to be ready')
    return { backend, gw, prefix }
  }

  it('a client that leaves during the key check is not forwarded, and the one slot is free for the next request', async () => {
    // An admission budget longer than the test: the key check waits for Redis's answer, not the local fallback.
    const { backend, gw } = await oneSlot({ tokens: 3, interTokenDelayMs: 20 }, {}, { callBudgetMs: 10_000 })
    const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    // Writes (scripts included) wait in Redis until unpaused: the gateway's key check is held there, its
    // connection blocked (flag b), when the client leaves; the gateway sees the client gone before it is answered.
    await control.call('CLIENT', 'PAUSE', '10000', 'WRITE')
    try {
      const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
      await once(socket, 'connect')
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key.token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
      await until(async () => /^(?=.* name=sluice )(?=.* flags=\w*b).*$/m.test(String(await control.client('LIST'))), "the gateway's key check held in Redis")
      // Its connection is the one that closes now (the readiness checks' idle ones close seconds later).
      const open = gw.openConnections()
      socket.destroy()
      await until(() => gw.openConnections() < open, 'the gateway to see the client gone')
    } finally {
      await control.call('CLIENT', 'UNPAUSE')
    }

    await until(() => gw.logLines().some((l) => l.msg === 'request completed' && l.status === 499), 'the 499 access line')
    expect((await chat(gw.url)).status).toBe(200)
    expect(backend.received).toHaveLength(1)
    await gw.shutdown()
  })

  it('a drain leaves no lease and no key ticket in Redis once its shutdown resolved', async () => {
    const { backend, gw, prefix } = await oneSlot({ hold: true }, { shutdown_grace_ms: 100 })
    const inFlight = chat(gw.url).catch(() => null)
    await once(backend.events, 'held')
    const [leaseKey] = await control.keys(`${prefix}*leases*`)
    const [activeKey] = await control.keys(`${prefix}*active`)
    expect(await control.zcard(leaseKey!)).toBe(1)

    await gw.shutdown()
    await inFlight

    expect(await control.zcard(leaseKey!)).toBe(0)
    expect(await control.zcard(activeKey!)).toBe(0)
  })
})
