/**
 * The Redis health board against a real redis-server: what a withdrawal
 * removes. Regression (review): a replica whose check brought a backend back
 * deleted the backend's field whoever had written it, so another replica's
 * down verdict, which had replaced its own, was gone until that replica's
 * next failed check.
 */
import { EventEmitter, once } from 'node:events'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
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

// Regression: the hash read on (re)connect and the channel's messages come on two connections; a read
// answered after a newer message applied its older state (for up to one refresh). A link whose calls
// the test answers when it wants shows the order exactly.
describe('RedisHealthBoard: a read and a message', () => {
  it('a read answered after a message for a backend leaves that backend to the message', async () => {
    let answerRead: ((flat: unknown) => void) | undefined
    let onMessage: ((raw: string) => void) | undefined
    const link = Object.assign(new EventEmitter(), {
      keyPrefix: 'sluice:',
      up: () => true,
      run: (script: string) => (script === 'sluiceHealthRead' ? new Promise((resolve) => (answerRead = resolve)) : Promise.resolve('ok')),
      subscribe: (_channel: string, handler: (raw: string) => void) => void (onMessage = handler),
      loggable: (error: unknown) => error,
    }) as unknown as RedisLink
    const board = new RedisHealthBoard(link, { now: () => Date.now() }, quiet, 'gateway-a')
    const heard: [string, unknown][] = []
    board.watch('m', ['b1', 'b2'], (backend, verdict) => void heard.push([backend, verdict]))
    // The read is out; then a message: another replica withdraws its verdict on b1.
    onMessage!(JSON.stringify({ backend: 'b1', verdict: null }))
    const old = { up: false, ejectedUntil: 0, expiresAt: Date.now() + 60_000, by: 'gateway-c' }
    answerRead!(['b1', JSON.stringify(old), 'b2', JSON.stringify(old)])
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(heard).toEqual([
      ['b1', null],
      ['b2', { up: false, ejectedUntil: 0, expiresAt: old.expiresAt }],
    ])
    board.close()
  })

  // Regression (review): a withdrawal's failure, known only after a newer publish was issued (and lost
  // too), put it back on the list, and Redis coming back withdrew the verdict this gateway still held.
  it('a lost withdrawal overtaken by a newer publish is not made again when Redis answers', async () => {
    const calls: string[] = []
    const link = Object.assign(new EventEmitter(), {
      keyPrefix: 'sluice:',
      up: () => true,
      run: (script: string) => {
        calls.push(script)
        return script === 'sluiceHealthRead' ? Promise.resolve([]) : Promise.reject(new Error('connection lost'))
      },
      subscribe: () => undefined,
      loggable: (error: unknown) => error,
    }) as unknown as RedisLink
    const board = new RedisHealthBoard(link, { now: () => Date.now() }, quiet, 'gateway-a')
    board.watch('m', ['b1'], () => undefined)
    board.clear('m', 'b1')
    board.publish('m', 'b1', { up: false, ejectedUntil: 0, expiresAt: Date.now() + 60_000 })
    await new Promise<void>((resolve) => setImmediate(resolve))
    calls.length = 0
    link.emit('up')
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(calls).not.toContain('sluiceHealthClear')
    board.close()
  })
})
