/**
 * A Redis-mode gateway with many models: every model's slots listen to the
 * one Redis link, so a dozen models once passed Node's default of 10
 * listeners per event and printed a MaxListenersExceededWarning (not JSON,
 * and reading "memory leak") on stderr at every start.
 */
import { expect, it } from 'vitest'
import { configFrom, makeKey } from '../support/gateway.js'
import { describeWithRedis, useInspectedRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()
let redis: TestRedis

describeWithRedis('a Redis-mode gateway with many models', () => {
  useInspectedRedis((started) => ({ redis } = started))

  it('starts, and reloads, without a listener warning', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error) => warnings.push(warning)
    process.on('warning', onWarning)
    cleanups.push(() => process.off('warning', onWarning))
    const models = Array.from({ length: 16 }, (_, i) => ({ name: `m${i}`, backends: [{ url: `http://127.0.0.1:9/${i}` }] }))
    const config = { state: { kind: 'redis', redis_url: redis.url, key_prefix: uniquePrefix('many') }, auth: { keys: [key.entry] }, models }

    const gw = await cleanups.redisGateway(config)
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
    await gw.reload(configFrom({ ...config, server: { port: 0 } }))
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
    // process.emitWarning delivers on a later tick: one setImmediate turn is past every nextTick.
    await new Promise((resolve) => setImmediate(resolve))

    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([])
  })
})
