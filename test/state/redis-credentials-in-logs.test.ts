/**
 * The Redis password never reaches a log line, at any level, wherever the URL
 * carries it (userinfo or `?password=`), and a refused login says why: a
 * black-box audit found the `?password=` form printed on every start, and at
 * debug every retry's error carrying ioredis's AUTH command with the password.
 */
import { Writable } from 'node:stream'
import { expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { startGateway } from '../../src/server.js'
import { configFrom, makeKey } from '../support/gateway.js'
import { describeWithRedis, skipUnlessControllable, startTestRedis, type TestRedis } from '../support/redis-server.js'
import { trackedAfterEach } from '../support/tracked.js'
import { until } from '../support/metrics.js'
import { Redis } from 'ioredis'

const key = makeKey('team-a', ['chat'])
const RIGHT = 'right-pass-7f3a'
const WRONG = 'wrong-pass-c9d1%40x'
const cleanups = trackedAfterEach()

async function withRedis(): Promise<TestRedis> {
  const redis = await startTestRedis({ requirePassword: RIGHT })
  cleanups.push(() => redis.close())
  return redis
}

/** A Redis-mode gateway logging at trace into memory; resolves once `msg` was logged. */
async function gatewayLogging(redisUrl: string, msg: string): Promise<() => string> {
  const chunks: string[] = []
  let seen!: () => void
  const logged = new Promise<void>((resolve) => (seen = resolve))
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString('utf8'))
      if (chunk.toString('utf8').includes(msg)) seen()
      done()
    },
  })
  const config = configFrom({
    server: { port: 0, shutdown_grace_ms: 200 },
    state: { kind: 'redis', redis_url: redisUrl },
    auth: { keys: [key.entry] },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
  })
  const gw = await startGateway(config, createLogger('trace', sink))
  cleanups.push(() => gw.shutdown())
  await logged
  return () => chunks.join('')
}

describeWithRedis('the Redis password in logs', () => {
  it('a wrong password, in the query or the userinfo: never logged, and the warning names WRONGPASS', async (context) => {
    const redis = await withRedis()
    skipUnlessControllable(redis, context)
    const host = `127.0.0.1:${redis.port}`
    for (const url of [`redis://${host}/?password=${WRONG}`, `redis://:${WRONG}@${host}`, `redis://default:${WRONG}@${host}`]) {
      const text = (await gatewayLogging(url, 'Redis unreachable'))()
      // The refused login's error was logged at debug before the connection closed and the warning came.
      expect(text).toContain('redis connection error')
      for (const secret of [WRONG, decodeURIComponent(WRONG)]) expect(text, url).not.toContain(secret)
      const warning = text.split('\n').find((line) => line.includes('Redis unreachable'))!
      // Said as a refused login, not a network problem (an operator audit read "connection closed").
      expect(JSON.parse(warning)).toMatchObject({ level: 40, reason: expect.stringMatching(/^authentication failed/), last_error: expect.stringMatching(/WRONGPASS/) })
    }
  })

  it('the right password in ?password=: connected, and the line shows no query', async (context) => {
    const redis = await withRedis()
    skipUnlessControllable(redis, context)
    const text = (await gatewayLogging(`redis://127.0.0.1:${redis.port}/?password=${RIGHT}`, 'Redis connected'))()
    expect(text).not.toContain(RIGHT)
    const connected = JSON.parse(text.split('\n').find((line) => line.includes('Redis connected'))!) as { redis: string }
    expect(connected.redis).toBe(`redis://127.0.0.1:${redis.port}/`)
  })

  // Regression (Redis review, session 24): a Redis back with another password was logged as "connection
  // closed" (the close came before any login failed), and the refusals after it only at debug.
  it('a password changed while connected: the outage, then one warning that the login is refused', async (context) => {
    const redis = await withRedis()
    skipUnlessControllable(redis, context)
    const logs = await gatewayLogging(`redis://:${RIGHT}@127.0.0.1:${redis.port}`, 'Redis connected')
    const admin = new Redis(`redis://:${RIGHT}@127.0.0.1:${redis.port}`)
    cleanups.push(() => admin.quit())
    await admin.config('SET', 'requirepass', 'another-pass-51b2')
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')

    await until(() => logs().includes('Redis refuses the gateway'), 'the refused login warning')
    const warnings = logs()
      .split('\n')
      .filter((line) => line.includes('"level":40') && line.includes('Redis'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(warnings.map((w) => w.msg)).toEqual(['Redis unreachable: each replica admits on its own local limits until it is back', "Redis refuses the gateway's login: each replica admits on its own local limits until it is let in"])
    expect(warnings[1]).toMatchObject({ reason: expect.stringMatching(/^authentication failed/), last_error: expect.stringMatching(/WRONGPASS/) })
    expect(logs()).not.toContain('another-pass-51b2')
  })
})

