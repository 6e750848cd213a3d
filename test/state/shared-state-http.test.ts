/**
 * Redis mode through real HTTP: gateway replicas sharing one redis-server
 * (started for this file) in front of one vLLM stand-in. Slots, the
 * priority queue and key limits are global; a replica killed with SIGKILL
 * gives its slots back within a lease TTL; a Redis outage is served on
 * local limits and shared state resumes when Redis returns.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import type { ReceivedRequest, VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { modelKeys } from '../../src/state/redis-keys.js'
import { configFrom, makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { startChildGateway, type ChildGateway } from '../support/redis-gateway.js'
import { describeWithRedis, expiriesIn, skipUnlessControllable, useInspectedRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { scrapeMetric, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'
import { nextEvents } from '../support/stand-in-events.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()
let redis: TestRedis
let inspect: Redis

interface Shared {
  readonly prefix: string
  readonly config: (backend: VllmStandIn, model: Record<string, unknown>, keys?: readonly TestKey[]) => Record<string, unknown>
}

/** One model "m" on one backend "b1", state in the test's Redis under a fresh prefix. */
function sharedState(): Shared {
  const prefix = uniquePrefix('http')
  return {
    prefix,
    config: (backend, model, keys = [key]) => ({
      server: { shutdown_grace_ms: 1000 },
      state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
      auth: { keys: keys.map((k) => k.entry) },
      models: [{ name: 'm', served_name: 'stand-in-model', backends: [{ url: backend.url, name: 'b1' }], ...model }],
    }),
  }
}

/**
 * The 50 ms admission budget counts event-loop delay too: on a test machine
 * busy with other suites it would send some admissions to local limits and
 * blur what these cases check. Its own case is in redis-store.test.ts.
 */
const TIMINGS = { callBudgetMs: 1000 }

async function gateway(config: Record<string, unknown>): Promise<TestGateway> {
  const gw = await cleanups.redisGateway(config, TIMINGS)
  await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'readyz 200')
  return gw
}

function send(url: string, marker: string, options: { priority?: number; as?: TestKey; stream?: boolean } = {}): Promise<Response> {
  const body: Record<string, unknown> = { model: 'm', messages: [{ role: 'user', content: marker }], stream: options.stream ?? false }
  if (options.priority !== undefined) body.priority = options.priority
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${(options.as ?? key).token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

function markerOf(received: ReceivedRequest): string {
  return (received.body as { messages: { content: string }[] }).messages[0]!.content
}

const leasesIn = (prefix: string) => inspect.zcard(modelKeys(prefix, 'm', ['b1']).leases[0]!)
const queuedIn = (prefix: string) => inspect.zcard(modelKeys(prefix, 'm', ['b1']).queue)

describeWithRedis('Redis mode through HTTP', () => {
  useInspectedRedis((started) => ({ redis, inspect } = started))

  describe('two replicas, one backend', () => {
    it('never has more requests at the backend than its slots, with 200 concurrent clients split across both', async () => {
      const backend = await cleanups.standIn({ tokens: 3, interTokenDelayMs: 1 })
      const shared = sharedState()
      const model = { priority_scheduling: true, max_concurrency_per_backend: 2, queue: { max_size: 1000, max_wait_ms: 60000 } }
      const replicas = [await gateway(shared.config(backend, model)), await gateway(shared.config(backend, model))]
      let maxInFlight = 0
      backend.events.on('request', () => (maxInFlight = Math.max(maxInFlight, backend.inFlight())))

      const statuses = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const response = await send(replicas[i % 2]!.url, `r${i}`, { priority: (i * 7) % 11, stream: i % 3 === 0 })
          await response.arrayBuffer()
          return response.status
        }),
      )
      expect(statuses.filter((s) => s !== 200)).toEqual([])
      expect(maxInFlight).toBe(2)
      for (const gw of replicas) {
        await until(async () => (await scrapeMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b1' })) === 0, 'in-flight 0')
        expect(await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })).toBe(0)
      }
      expect(await leasesIn(shared.prefix)).toBe(0)
      expect(await queuedIn(shared.prefix)).toBe(0)
    })

    it('serves waiters from both replicas in one priority order: -3, 0, 0, 5, 5', async () => {
      const backend = await cleanups.standIn({ hold: true, tokens: 2 })
      const shared = sharedState()
      const model = { priority_scheduling: true, max_concurrency_per_backend: 2 }
      const [one, two] = [await gateway(shared.config(backend, model)), await gateway(shared.config(backend, model))]
      const running = nextEvents(backend, 'held', 2)
      const responses = [send(one.url, 'busy-1'), send(two.url, 'busy-2')]
      await running

      const arrivals: [string, number, TestGateway][] = [['p5-a', 5, one], ['p0-b', 0, two], ['p5-c', 5, one], ['pm3-d', -3, two], ['p0-e', 0, one]]
      for (const [index, [marker, priority, gw]] of arrivals.entries()) {
        responses.push(send(gw.url, marker, { priority }))
        await until(async () => (await queuedIn(shared.prefix)) === index + 1, `${index + 1} queued`)
      }
      expect((await scrapeMetric(one.url, 'sluice_queue_depth', { model: 'm' }))! + (await scrapeMetric(two.url, 'sluice_queue_depth', { model: 'm' }))!).toBe(5)

      const served: string[] = []
      for (let i = 0; i < arrivals.length; i++) {
        const next = nextEvents(backend, 'held', 1)
        expect(backend.releaseHeld(1)).toBe(1)
        served.push(markerOf((await next)[0]!))
      }
      expect(backend.releaseHeld(2)).toBe(2)
      expect(served).toEqual(['pm3-d', 'p0-b', 'p0-e', 'p5-a', 'p5-c'])
      expect((await Promise.all(responses)).map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 200])
    })
  })

  describe('key limits across replicas', () => {
    it('requests_per_minute 3 shared: the fourth request, on either replica, gets 429', async () => {
      const backend = await cleanups.standIn({ tokens: 2 })
      const limited = makeKey('rpm-3', ['chat'], { limits: { requests_per_minute: 3 } })
      const shared = sharedState()
      const [one, two] = [await gateway(shared.config(backend, {}, [limited])), await gateway(shared.config(backend, {}, [limited]))]
      const statuses: number[] = []
      for (const gw of [one, two, one, two, one]) statuses.push((await send(gw.url, 'x', { as: limited })).status)
      expect(statuses).toEqual([200, 200, 200, 429, 429])
      const refused = await send(two.url, 'x', { as: limited })
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(19)
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_requests')
    })

    it('requests_per_minute 10: exactly 10 of 14 concurrent requests split across replicas succeed', async () => {
      const backend = await cleanups.standIn({ tokens: 2 })
      const limited = makeKey('rpm-10', ['chat'], { limits: { requests_per_minute: 10 } })
      const shared = sharedState()
      const replicas = [await gateway(shared.config(backend, {}, [limited])), await gateway(shared.config(backend, {}, [limited]))]
      const statuses = await Promise.all(Array.from({ length: 14 }, (_, i) => send(replicas[i % 2]!.url, `r${i}`, { as: limited }).then((r) => r.status)))
      expect(statuses.filter((s) => s === 200)).toHaveLength(10)
      expect(statuses.filter((s) => s === 429)).toHaveLength(4)
    })

    it('max_concurrency 1 shared: a request on the other replica is refused while one runs', async () => {
      const backend = await cleanups.standIn({ hold: true, tokens: 2 })
      const limited = makeKey('conc-1', ['chat'], { limits: { max_concurrency: 1 } })
      const shared = sharedState()
      const [one, two] = [await gateway(shared.config(backend, {}, [limited])), await gateway(shared.config(backend, {}, [limited]))]
      const held = nextEvents(backend, 'held', 1)
      const running = send(one.url, 'first', { as: limited })
      await held
      const refused = await send(two.url, 'second', { as: limited })
      expect(refused.status).toBe(429)
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('concurrency')
      backend.releaseHeld(1)
      expect((await running).status).toBe(200)
      backend.options.hold = false
      await until(async () => (await send(two.url, 'third', { as: limited })).status === 200, 'the place freed on the other replica')
    })
  })

  describe('a replica killed with SIGKILL', () => {
    it('gives its slots back within one lease TTL and its queued entries disappear; the other replica keeps serving', async () => {
      const timings = { ...TIMINGS, leaseTtlMs: 1500, backstopMs: 200 }
      const backend = await cleanups.standIn({ hold: true, tokens: 2 })
      const shared = sharedState()
      const model = { max_concurrency_per_backend: 2 }
      let doomed: ChildGateway | null = await startChildGateway(shared.config(backend, model), timings)
      cleanups.push(() => doomed?.kill() ?? Promise.resolve())
      const survivor = await cleanups.redisGateway(shared.config(backend, model), timings)
      await until(async () => (await fetch(`${doomed!.url}/readyz`)).status === 200 && (await fetch(`${survivor.url}/readyz`)).status === 200, 'both ready')

      const held = nextEvents(backend, 'held', 2)
      const lost = [send(doomed.url, 'doomed-1'), send(doomed.url, 'doomed-2'), send(doomed.url, 'doomed-queued')].map((p) => p.catch(() => null))
      await held
      await until(async () => (await queuedIn(shared.prefix)) === 1, "the doomed replica's waiter queued")
      const waiting = send(survivor.url, 'survivor')
      await until(async () => (await queuedIn(shared.prefix)) === 2, "the survivor's waiter queued")
      const keys = modelKeys(shared.prefix, 'm', ['b1'])
      const doomedLeases = await inspect.zrange(keys.leases[0]!, '0', '-1')
      expect(doomedLeases).toHaveLength(2)
      const doomedId = doomedLeases[0]!.split('/')[0]!
      // Its leases and heartbeat (which keeps its waiter in the queue, ahead of the survivor's) expire at most
      // one TTL ahead, by Redis's clock; renewals until the kill write the same.
      const { now, sets } = await expiriesIn(inspect, [keys.leases[0]!, keys.owners])
      const doomedExpiries = sets.flat().filter(([member]) => member.split('/')[0] === doomedId)
      expect(doomedExpiries).toHaveLength(3)
      for (const [, expiresAt] of doomedExpiries) expect(expiresAt - now).toBeLessThanOrEqual(timings.leaseTtlMs)

      const served = nextEvents(backend, 'held', 1)
      await doomed.kill()
      doomed = null
      const [next] = await served
      // The survivor's waiter got the slot, though the doomed replica's was ahead of it: that one was dropped.
      expect(markerOf(next!)).toBe('survivor')
      expect(await queuedIn(shared.prefix)).toBe(0)
      const leasesNow = await inspect.zrange(keys.leases[0]!, '0', '-1')
      expect(leasesNow).toHaveLength(1)
      expect(leasesNow[0]!.split('/')[0]).not.toBe(doomedId)

      backend.releaseHeld(backend.heldCount())
      expect((await waiting).status).toBe(200)
      await Promise.all(lost)
      await until(async () => (await leasesIn(shared.prefix)) === 0, 'no lease left')
    })
  })

  // Regression (lifecycle review, 2026-11-28): the new generation took traffic before its own Redis link
  // was up, so every reload had /readyz answer 503 "redis down" (and admission run on local limits) for
  // the link's connect, while Redis was fine.
  describe('a reload', () => {
    it('takes traffic with its Redis link up: /readyz is 200 and a request admitted through Redis right after', async () => {
      const backend = await cleanups.standIn({ tokens: 2 })
      const shared = sharedState()
      const gw = await gateway(shared.config(backend, { max_concurrency_per_backend: 2 }))
      for (let round = 0; round < 3; round++) {
        await gw.reload(configFrom(shared.config(backend, { max_concurrency_per_backend: 3 + round })))
        expect(gw.context.state.reachable()).toBe(true)
        const ready = await fetch(`${gw.url}/readyz`)
        expect(ready.status, await ready.text()).toBe(200)
      }
      const response = await send(gw.url, 'after-reload')
      expect(response.status).toBe(200)
      await response.arrayBuffer()
    })
  })

  describe('a Redis outage', () => {
    it('serves on local limits, reports it once, and resumes shared state without leaking a slot', async (context) => {
      skipUnlessControllable(redis, context)
      const backend = await cleanups.standIn({ hold: true, tokens: 2 })
      const shared = sharedState()
      const gw = await cleanups.redisGateway(shared.config(backend, { max_concurrency_per_backend: 1 }), TIMINGS)
      await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'ready')
      expect(await scrapeMetric(gw.url, 'sluice_redis_up')).toBe(1)

      // One request runs on a Redis lease, one waits in the Redis queue.
      let held = nextEvents(backend, 'held', 1)
      const before = send(gw.url, 'before')
      await held
      const queuedBefore = send(gw.url, 'queued-before')
      await until(async () => (await queuedIn(shared.prefix)) === 1, 'queued in Redis')

      await redis.stop()
      await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 0, 'sluice_redis_up 0')
      const notReady = await fetch(`${gw.url}/readyz`)
      expect(notReady.status).toBe(503)
      expect(await notReady.json()).toMatchObject({
        status: 'not_ready',
        redis: 'down',
        error: { message: 'Not ready: Redis is unreachable (admission runs on local limits).', type: 'service_unavailable', param: null, code: 'not_ready' },
      })

      // The waiter moved to the local queue; the local limit counts the running Redis lease: still one at a time.
      await until(async () => (await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })) === 1, 'waiter in the local queue')
      const during = [send(gw.url, 'during-1'), send(gw.url, 'during-2')]
      await until(async () => (await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })) === 3, 'three waiting locally')
      expect(backend.heldCount()).toBe(1)
      const order: string[] = []
      for (let i = 0; i < 3; i++) {
        held = nextEvents(backend, 'held', 1)
        backend.releaseHeld(1)
        order.push(markerOf((await held)[0]!))
        expect(backend.heldCount()).toBe(1)
      }
      expect(order).toEqual(['queued-before', 'during-1', 'during-2'])
      backend.releaseHeld(1)
      expect((await Promise.all([before, queuedBefore, ...during])).map((r) => r.status)).toEqual([200, 200, 200, 200])

      await redis.start()
      await until(async () => (await scrapeMetric(gw.url, 'sluice_redis_up')) === 1, 'sluice_redis_up 1')
      await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'ready again')

      // New admissions go through Redis again: the running request holds a lease there.
      held = nextEvents(backend, 'held', 1)
      const after = send(gw.url, 'after')
      await held
      expect(await leasesIn(shared.prefix)).toBe(1)
      backend.releaseHeld(1)
      expect((await after).status).toBe(200)
      await until(async () => (await leasesIn(shared.prefix)) === 0, 'the lease released in Redis')
      expect(await scrapeMetric(gw.url, 'sluice_inflight_requests', { model: 'm', backend: 'b1' })).toBe(0)
      expect(await scrapeMetric(gw.url, 'sluice_queue_depth', { model: 'm' })).toBe(0)

      const warnings = gw.logLines().filter((line) => Number(line.level) >= 40)
      expect(warnings.map((line) => line.msg)).toEqual([expect.stringContaining('Redis unreachable')])
      expect(gw.logLines().filter((line) => String(line.msg).includes('Redis reachable again'))).toHaveLength(1)
    })
  })
})
