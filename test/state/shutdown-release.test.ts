/**
 * A replica that drains gives its slots and key tickets back to Redis, also
 * for the requests the end of the grace period cut: once, Redis was quit
 * before their releases were sent, and the leases blocked those slots on the
 * other replicas until their TTL (15 s by default).
 */
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey } from '../support/gateway.js'
import { startRedisTestGateway } from '../support/redis-gateway.js'
import { describeWithRedis, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'

const key = makeKey('team-a', ['chat'], { limits: { max_concurrency: 5 } })

describeWithRedis('a replica that drains with a request in flight', () => {
  let redis: TestRedis
  let control: Redis
  let backend: VllmStandIn

  beforeAll(async () => {
    redis = await startTestRedis()
    control = new Redis(redis.url)
    backend = await startVllmStandIn({ hold: true })
  })

  afterAll(async () => {
    await backend?.close()
    control?.disconnect()
    await redis?.close()
  })

  it('leaves no lease and no key ticket in Redis once its shutdown resolved', async () => {
    const prefix = uniquePrefix('drain')
    const gw = await startRedisTestGateway({
      server: { shutdown_grace_ms: 100 },
      state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', max_concurrency_per_backend: 1, backends: [{ url: backend.url, name: 'b' }] }],
    })
    const inFlight = fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    }).catch(() => null)
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
