/**
 * The Redis health board against a real redis-server: what a withdrawal
 * removes. Regression (review): a replica whose check brought a backend back
 * deleted the backend's field whoever had written it, so another replica's
 * down verdict, which had replaced its own, was gone until that replica's
 * next failed check.
 */
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { RedisHealthBoard } from '../../src/state/redis-health-board.js'
import { modelKeys } from '../../src/state/redis-keys.js'
import { RedisLink } from '../../src/state/redis-link.js'
import { describeWithRedis, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { until } from '../support/metrics.js'

const quiet = pino({ level: 'silent' })
let redis: TestRedis
let inspect: Redis
const links: RedisLink[] = []

async function board(prefix: string, signer: string): Promise<RedisHealthBoard> {
  const link = new RedisLink({ url: redis.url, keyPrefix: prefix, logger: quiet, callBudgetMs: 2000 })
  links.push(link)
  if (!link.up()) await once(link, 'up')
  return new RedisHealthBoard(link, { now: () => Date.now() }, quiet, signer)
}

const verdict = () => ({ up: false, ejectedUntil: 0, expiresAt: Date.now() + 60_000 })
const settled = () => Promise.all(links.map((link) => link.idle()))

describeWithRedis('RedisHealthBoard', () => {
  beforeAll(async () => {
    redis = await startTestRedis()
    inspect = new Redis(redis.url)
  })
  afterAll(async () => {
    inspect?.disconnect()
    await redis?.close()
  })
  afterEach(async () => {
    await Promise.all(links.splice(0).map((link) => link.close()))
  })

  it('a withdrawal removes the withdrawing gateway’s own verdict, not another’s that replaced it', async () => {
    const prefix = uniquePrefix('board')
    const health = modelKeys(prefix, 'm', []).health
    const a = await board(prefix, 'gateway-a')
    const c = await board(prefix, 'gateway-c')
    a.publish('m', 'b1', verdict())
    await settled()
    c.publish('m', 'b1', verdict())
    await settled()
    a.clear('m', 'b1')
    await settled()
    expect(JSON.parse((await inspect.hget(health, 'b1'))!)).toMatchObject({ by: 'gateway-c' })
    c.clear('m', 'b1')
    await settled()
    expect(await inspect.hexists(health, 'b1')).toBe(0)
  })

  it('a verdict without a signature (an older release’s) is anyone’s to withdraw', async () => {
    const prefix = uniquePrefix('board')
    const health = modelKeys(prefix, 'm', []).health
    const a = await board(prefix, 'gateway-a')
    await inspect.hset(health, 'b1', JSON.stringify(verdict()))
    a.clear('m', 'b1')
    await until(async () => (await inspect.hexists(health, 'b1')) === 0, 'the unsigned verdict withdrawn')
  })
})
