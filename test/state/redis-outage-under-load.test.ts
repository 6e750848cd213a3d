/**
 * Issue 9, Redis killed under load: two replicas sharing one redis-server
 * (this file's own, on a free port) carry 300 concurrent-ish requests —
 * plain and streamed, some aborted by their client — while Redis is killed
 * with SIGKILL and later restarted, empty, on the same port.
 *
 * Full accounting: every request gets exactly one answer (200 or a
 * DESIGN.md error), none outlives its deadline, the replicas'
 * sluice_requests_total matches what the clients saw status by status
 * (aborted ones as 499), nothing stays in flight or queued (in the
 * replicas' gauges or in Redis), sluice_redis_up goes 0 and back to 1, and
 * both replicas admit through Redis again afterwards.
 */
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { expect, it } from 'vitest'
import type { ReceivedRequest } from '../../src/dev/vllm-stand-in.js'
import { keyLimitKeys, modelKeys } from '../../src/state/redis-keys.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { isErrorBody } from '../support/raw-http.js'
import { describeWithRedis, skipUnlessControllable, useInspectedRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { metricSamples, scrape, scrapeMetricSum, until } from '../support/metrics.js'
import { answerIsWhole } from '../support/chat-answers.js'
import { trackedAfterEach } from '../support/tracked.js'
import { deferred } from '../support/deferred.js'

const key = makeKey('team-load', ['chat'], { limits: { max_concurrency: 1000 } })
const cleanups = trackedAfterEach()
let redis: TestRedis
let inspect: Redis

const TOTAL = 300
const WORKERS = 24
/** Redis is killed once this many requests were sent, and restarted once this many were answered. */
const KILL_AT_SENT = 100
const RESTART_AT_DONE = 200
/** Requests past these wait for the kill and for the restart, so each phase has traffic. */
const GATE_KILLED = 130
const GATE_RESTARTED = 230
const REQUEST_DEADLINE_MS = 10_000

/** The 50 ms admission budget counts event-loop delay too, and this test loads the loop on purpose. */
const TIMINGS = { callBudgetMs: 1000 }

type Kind = 'plain' | 'stream' | 'aborted-stream' | 'aborted-plain'
type Outcome = { readonly kind: Kind; readonly result: number | 'aborted' | 'hung' | 'broken'; readonly detail?: string }

/** Fixed mix: 1 in 20 streams aborted after its first token, 1 in 20 plain requests aborted while at the backend. */
function kindOf(i: number): Kind {
  if (i % 20 === 7) return 'aborted-stream'
  if (i % 20 === 13) return 'aborted-plain'
  return i % 3 === 0 ? 'stream' : 'plain'
}

const EXPECTED_CONTENT = 'tok0 tok1 tok2 '

function markerOf(received: ReceivedRequest): string {
  return (received.body as { messages: { content: string }[] }).messages[0]!.content
}

describeWithRedis('a Redis outage under load', () => {
  useInspectedRedis((started) => ({ redis, inspect } = started))

  it('answers every request exactly once, counts each, leaks nothing, and resumes shared state on both replicas', async (context) => {
    skipUnlessControllable(redis, context)
    // "m": streams paced at 2 ms a token (3 tokens unless aborted, which would take 1000); "h": held until released.
    const paced = await cleanups.standIn({ tokens: 1000, interTokenDelayMs: 2 })
    const holding = await cleanups.standIn({ hold: true, tokens: 3 })
    const prefix = uniquePrefix('outage-load')
    const config = {
      server: { shutdown_grace_ms: 1000 },
      state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
      auth: { keys: [key.entry] },
      models: [
        { name: 'm', served_name: 'stand-in-model', max_concurrency_per_backend: 4, queue: { max_size: 1000, max_wait_ms: 8000 }, backends: [{ url: paced.url, name: 'paced' }] },
        { name: 'h', served_name: 'stand-in-model', max_concurrency_per_backend: 50, backends: [{ url: holding.url, name: 'holding' }] },
      ],
    }
    const replicas: TestGateway[] = []
    for (let r = 0; r < 2; r++) {
      replicas.push(await cleanups.redisGateway(config, TIMINGS))
    }
    for (const gw of replicas) await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'readyz 200')
    const mKeys = modelKeys(prefix, 'm', ['paced'])
    const hKeys = modelKeys(prefix, 'h', ['holding'])
    const keyKeys = keyLimitKeys(prefix, key.id)

    // Aborted plain requests wait for the held backend to have them.
    const heldWaiters = new Map<string, () => void>()
    holding.events.on('held', (received: ReceivedRequest) => heldWaiters.get(markerOf(received))?.())

    const outcomes: (Outcome | undefined)[] = Array.from({ length: TOTAL })
    let sent = 0
    let done = 0
    const killed = deferred()
    const restarted = deferred()
    const reachedKill = deferred()
    const reachedRestart = deferred()

    async function one(i: number): Promise<Outcome> {
      const kind = kindOf(i)
      const marker = `r${i}`
      const gw = replicas[i % 2]!
      const userAbort = new AbortController()
      const deadline = AbortSignal.timeout(REQUEST_DEADLINE_MS)
      const body: Record<string, unknown> = { model: kind === 'aborted-plain' ? 'h' : 'm', messages: [{ role: 'user', content: marker }] }
      if (kind === 'stream' || kind === 'aborted-stream') body.stream = true
      if (kind === 'stream' || kind === 'plain') body.max_tokens = 3
      const held = new Promise<'held'>((resolve) => heldWaiters.set(marker, () => resolve('held')))
      try {
        const responding = fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.any([userAbort.signal, deadline]),
        })
        if (kind === 'aborted-plain' && (await Promise.race([held, responding.then(() => 'answered' as const)])) === 'held') {
          userAbort.abort()
          await responding
          return { kind, result: 'broken', detail: 'answered after its abort' }
        }
        const response = await responding
        if (kind === 'aborted-stream' && response.status === 200) {
          const reader = response.body!.getReader()
          let text = ''
          while (!text.includes('tok0')) {
            const { done: ended, value } = await reader.read()
            if (ended) return { kind, result: 'broken', detail: `ended before its first token: ${text}` }
            text += Buffer.from(value).toString('utf8')
          }
          userAbort.abort()
          await reader.read()
          return { kind, result: 'broken', detail: 'still readable after its abort' }
        }
        const text = await response.text()
        if (response.status !== 200) {
          const shaped = isErrorBody({ status: response.status, headers: { 'content-type': response.headers.get('content-type') ?? '' }, body: Buffer.from(text), text })
          return { kind, result: shaped ? response.status : 'broken', detail: text }
        }
        return { kind, result: answerIsWhole(kind === 'plain' ? 'plain' : 'stream', text, EXPECTED_CONTENT) ? 200 : 'broken', detail: text }
      } catch (error) {
        if (deadline.aborted) return { kind, result: 'hung' }
        if (userAbort.signal.aborted) return { kind, result: 'aborted' }
        return { kind, result: 'broken', detail: String(error) }
      } finally {
        heldWaiters.delete(marker)
      }
    }

    async function worker(): Promise<void> {
      for (;;) {
        const i = sent
        if (i >= TOTAL) return
        if (i >= GATE_KILLED) await killed.promise
        if (i >= GATE_RESTARTED) await restarted.promise
        if (sent !== i) continue
        sent++
        if (sent === KILL_AT_SENT) reachedKill.resolve()
        const outcome = await one(i)
        if (outcomes[i] !== undefined) throw new Error(`request ${i} answered twice`)
        outcomes[i] = outcome
        done++
        if (done === RESTART_AT_DONE) reachedRestart.resolve()
      }
    }

    const upSeen: number[][] = []
    const atKill = { leases: 0, queued: 0 }
    async function outage(): Promise<void> {
      await reachedKill.promise
      atKill.leases = await inspect.zcard(mKeys.leases[0]!)
      atKill.queued = await inspect.zcard(mKeys.queue)
      await redis.stop()
      killed.resolve()
      for (const gw of replicas) await until(async () => (await scrapeMetricSum(gw.url, 'sluice_redis_up')) === 0, 'sluice_redis_up 0')
      upSeen.push(await Promise.all(replicas.map((gw) => scrapeMetricSum(gw.url, 'sluice_redis_up'))))
      await reachedRestart.promise
      await redis.start()
      for (const gw of replicas) await until(async () => (await scrapeMetricSum(gw.url, 'sluice_redis_up')) === 1, 'sluice_redis_up 1')
      upSeen.push(await Promise.all(replicas.map((gw) => scrapeMetricSum(gw.url, 'sluice_redis_up'))))
      restarted.resolve()
    }

    await Promise.all([outage(), ...Array.from({ length: WORKERS }, worker)])

    // Exactly one outcome per request, each an answer or the client's own abort.
    expect(outcomes.filter((o) => o === undefined)).toHaveLength(0)
    const all = outcomes as Outcome[]
    const bad = all.map((o, i) => ({ i, ...o })).filter((o) => o.result === 'hung' || o.result === 'broken')
    expect(bad, JSON.stringify(bad.slice(0, 5))).toEqual([])
    // Serving continues on local limits: no request was turned away for the outage.
    expect(all.filter((o) => typeof o.result === 'number' && o.result !== 200).map((o) => `${o.kind} ${o.result} ${o.detail}`)).toEqual([])
    expect(all.filter((o) => (o.result === 'aborted') !== o.kind.startsWith('aborted-'))).toEqual([])
    // Killed mid-load: requests running on Redis leases and others waiting in the Redis queue.
    expect(atKill.leases).toBeGreaterThan(0)
    expect(atKill.queued).toBeGreaterThan(0)
    expect(upSeen).toEqual([
      [0, 0],
      [1, 1],
    ])

    // The replicas counted what the clients saw, status by status (an abort is 499).
    const clientCounts: Record<string, number> = {}
    for (const o of all) {
      const status = o.result === 'aborted' ? '499' : String(o.result)
      clientCounts[status] = (clientCounts[status] ?? 0) + 1
    }
    const gatewayCounts = async () => {
      const counts: Record<string, number> = {}
      for (const gw of replicas) {
        for (const s of metricSamples(await scrape(gw.url), 'sluice_requests_total')) {
          if (s.labels.route === 'chat') counts[s.labels.status!] = (counts[s.labels.status!] ?? 0) + s.value
        }
      }
      return counts
    }
    await until(async () => Object.values(await gatewayCounts()).reduce((a, b) => a + b, 0) === TOTAL, `${TOTAL} requests counted`).catch(() => undefined)
    expect(await gatewayCounts()).toEqual(clientCounts)

    // Nothing left in flight or queued, in the replicas or in Redis.
    for (const gw of replicas) {
      await until(async () => (await scrapeMetricSum(gw.url, 'sluice_inflight_requests')) === 0, 'in flight 0')
      expect(await scrapeMetricSum(gw.url, 'sluice_queue_depth')).toBe(0)
    }
    const leftInRedis = async () =>
      [await inspect.zcard(mKeys.leases[0]!), await inspect.zcard(hKeys.leases[0]!), await inspect.zcard(mKeys.queue), await inspect.zcard(hKeys.queue), await inspect.zcard(keyKeys.active)]
    await until(async () => (await leftInRedis()).every((n) => n === 0), 'no lease, waiter or ticket left in Redis').catch(() => undefined)
    expect(await leftInRedis()).toEqual([0, 0, 0, 0, 0])

    // After Redis is back each replica admits through it again: a running request holds a lease there.
    for (const gw of replicas) {
      const held = once(holding.events, 'held')
      const answer = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'h', messages: [{ role: 'user', content: 'after' }] }),
        signal: AbortSignal.timeout(5000),
      })
      await held
      expect(await inspect.zcard(hKeys.leases[0]!)).toBe(1)
      expect(await inspect.zcard(keyKeys.active)).toBe(1)
      expect(holding.releaseHeld(1)).toBe(1)
      expect((await answer).status).toBe(200)
      await until(async () => (await inspect.zcard(hKeys.leases[0]!)) === 0, 'the lease released in Redis')
    }
  }, 30_000)
})
