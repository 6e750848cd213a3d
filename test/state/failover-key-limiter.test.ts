/**
 * What FailoverKeyLimiter carries into the shared store when Redis answers
 * again, without Redis: the shared limiter is a recording stand-in that can
 * be told to fail, and the link is an event emitter that says whether it is
 * up (the real ones are tested against redis-server in redis-store.test.ts).
 */
import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import type { KeyLimitSettings } from '../../src/config/schema.js'
import { FailoverKeyLimiter, type AdoptingKeyLimiter } from '../../src/state/failover-key-limiter.js'
import { MemoryKeyLimiter } from '../../src/state/memory-key-limiter.js'
import type { RedisLink } from '../../src/state/redis-link.js'
import { LateKeyAdmission, RedisUnavailable } from '../../src/state/redis-unavailable.js'
import type { KeyTicket, MinuteUse } from '../../src/state/store.js'
import { until } from '../support/metrics.js'

interface Debit {
  readonly keyId: string
  readonly requests: number
  readonly tokens: number
}

/** A shared limiter that is unreachable for admissions and counts the debits it is sent, each carry id once, as Redis does. */
class RecordingSharedLimiter implements AdoptingKeyLimiter {
  readonly debits: Debit[] = []
  readonly #carries = new Set<string>()
  failDebits = false
  /** Debits are counted but their answers lost (the link dropped between the two). */
  loseAnswers = false
  /** Admissions run over budget (with Redis up), and Redis's late answer counted the request, or not; null: Redis away. */
  lateCounted: boolean | null = null

  async admit(): Promise<KeyTicket> {
    if (this.lateCounted !== null) throw new LateKeyAdmission('stand-in: over budget', Promise.resolve(this.lateCounted))
    throw new RedisUnavailable('stand-in: Redis is away')
  }

  adopt(): () => void {
    return () => undefined
  }

  async debit(keyId: string, _limits: KeyLimitSettings, use: MinuteUse, carryId?: string): Promise<void> {
    if (this.failDebits) throw new RedisUnavailable('stand-in: Redis went away again')
    if (carryId !== undefined && this.#carries.has(carryId)) return
    if (carryId !== undefined) this.#carries.add(carryId)
    this.debits.push({ keyId, requests: use.requests, tokens: use.tokens })
    if (this.loseAnswers) throw new RedisUnavailable('stand-in: the answer was lost with the connection')
  }
}

function fakeLink(): RedisLink & EventEmitter {
  let up = false
  let serial = 0
  return Object.assign(new EventEmitter(), {
    up: () => up,
    newId: () => `replica/${++serial}`,
    comeBack(this: EventEmitter) {
      up = true
      this.emit('up')
    },
  }) as unknown as RedisLink & EventEmitter
}

const comeBack = (link: RedisLink) => (link as unknown as { comeBack(): void }).comeBack()

describe('FailoverKeyLimiter carrying local use into the shared store', () => {
  const limits = { requests_per_minute: 60, tokens_per_minute: 6000 }
  const clock = { now: () => 1_000_000 }
  const replica = (at: { now(): number } = clock) => {
    const shared = new RecordingSharedLimiter()
    const local = new MemoryKeyLimiter(at)
    const link = fakeLink()
    return { shared, local, link, keys: new FailoverKeyLimiter(shared, local, link, at) }
  }

  it('keeps what a failed carry did not hand over, and hands it over on the next return, once', async () => {
    const { shared, local, link, keys } = replica()
    const first = await keys.admit('k', limits)
    await first.chargeTokens(500)
    first.release()
    ;(await keys.admit('k', limits)).release()

    shared.failDebits = true
    comeBack(link)
    await keys.carried()
    expect(shared.debits).toEqual([])
    expect(local.usage()).toEqual([{ keyId: 'k', limits, requests: 2, tokens: 500 }])

    shared.failDebits = false
    link.emit('up')
    link.emit('up')
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 2, tokens: 500 }])
    expect(local.usage()).toEqual([])
  })

  // Regression (slow-link review, session 26): a carry Redis counted but whose answer the dropped link lost
  // was sent whole again at the next return: the outage's 100 tokens counted twice, the key refused early.
  it('counts a carry whose answer was lost once, however often it is sent again', async () => {
    const { shared, local, link, keys } = replica()
    const ticket = await keys.admit('k', limits)
    await ticket.chargeTokens(100)
    ticket.release()

    shared.loseAnswers = true
    comeBack(link)
    await keys.carried()
    expect(local.usage()).toEqual([{ keyId: 'k', limits, requests: 1, tokens: 100 }])
    link.emit('up')
    await keys.carried()
    shared.loseAnswers = false
    link.emit('up')
    await keys.carried()

    expect(shared.debits).toEqual([{ keyId: 'k', requests: 1, tokens: 100 }])
    expect(local.usage()).toEqual([])
  })

  it('sends again only what a minute has not refilled of a carry in doubt, then the newer use apart', async () => {
    let now = 1_000_000
    const { shared, local, link, keys } = replica({ now: () => now })
    for (let i = 0; i < 2; i++) (await keys.admit('k', limits)).release()
    const answer = await keys.admit('k', limits)
    await answer.chargeTokens(500)
    answer.release()
    shared.failDebits = true
    comeBack(link)
    await keys.carried()

    // Two seconds refill 2 requests and 200 tokens of the carry read then; one more request is newer.
    now += 2000
    ;(await keys.admit('k', limits)).release()
    shared.failDebits = false
    link.emit('up')
    await keys.carried()

    expect(shared.debits).toEqual([
      { keyId: 'k', requests: 1, tokens: 300 },
      { keyId: 'k', requests: 1, tokens: 0 },
    ])
    expect(local.usage()).toEqual([])
  })

  // Regression (diff review, session 27): the resend drained the outage requests before the part Redis had
  // counted, where the local limiter drains that part first; the 5 requests were given back uncounted.
  it('sends again, of a carry in doubt, every request the local limiter still counts apart from Redis', async () => {
    let now = 1_000_000
    const { shared, local, link, keys } = replica({ now: () => now })
    const tight = { requests_per_minute: 10 }
    comeBack(link)
    await keys.carried()
    shared.lateCounted = true
    for (let i = 0; i < 5; i++) (await keys.admit('k', tight)).release()
    // Counted in Redis, so nothing to carry.
    await until(() => local.usage().length === 0, 'five counted in Redis')
    shared.lateCounted = null
    for (let i = 0; i < 5; i++) (await keys.admit('k', tight)).release()
    shared.failDebits = true
    link.emit('up')
    await keys.carried()

    now += 30_000
    expect(local.usage()).toEqual([{ keyId: 'k', limits: tight, requests: 5, tokens: 0 }])
    shared.failDebits = false
    link.emit('up')
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 5, tokens: 0 }])
    expect(local.usage()).toEqual([])
  })

  // Regression (carry review, session 27): a carry took the carried use out of the local buckets, so each outage
  // of a flapping Redis gave every replica a new local minute: 1,182 requests in a minute on a key of 60.
  it('keeps the carried use in the local buckets, enforced at the next outage and never carried again', async () => {
    let now = 1_000_000
    const { shared, local, link, keys } = replica({ now: () => now })
    const tight = { requests_per_minute: 10, tokens_per_minute: 100 }
    for (let i = 0; i < 10; i++) {
      const ticket = await keys.admit('k', tight)
      await ticket.chargeTokens(10)
      ticket.release()
    }
    await expect(keys.admit('k', tight)).rejects.toMatchObject({ reason: 'rate_limit_tokens' })
    comeBack(link)
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 10, tokens: 100 }])
    expect(local.usage()).toEqual([])

    // Away again a second later: the minute is still used here; 30 s on, what it has refilled since.
    now += 1000
    await expect(keys.admit('k', tight)).rejects.toMatchObject({ reason: 'rate_limit_requests' })
    now += 30_000
    const ticket = await keys.admit('k', tight)
    await ticket.chargeTokens(5)
    ticket.release()
    link.emit('up')
    await keys.carried()
    expect(shared.debits).toHaveLength(2)
    expect(shared.debits[1]!.requests).toBeCloseTo(1, 9)
    expect(shared.debits[1]!.tokens).toBeCloseTo(5, 9)
  })

  it('sends the tokens of a locally admitted answer that ends after the return to the shared store', async () => {
    const { shared, local, link, keys } = replica()
    const ticket = await keys.admit('k', limits)

    comeBack(link)
    await keys.carried()
    await ticket.chargeTokens(700)
    ticket.release()

    expect(shared.debits).toEqual([
      { keyId: 'k', requests: 1, tokens: 0 },
      { keyId: 'k', requests: 0, tokens: 700 },
    ])
    expect(local.usage()).toEqual([])
  })

  // Regression (limits review, session 26): with Redis up but its admission calls over budget (a slow Redis),
  // each admission went local, its tokens went to Redis, and the local bucket, never charged, admitted every
  // request: 2,094 tokens used against tokens_per_minute 100.
  it('charges locally the tokens of an admission that went local while Redis was up (its call late), as its request', async () => {
    const { shared, local, link, keys } = replica()
    comeBack(link)
    await keys.carried()
    const tight = { tokens_per_minute: 100 }

    const ticket = await keys.admit('k', tight)
    await ticket.chargeTokens(100)
    ticket.release()

    expect(shared.debits).toEqual([])
    expect(local.usage()).toEqual([{ keyId: 'k', limits: tight, requests: 0, tokens: 100 }])
    await expect(keys.admit('k', tight)).rejects.toMatchObject({ reason: 'rate_limit_tokens' })
    // Carried at the next return, with the requests counted alongside.
    link.emit('up')
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 0, tokens: 100 }])
  })

  // Regression (diff review, session 26): such a request was carried too, though the late call that sent it
  // local had counted it in Redis already: twice in Redis's minute.
  it('does not carry the request of an admission that went local while Redis was up, but carries its tokens', async () => {
    const { shared, local, link, keys } = replica()
    comeBack(link)
    await keys.carried()
    shared.lateCounted = true

    const ticket = await keys.admit('k', limits)
    await ticket.chargeTokens(50)
    ticket.release()
    // Counted here meanwhile: the local minute is enforced on it.
    await until(() => local.usage()[0]?.alreadyShared === 1, 'the late answer counted')
    expect(local.usage()).toEqual([{ keyId: 'k', limits, requests: 0, tokens: 50, alreadyShared: 1 }])

    link.emit('up')
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 0, tokens: 50 }])
    expect(local.usage()).toEqual([])
  })

  // Regression (diff review, session 26): every late admission was taken as counted in Redis, though a late
  // call that failed (BUSY, a dropped connection) or was refused there had counted nothing: lost from Redis's minute.
  it('carries the request of a late admission Redis did not count', async () => {
    const { shared, local, link, keys } = replica()
    comeBack(link)
    await keys.carried()
    shared.lateCounted = false

    ;(await keys.admit('k', limits)).release()
    await Promise.resolve()
    expect(local.usage()).toEqual([{ keyId: 'k', limits, requests: 1, tokens: 0 }])

    link.emit('up')
    await keys.carried()
    expect(shared.debits).toEqual([{ keyId: 'k', requests: 1, tokens: 0 }])
  })

  // Regression (diff review, session 26): the part counted in Redis kept its use when a lowered limit capped
  // the request bucket, and hid later outage requests from the carry.
  it('never lets the part counted in Redis exceed what the request bucket holds (a reload lowered the limit)', async () => {
    let now = 1_000_000
    const { shared, local, link, keys } = replica({ now: () => now })
    comeBack(link)
    await keys.carried()
    shared.lateCounted = true
    const before = { requests_per_minute: 60 }
    for (let i = 0; i < 30; i++) (await keys.admit('k', before)).release()
    await until(() => local.usage().length === 0, 'thirty counted in Redis')

    const lowered = { requests_per_minute: 6 }
    await expect(keys.admit('k', lowered)).rejects.toMatchObject({ reason: 'rate_limit_requests' })
    now += 70_000
    // Redis away: these count nowhere else.
    shared.lateCounted = null
    for (let i = 0; i < 5; i++) (await keys.admit('k', lowered)).release()
    expect(local.usage()).toEqual([{ keyId: 'k', limits: lowered, requests: 5, tokens: 0 }])
  })
})

describe('FailoverKeyLimiter when Redis goes away with tickets running', () => {
  // Regression: local admissions counted only local tickets, so with one
  // request admitted through Redis still running, an outage admitted a second
  // one for a key with max_concurrency 1 on the same replica.
  it('counts the tickets Redis admitted that still run here against the key\'s concurrency', async () => {
    let up = true
    const link = Object.assign(new EventEmitter(), { up: () => up }) as unknown as RedisLink & EventEmitter
    const released: string[] = []
    const shared: AdoptingKeyLimiter = {
      admit: async () => {
        if (!up) throw new RedisUnavailable('stand-in: Redis is away')
        return { chargeTokens: async () => undefined, release: () => void released.push('shared') }
      },
      adopt: () => () => undefined,
      debit: async () => undefined,
    }
    const clock = { now: () => 1_000_000 }
    const keys = new FailoverKeyLimiter(shared, new MemoryKeyLimiter(clock), link, clock)
    const limits = { max_concurrency: 1 }

    const throughRedis = await keys.admit('k', limits)
    up = false
    await expect(keys.admit('k', limits)).rejects.toMatchObject({ reason: 'concurrency' })
    await expect(keys.admit('other', limits)).resolves.toBeDefined()

    throughRedis.release()
    throughRedis.release()
    expect(released).toEqual(['shared'])
    const local = await keys.admit('k', limits)
    await expect(keys.admit('k', limits)).rejects.toMatchObject({ reason: 'concurrency' })
    local.release()
  })
})

// Regression (code review, session 24): a refused request bucket was stored capped, but under the limits of
// the last admission, so `usage` drained it at the old rate and the carry into Redis handed over nothing.
describe('MemoryKeyLimiter.usage after a lowered limit refused a key', () => {
  it('reads the capped use at the new limit', async () => {
    let now = 1_000_000
    const local = new MemoryKeyLimiter({ now: () => now })
    for (let i = 0; i < 10; i++) (await local.admit('k', { requests_per_minute: 10 })).release()
    now += 1000
    const lowered = { requests_per_minute: 1 }
    await expect(local.admit('k', lowered)).rejects.toMatchObject({ reason: 'rate_limit_requests' })
    now += 6500
    await expect(local.admit('k', lowered)).rejects.toMatchObject({ reason: 'rate_limit_requests' })
    const [use] = local.usage()
    expect(use).toMatchObject({ keyId: 'k', limits: lowered })
    // Capped at 1 a minute's use 7.5 s ago, drained at 1 a minute since.
    expect(use!.requests).toBeCloseTo(1 - 6.5 / 60, 6)
  })
})
