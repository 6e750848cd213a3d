/**
 * A server at redis_url that cannot hold the shared state: a read-only
 * replica, a Redis Cluster node without every hash slot, a primary that a
 * failover turned into a replica. Each made every admission call fail into
 * local limits while /readyz said Redis was up and sluice_redis_up was 1,
 * with nothing logged (a black-box audit). Now each counts as Redis down,
 * with the reason logged, until a check finds the server usable again.
 * And a frozen server does not hold a drain.
 */
import { randomUUID } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { expect, it, type TestContext } from 'vitest'
import { makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { startRedisTestGateway } from '../support/redis-gateway.js'
import { describeWithRedis, skipUnlessControllable, startTestRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'
import { delayedLink } from '../support/delayed-link.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

async function redis(args?: readonly string[]): Promise<TestRedis> {
  const started = await startTestRedis(args === undefined ? {} : { args })
  cleanups.push(() => started.close())
  return started
}

async function gatewayOn(redisUrl: string, keys: readonly TestKey[] = [key], healthIntervalMs = 100): Promise<TestGateway> {
  const backend = await cleanups.standIn({ tokens: 2 })
  const gw = await startRedisTestGateway(
    {
      server: { shutdown_grace_ms: 200 },
      state: { kind: 'redis', redis_url: redisUrl, key_prefix: uniquePrefix('server-check') },
      auth: { keys: keys.map((k) => k.entry) },
      models: [{ name: 'm', backends: [{ url: backend.url }] }],
    },
    { healthIntervalMs },
  )
  cleanups.push(() => gw.shutdown())
  return gw
}

/** Redis counts as down for `reason`: logged, /readyz 503 naming Redis, sluice_redis_up 0. */
async function expectDownFor(gw: TestGateway, reason: string): Promise<void> {
  await until(() => gw.logLines().some((line) => line.msg?.toString().startsWith('Redis unreachable') === true && String(line.reason).includes(reason)), `Redis down for ${reason}`)
  const ready = await fetch(`${gw.url}/readyz`)
  expect(ready.status).toBe(503)
  expect(await ready.json()).toMatchObject({ redis: 'down' })
  expect(await scrapeMetric(gw.url, 'sluice_redis_up')).toBe(0)
}

const chat = (gw: TestGateway, as: TestKey = key) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })

describeWithRedis('a Redis server that cannot hold the shared state', () => {
  it('a read-only replica: Redis down, saying so', async (context) => {
    const primary = await redis()
    skipUnlessControllable(primary, context)
    const replica = await redis(['--replicaof', '127.0.0.1', String(primary.port)])

    const gw = await gatewayOn(replica.url)

    await expectDownFor(gw, 'read-only replica')
    expect(await scrapeMetric(gw.url, 'sluice_redis_local_admissions_total', { model: 'm' })).toBe(0)
    // Served on local limits meanwhile, and counted so.
    expect((await chat(gw)).status).toBe(200)
    expect(await scrapeMetric(gw.url, 'sluice_redis_local_admissions_total', { model: 'm' })).toBe(1)
  })

  // Regression (security audit): ioredis logged the SELECT refusal at debug and went on in database 0.
  it('a database the server does not have: Redis down, saying so; one it has is used', async (context) => {
    const server = await redis(['--databases', '2'])
    skipUnlessControllable(server, context)

    const missing = await gatewayOn(`${server.url}/5`)
    await expectDownFor(missing, 'refuses database 5')

    // A key with a rate limit leaves its bucket in Redis: where it is tells which database is used.
    const limited = makeKey('limited', ['chat'], { limits: { requests_per_minute: 100 } })
    const present = await gatewayOn(`${server.url}/1`, [limited])
    await until(async () => (await fetch(`${present.url}/readyz`)).status === 200, 'Redis up in database 1')
    expect((await chat(present, limited)).status).toBe(200)
    const inspect = new Redis(`${server.url}/1`, { maxRetriesPerRequest: 1 })
    const inspectZero = new Redis(server.url, { maxRetriesPerRequest: 1 })
    cleanups.push(() => inspect.quit(), () => inspectZero.quit())
    expect(await inspect.dbsize()).toBeGreaterThan(0)
    expect(await inspectZero.dbsize()).toBe(0)
  })

  it('a Redis Cluster node that does not hold every hash slot: Redis down, saying so', async (context) => {
    const probe = await redis()
    skipUnlessControllable(probe, context)
    const nodes = join(tmpdir(), `sluice-nodes-${randomUUID()}.conf`)
    cleanups.push(() => rm(nodes, { force: true }))
    const node = await redis(['--cluster-enabled', 'yes', '--cluster-config-file', nodes])

    const gw = await gatewayOn(node.url)

    await expectDownFor(gw, 'Redis Cluster node')
  })

  it('a primary a failover turns into a replica: down at the first refused call, up again once it is a primary', async (context) => {
    const server = await redis()
    skipUnlessControllable(server, context)
    const other = await redis()
    const gw = await gatewayOn(server.url)
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up')
    const admin = new Redis(server.url, { lazyConnect: true })
    cleanups.push(() => admin.quit())
    await admin.connect()

    await admin.call('REPLICAOF', '127.0.0.1', String(other.port))
    // Its admission script is refused (READONLY); the answer comes on local limits.
    expect((await chat(gw)).status).toBe(200)
    await expectDownFor(gw, 'READONLY')

    await admin.call('REPLICAOF', 'NO', 'ONE')
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up again')
    expect(gw.logLines().some((line) => line.msg === 'Redis reachable again: admission uses the shared state')).toBe(true)
  })

  /** A field of the server's INFO, as a number (calls of a command, connections accepted). */
  async function infoNumber(admin: Redis, section: string, pattern: RegExp): Promise<number> {
    return Number(pattern.exec(await admin.info(section))?.[1] ?? 0)
  }

  /** A gateway on a server of its own, Redis up, and an admin connection to that server. */
  async function upGatewayWithAdmin(context: TestContext): Promise<{ gw: TestGateway; admin: Redis }> {
    const server = await redis()
    skipUnlessControllable(server, context)
    const gw = await gatewayOn(server.url)
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up')
    const admin = new Redis(server.url, { lazyConnect: true })
    cleanups.push(() => admin.quit())
    await admin.connect()
    return { gw, admin }
  }

  const reachableAgain = (gw: TestGateway) => gw.logLines().filter((line) => line.msg === 'Redis reachable again: admission uses the shared state').length

  // Regression (diff review, session 26): the check ran its six commands one after another, so a Redis
  // 200 ms away never finished it within its budget and stayed down, where a merely slow Redis counts up.
  it('a Redis that is only far away (60 ms each way): up, its check costing about one round trip', async (context) => {
    const server = await redis()
    skipUnlessControllable(server, context)
    const link = await delayedLink(server.port, 60)
    cleanups.push(() => link.close())

    // Its check and PING get 400 ms: six round trips of 120 ms would not fit.
    const gw = await gatewayOn(`redis://127.0.0.1:${link.port}`, [key], 400)
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up', 10_000)
    expect(gw.logLines().some((line) => line.msg?.toString().startsWith('Redis unreachable') === true)).toBe(false)
  })

  // Regression (Redis review, session 26): with min-replicas-to-write and no replica, every script was
  // refused (NOREPLICAS) and every admission went local (a 2-slot backend ran 6 across three replicas),
  // while /readyz said Redis was up and nothing was logged.
  it('a primary that refuses writes (NOREPLICAS): down at the first refused call, and stays down until it writes again', async (context) => {
    const { gw, admin } = await upGatewayWithAdmin(context)

    await admin.config('SET', 'min-replicas-to-write', '1')
    expect((await chat(gw)).status).toBe(200)
    await expectDownFor(gw, 'NOREPLICAS')
    // Each check after it runs the probe again (an EVAL the server counts) and finds the refusal: no flap up.
    const probes = await infoNumber(admin, 'commandstats', /^cmdstat_eval:calls=(\d+)/m)
    await until(async () => (await infoNumber(admin, 'commandstats', /^cmdstat_eval:calls=(\d+)/m)) >= probes + 3, 'three more checks')
    expect(reachableAgain(gw)).toBe(0)
    expect(await scrapeMetric(gw.url, 'sluice_redis_up')).toBe(0)

    await admin.config('SET', 'min-replicas-to-write', '0')
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up again')
    expect(reachableAgain(gw)).toBe(1)
  })

  // Regression (Redis review, session 26): under CLIENT PAUSE WRITE, the check on reconnecting timed out and
  // counted Redis up; the next PING, queued behind its blocked writes, marked it down: /readyz flapped every ~2 s.
  it('writes paused (CLIENT PAUSE WRITE): down, and stays down while the pause lasts', async (context) => {
    const { gw, admin } = await upGatewayWithAdmin(context)

    await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE')
    cleanups.push(() => admin.call('CLIENT', 'UNPAUSE'))
    // Its admission script waits past the budget; the answer comes on local limits.
    expect((await chat(gw)).status).toBe(200)
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 0, 'Redis down', 10_000)
    // Every reconnect runs the check again and finds the writes still waiting: no flap up.
    const connections = await infoNumber(admin, 'stats', /^total_connections_received:(\d+)/m)
    await until(async () => (await infoNumber(admin, 'stats', /^total_connections_received:(\d+)/m)) >= connections + 3, 'three more reconnects', 10_000)
    expect(reachableAgain(gw)).toBe(0)
    expect(gw.logLines().some((line) => line.msg === 'Redis connected: admission uses the shared state')).toBe(true)
    expect(await scrapeMetric(gw.url, 'sluice_redis_up')).toBe(0)

    await admin.call('CLIENT', 'UNPAUSE')
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up again', 10_000)
  })
})

// Regression (Redis review, session 24): every script call was refused with NOPERM and every admission
// went local (a 2-slot backend held 4 across two replicas), while /readyz said Redis was up, with no log line.
describeWithRedis('a Redis user the ACL does not allow what the shared state needs', () => {
  async function serverWithUser(rules: readonly string[]): Promise<{ url: string; admin: Redis }> {
    const server = await redis()
    const admin = new Redis(server.url, { lazyConnect: true })
    cleanups.push(() => admin.quit())
    await admin.connect()
    await admin.call('ACL', 'SETUSER', 'limited', 'on', '>limited-pw', ...rules)
    const url = new URL(server.url)
    url.username = 'limited'
    url.password = 'limited-pw'
    return { url: url.toString().replace(/\/$/, ''), admin }
  }

  it.for([
    { name: 'no EVALSHA', rules: ['~*', '&*', '+@all', '-evalsha'] },
    { name: 'no keys under the prefix', rules: ['~other:*', '&*', '+@all'] },
    // Redis 7 gives a new user no channels: the scripts' PUBLISH fails with an ERR, not a NOPERM (a code review).
    { name: 'no channels', rules: ['~*', 'resetchannels', '+@all'] },
    { name: 'no ZREM, which the gateway also sends itself', rules: ['~*', '&*', '+@all', '-zrem'] },
    { name: 'no SET, which marks a carry counted', rules: ['~*', '&*', '+@all', '-set'] },
    { name: 'no DEL, which a model queue’s reset needs', rules: ['~*', '&*', '+@all', '-del'] },
  ])('$name: Redis down from the start, saying so, and served on local limits', async ({ rules }, context) => {
    const probe = await redis()
    skipUnlessControllable(probe, context)
    const { url } = await serverWithUser(rules)
    const gw = await gatewayOn(url)
    await expectDownFor(gw, 'may not do what the shared state needs')
    expect((await chat(gw)).status).toBe(200)
    expect(await scrapeMetric(gw.url, 'sluice_redis_local_admissions_total', { model: 'm' })).toBe(1)
    expect(gw.logLines().some((line) => line.msg === 'Redis connected: admission uses the shared state')).toBe(false)
  })

  it('a permission taken away while up: down at the first refused call, up again once it is given back', async (context) => {
    const probe = await redis()
    skipUnlessControllable(probe, context)
    const { url, admin } = await serverWithUser(['~*', '&*', '+@all'])
    const gw = await gatewayOn(url)
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up')

    await admin.call('ACL', 'SETUSER', 'limited', '-evalsha', '-eval')
    expect((await chat(gw)).status).toBe(200)
    await expectDownFor(gw, 'NOPERM')

    await admin.call('ACL', 'SETUSER', 'limited', '+evalsha', '+eval')
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up again')
  })
})

describeWithRedis('a drain while Redis is frozen', () => {
  // Regression (audit): SIGTERM logged "draining", then nothing until Redis was thawed: closing the
  // connections waited for a PING that a frozen server never answers.
  it('ends: the gateway does not wait for a Redis that never answers', async (context) => {
    const server = await redis()
    skipUnlessControllable(server, context)
    const backend = await cleanups.standIn({ tokens: 2 })
    const gw = await startRedisTestGateway(
      {
        server: { shutdown_grace_ms: 200 },
        state: { kind: 'redis', redis_url: server.url, key_prefix: uniquePrefix('frozen') },
        auth: { keys: [key.entry] },
        models: [{ name: 'm', backends: [{ url: backend.url }] }],
      },
      { healthIntervalMs: 100 },
    )
    await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'Redis up')
    expect((await chat(gw)).status).toBe(200)

    server.pause()
    await gw.shutdown()

    expect(gw.logLines().some((line) => line.level === 50)).toBe(false)
  })
})
