/**
 * Issue 9, a replica killed under load: two replicas share this file's own
 * redis-server in front of one paced vLLM stand-in with 4 slots. Replica A
 * runs in its own process; 20 workers send plain and streamed requests to
 * both, and once KILL_AT_SENT were sent A is killed with SIGKILL while it
 * holds leases and has waiters queued in Redis. The workers then send to B
 * only, until every entry of A has left Redis, and TAIL more.
 *
 * Full accounting: each of B's requests is a whole 200 within its deadline;
 * each of A's is a whole 200 or a connection error that came with the kill;
 * the backend never runs more than its slots, and only A's requests were cut
 * there; everything of A in Redis (its leases, the slots handed to its dead
 * waiters, its queue entries, key tickets) goes within a lease TTL
 * (+ backstop) while B's waiters are served; B counted exactly what its
 * clients saw, and nothing stays in flight or queued (B's gauges, Redis).
 *
 * The second case pins what the first relies on: a slot freed late in the
 * TTL and handed to a dead replica's waiter comes back with that replica's
 * heartbeat, not a whole TTL after the hand-off (lua/slot-prelude.ts).
 */
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { expect, it } from 'vitest'
import type { ReceivedRequest, VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { keyLimitKeys, modelKeys } from '../../src/state/redis-keys.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { startChildGateway, type ChildGateway } from '../support/redis-gateway.js'
import { describeWithRedis, expiriesIn, useInspectedRedis, uniquePrefix, type Expiries, type TestRedis } from '../support/redis-server.js'
import { metricSamples, scrape, scrapeMetricSum, until } from '../support/metrics.js'
import { answerIsWhole } from '../support/chat-answers.js'
import { trackedAfterEach } from '../support/tracked.js'
import { deferred } from '../support/deferred.js'

const key = makeKey('team-kill', ['chat'], { limits: { max_concurrency: 1000 } })
const cleanups = trackedAfterEach()
let redis: TestRedis
let inspect: Redis

const SLOTS = 4
const WORKERS = 20
/** A is killed once this many requests were sent; B gets TAIL more after A's entries left Redis (at most MAX_TOTAL in all). */
const KILL_AT_SENT = 150
const TAIL = 150
const MAX_TOTAL = 1500
const REQUEST_DEADLINE_MS = 8000
/** Short lease TTL and backstop, as in the SIGKILL case of shared-state-http.test.ts; a generous admission budget for a loaded loop. */
const TIMINGS = { callBudgetMs: 1000, leaseTtlMs: 1500, backstopMs: 200 }
const EXPECTED_CONTENT = 'tok0 tok1 tok2 '

type Replica = 'A' | 'B'
type Kind = 'plain' | 'stream'
interface Outcome {
  readonly replica: Replica
  readonly kind: Kind
  readonly endedAt: number
  readonly result: 200 | 'connection-error' | 'hung' | 'broken'
  readonly detail?: string
}

/** Everything of model "m" and of the key in Redis, read in one MULTI; ids are `<replica id>/<n>`, owners bare replica ids. */
interface RedisView {
  readonly leases: string[]
  readonly queued: string[]
  readonly waiters: string[]
  readonly grants: string[]
  readonly owners: string[]
  readonly tickets: string[]
}

/** Replica A in its own process (so it can be killed), replica B in this one, on one state under a fresh prefix; model "m" on `backend`. */
async function replicas(backend: VllmStandIn, slots: number): Promise<{ a: ChildGateway; b: TestGateway; prefix: string }> {
  const prefix = uniquePrefix('replica-kill')
  const config = {
    server: { shutdown_grace_ms: 1000 },
    state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
    auth: { keys: [key.entry] },
    models: [
      { name: 'm', served_name: 'stand-in-model', max_concurrency_per_backend: slots, queue: { max_size: 1000, max_wait_ms: 10_000 }, backends: [{ url: backend.url, name: 'b1' }] },
    ],
  }
  const a = await startChildGateway(config, TIMINGS)
  cleanups.push(() => a.kill())
  const b = await cleanups.redisGateway(config, TIMINGS)
  await until(async () => (await fetch(`${a.url}/readyz`)).status === 200 && (await fetch(`${b.url}/readyz`)).status === 200, 'both ready')
  return { a, b, prefix }
}

/** Expiries of model "m"'s leases, the replicas' heartbeats and the key's tickets, in that order. */
function expiriesOf(prefix: string): Promise<Expiries> {
  const mKeys = modelKeys(prefix, 'm', ['b1'])
  return expiriesIn(inspect, [mKeys.leases[0]!, mKeys.owners, keyLimitKeys(prefix, key.id).active])
}

async function redisView(prefix: string): Promise<RedisView> {
  const mKeys = modelKeys(prefix, 'm', ['b1'])
  const replies = await inspect
    .multi()
    .zrange(mKeys.leases[0]!, '0', '-1')
    .zrange(mKeys.queue, '0', '-1')
    .hkeys(mKeys.waiters)
    .hkeys(mKeys.grants)
    .zrange(mKeys.owners, '0', '-1')
    .zrange(keyLimitKeys(prefix, key.id).active, '0', '-1')
    .exec()
  const [leases, queue, waiters, grants, owners, tickets] = replies!.map(([error, value]) => {
    if (error !== null) throw error
    return value as string[]
  })
  // A queue member is `<14 hex priority>:<16 hex seq>:<waiter id>`.
  return { leases: leases!, queued: queue!.map((m) => m.slice(32)), waiters: waiters!, grants: grants!, owners: owners!, tickets: tickets! }
}

/** What must not outlive the requests: everything but the replicas' heartbeats. */
function entriesLeft({ leases, queued, waiters, grants, tickets }: RedisView): Omit<RedisView, 'owners'> {
  return { leases, queued, waiters, grants, tickets }
}

const ownedBy = (replica: string, ids: readonly string[]) => ids.filter((id) => id === replica || id.startsWith(`${replica}/`))
const entriesOf = (replica: string, view: RedisView) => Object.values(view).flatMap((ids: string[]) => ownedBy(replica, ids))

describeWithRedis('a replica killed under load', () => {
  useInspectedRedis((started) => ({ redis, inspect } = started))

  it("cuts only A's clients, frees A's slots and queue entries within a lease TTL, and serves and counts all of B's", async (context) => {
    const backend = await cleanups.standIn({ tokens: 3, interTokenDelayMs: 10 })
    const { a, b, prefix } = await replicas(backend, SLOTS)
    const urls: Record<Replica, string> = { A: a.url, B: b.url }
    const view = () => redisView(prefix)
    // Each replica's id, from the lease of a request held at the backend while it is the only one.
    async function replicaId(url: string): Promise<string> {
      backend.options.hold = true
      const held = once(backend.events, 'held')
      const answer = send(url, 'probe', 'plain')
      await held
      const leases = (await view()).leases
      backend.options.hold = false
      expect(backend.releaseHeld(1)).toBe(1)
      expect((await answer).status).toBe(200)
      await until(async () => (await view()).leases.length === 0, 'the probe lease released')
      expect(leases).toHaveLength(1)
      return leases[0]!.split('/')[0]!
    }
    const idA = await replicaId(a.url)
    const idB = await replicaId(b.url)
    expect(idA).not.toBe(idB)
    const chatCounts = async () => {
      const counts: Record<string, number> = {}
      for (const s of metricSamples(await scrape(b.url), 'sluice_requests_total')) {
        if (s.labels.route === 'chat') counts[s.labels.status!] = (counts[s.labels.status!] ?? 0) + s.value
      }
      return counts
    }
    const countedBefore = await chatCounts()

    let maxInFlight = 0
    backend.events.on('request', () => (maxInFlight = Math.max(maxInFlight, backend.inFlight())))
    const cutAtBackend: string[] = []
    backend.events.on('client-closed', (received: ReceivedRequest) => cutAtBackend.push((received.body as { messages: { content: string }[] }).messages[0]!.content))

    const replicaOf: Replica[] = []
    const outcomes: (Outcome | undefined)[] = []
    let sent = 0
    let limit = MAX_TOTAL
    let aServing = true
    const reachedKill = deferred()

    async function one(i: number, replica: Replica): Promise<Outcome> {
      const kind: Kind = i % 3 === 0 ? 'stream' : 'plain'
      const deadline = AbortSignal.timeout(REQUEST_DEADLINE_MS)
      let stage = 'headers'
      const ended = (result: Outcome['result'], detail?: string): Outcome => ({ replica, kind, endedAt: Date.now(), result, detail })
      try {
        const response = await send(urls[replica], `r${i}`, kind, deadline)
        stage = 'body'
        const text = await response.text()
        if (response.status !== 200) return ended('broken', `${response.status} ${text}`)
        return ended(answerIsWhole(kind, text, EXPECTED_CONTENT) ? 200 : 'broken', text)
      } catch (error) {
        if (deadline.aborted) return ended('hung')
        // fetch's network errors: 'fetch failed' before the response, 'terminated' in its body.
        if (error instanceof TypeError && (error.message === 'fetch failed' || error.message === 'terminated')) {
          return ended('connection-error', `${stage}: ${causeOf(error)}`)
        }
        return ended('broken', String(error))
      }
    }

    async function worker(): Promise<void> {
      while (sent < limit) {
        const i = sent++
        const replica: Replica = aServing && i % 2 === 0 ? 'A' : 'B'
        replicaOf[i] = replica
        if (sent === KILL_AT_SENT) reachedKill.resolve()
        const outcome = await one(i, replica)
        if (outcomes[i] !== undefined) throw new Error(`request ${i} answered twice`)
        outcomes[i] = outcome
      }
    }

    let atKill: RedisView | undefined
    let expiriesAtKill: Expiries | undefined
    let crashStartedAt = 0
    let killedAt = 0
    let pendingBAtKill: number[] = []
    const goneAfter = { heldAtKill: -1, all: -1 }
    const handedToDead = new Set<string>()
    async function crash(): Promise<void> {
      await reachedKill.promise
      crashStartedAt = Date.now()
      // A is frozen (SIGSTOP) while Redis is read, so what is read is what it holds when it dies;
      // it resumes and is read again until it holds a lease and has a waiter queued, and B a waiter too.
      await until(
        async () => {
          process.kill(a.pid, 'SIGSTOP')
          const seen = await view()
          if (ownedBy(idA, seen.leases).length > 0 && ownedBy(idA, seen.queued).length > 0 && ownedBy(idB, seen.queued).length > 0) {
            atKill = seen
            expiriesAtKill = await expiriesOf(prefix)
            return true
          }
          process.kill(a.pid, 'SIGCONT')
          return false
        },
        'A holding a lease with a waiter queued, and B a waiter queued',
        5000,
        1,
      )
      aServing = false
      pendingBAtKill = replicaOf.flatMap((r, i) => (r === 'B' && outcomes[i] === undefined ? [i] : []))
      await a.kill()
      killedAt = Date.now()
      const leasedAtKill = new Set(ownedBy(idA, atKill!.leases))
      await until(
        async () => {
          const seen = await view()
          const since = Date.now() - killedAt
          for (const id of ownedBy(idA, seen.leases)) if (!leasedAtKill.has(id)) handedToDead.add(id)
          if (goneAfter.heldAtKill < 0 && !seen.leases.some((id) => leasedAtKill.has(id))) goneAfter.heldAtKill = since
          if (entriesOf(idA, seen).length === 0) goneAfter.all = since
          return goneAfter.all >= 0
        },
        "A's entries gone from Redis",
        3 * TIMINGS.leaseTtlMs + 2000,
      )
      limit = Math.min(MAX_TOTAL, sent + TAIL)
    }

    const startedAt = Date.now()
    // A failed crash() stops the workers too, so the test ends with its error.
    const crashed = crash().catch((error: unknown) => {
      limit = 0
      throw error
    })
    await Promise.all([crashed, ...Array.from({ length: WORKERS }, worker)])
    const trafficMs = Date.now() - startedAt

    // Exactly one outcome per request sent.
    expect(outcomes).toHaveLength(sent)
    expect(outcomes.filter((o) => o === undefined)).toHaveLength(0)
    const all = (outcomes as Outcome[]).map((o, i) => ({ i, ...o }))
    const toA = all.filter((o) => o.replica === 'A')
    const toB = all.filter((o) => o.replica === 'B')

    // Killed mid-load: A held leases and had waiters in Redis, and so did B's queue.
    const heldByA = ownedBy(idA, atKill!.leases).length
    const queuedOfA = ownedBy(idA, atKill!.queued).length
    const queuedOfB = ownedBy(idB, atKill!.queued).length
    expect(heldByA).toBeGreaterThan(0)
    expect(queuedOfA).toBeGreaterThan(0)
    expect(queuedOfB).toBeGreaterThan(0)

    // B: every request a whole 200 within its deadline, those waiting at the kill included.
    expect(toB.filter((o) => o.result !== 200).slice(0, 5)).toEqual([])
    expect(pendingBAtKill.length).toBeGreaterThan(0)
    const lastPendingB = Math.max(...pendingBAtKill.map((i) => outcomes[i]!.endedAt)) - killedAt

    // A: a whole 200, or a connection error that came with the kill; none hung.
    const cut = toA.filter((o) => o.result === 'connection-error')
    expect(toA.filter((o) => o.result !== 200 && o.result !== 'connection-error').slice(0, 5)).toEqual([])
    expect(cut.filter((o) => o.endedAt < crashStartedAt)).toEqual([])
    expect(cut.length).toBeGreaterThan(0)
    // At the backend: never more than its slots, and only A's requests were cut there.
    expect(maxInFlight).toBe(SLOTS)
    expect(cutAtBackend.filter((marker) => replicaOf[Number(marker.slice(1))] !== 'A')).toEqual([])

    // What A held at the kill (its leases, key tickets, and the heartbeat that keeps its waiters and their
    // grants) was to expire within one TTL, by Redis's clock; then all of it went (crash() waited for that).
    // A slot handed to one of its dead waiters after the kill lasts no longer than that heartbeat: the second case.
    const { now, sets } = expiriesAtKill!
    const [leasesOfA, heartbeatOfA, ticketsOfA] = sets.map((set) => set.filter(([member]) => ownedBy(idA, [member]).length > 0))
    expect(heartbeatOfA).toHaveLength(1)
    expect(leasesOfA!.length).toBeGreaterThan(0)
    expect(ticketsOfA!.length).toBeGreaterThan(0)
    expect([...leasesOfA!, ...heartbeatOfA!, ...ticketsOfA!].filter(([, expiresAt]) => expiresAt - now > TIMINGS.leaseTtlMs)).toEqual([])

    // B counted what its clients saw: all 200.
    await until(async () => (await chatCounts())['200'] === (countedBefore['200'] ?? 0) + toB.length, `${toB.length} more 200s counted`).catch(() => undefined)
    expect(await chatCounts()).toEqual({ '200': (countedBefore['200'] ?? 0) + toB.length })

    // Nothing left in flight or queued, on B or in Redis.
    await until(async () => (await scrapeMetricSum(b.url, 'sluice_inflight_requests')) === 0, 'in flight 0')
    expect(await scrapeMetricSum(b.url, 'sluice_queue_depth')).toBe(0)
    const left = async () => entriesLeft(await view())
    await until(async () => Object.values(await left()).every((ids) => ids.length === 0), 'no lease, waiter or ticket left in Redis').catch(() => undefined)
    expect(await left()).toEqual({ leases: [], queued: [], waiters: [], grants: [], tickets: [] })

    const causes = [...new Set(cut.map((o) => o.detail))].join(', ')
    await context.annotate(
      `${sent} requests (${toA.length} to A, ${toB.length} to B) in ${trafficMs} ms; at the kill A held ${heldByA} leases with ${queuedOfA} queued, B ${queuedOfB} queued; ` +
        `A's clients: ${toA.length - cut.length} 200s, ${cut.length} connection errors (${causes}); ${cutAtBackend.length} cut at the backend; ` +
        `A's leases gone after ${goneAfter.heldAtKill} ms, all of A's entries after ${goneAfter.all} ms (${handedToDead.size} slots handed to its dead waiters); ` +
        `B's ${pendingBAtKill.length} requests pending at the kill done after ${lastPendingB} ms`,
      'measured',
    )
  }, 30_000)

  it("a slot freed late for a waiter of the killed replica is back within one lease TTL of the kill, not one TTL after it was handed over", async (context) => {
    const backend = await cleanups.standIn({ hold: true, tokens: 2 })
    const { a, b, prefix } = await replicas(backend, 1)
    const view = () => redisView(prefix)
    const runningHeld = once(backend.events, 'held')
    const running = send(b.url, 'b-running', 'plain')
    await runningHeld
    const lost = send(a.url, 'a-queued', 'plain').catch(() => null)
    await until(async () => (await view()).queued.length === 1, "A's waiter queued")
    const waitingHeld = once(backend.events, 'held')
    const waiting = send(b.url, 'b-waiting', 'plain')
    waiting.catch(() => undefined)
    await until(async () => (await view()).queued.length === 2, "B's waiter queued behind it")
    const deadWaiter = (await view()).queued[0]!

    await a.kill()
    const killedAt = Date.now()
    // A's last heartbeat: at most one TTL ahead, by Redis's clock.
    const idA = deadWaiter.split('/')[0]!
    const { now, sets } = await expiriesOf(prefix)
    const heartbeatOfA = sets[1]!.find(([member]) => member === idA)?.[1]
    expect(heartbeatOfA).toBeDefined()
    expect(heartbeatOfA! - now).toBeLessThanOrEqual(TIMINGS.leaseTtlMs)
    // Freed late in the TTL, while A's heartbeat (renewed every backstop until the kill) still
    // stands: the slot is handed to A's dead waiter, the global head. The delay is the scenario.
    await new Promise((resolve) => setTimeout(resolve, TIMINGS.leaseTtlMs - 400))
    expect(backend.releaseHeld(1)).toBe(1)
    expect((await running).status).toBe(200)
    const leaseKey = modelKeys(prefix, 'm', ['b1']).leases[0]!
    let handedUntil: string | null = null
    await until(async () => (handedUntil = await inspect.zscore(leaseKey, deadWaiter)) !== null, "the slot handed to A's dead waiter")
    // That lease ends with A's heartbeat, not one TTL after the hand-off (which was late in A's last TTL).
    expect(Number(handedUntil)).toBeLessThanOrEqual(heartbeatOfA!)

    await waitingHeld
    const servedAfter = Date.now() - killedAt
    await context.annotate(`B's waiter served ${servedAfter} ms after the kill`, 'measured')
    expect(backend.releaseHeld(1)).toBe(1)
    expect((await waiting).status).toBe(200)
    expect(await lost).toBeNull()
    await until(async () => Object.values(entriesLeft(await view())).every((ids) => ids.length === 0), 'no lease, waiter or ticket left in Redis')
  })
})

function send(url: string, marker: string, kind: Kind, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: marker }], stream: kind === 'stream' }),
    signal,
  })
}

function causeOf(error: TypeError): string {
  const cause = error.cause as { code?: string; message?: string } | undefined
  return cause?.code ?? cause?.message ?? error.message
}
