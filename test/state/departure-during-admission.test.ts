/**
 * A client that leaves while its key's limits are being checked in Redis (a
 * round trip the chat route awaits): once, the close went unseen, the
 * request was forwarded anyway, its stream never settled and its slot stayed
 * leased (renewed for good) on every replica.
 */
import { connect } from 'node:net'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { until } from '../support/metrics.js'
import { startRedisTestGateway } from '../support/redis-gateway.js'
import { describeWithRedis, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'

const key = makeKey('team-a', ['chat'], { limits: { max_concurrency: 5 } })

describeWithRedis('a client that leaves during the Redis key check', () => {
  let redis: TestRedis
  let control: Redis
  let backend: VllmStandIn
  let gw: TestGateway

  beforeAll(async () => {
    redis = await startTestRedis()
    control = new Redis(redis.url)
    backend = await startVllmStandIn({ tokens: 3, interTokenDelayMs: 20 })
    gw = await startRedisTestGateway({
      state: { kind: 'redis', redis_url: redis.url, key_prefix: uniquePrefix('departure') },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', max_concurrency_per_backend: 1, queue: { max_wait_ms: 1500 }, backends: [{ url: backend.url, name: 'b' }] }],
    })
  })

  afterAll(async () => {
    await gw?.shutdown()
    await backend?.close()
    control?.disconnect()
    await redis?.close()
  })

  it('is not forwarded, and the one slot is free for the next request', async () => {
    const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    const { port } = new URL(gw.url)
    // Writes wait in Redis for 200 ms: the key check is in flight when the client leaves.
    await control.call('CLIENT', 'PAUSE', '200', 'WRITE')
    const socket = connect(Number(port), '127.0.0.1')
    await once(socket, 'connect')
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key.token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    setTimeout(() => socket.destroy(), 30)
    await once(socket, 'close')

    await until(() => gw.logLines().some((l) => l.msg === 'request completed' && l.status === 499), 'the 499 access line')
    const next = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(next.status).toBe(200)
    expect(backend.received).toHaveLength(1)
  })
})
