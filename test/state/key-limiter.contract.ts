/**
 * The contract every KeyLimiter implementation passes (STYLE.md habit 3):
 * written against the interface only, with a hand-moved clock handed in, so
 * the memory store and a Redis store run the very same cases.
 */
import { beforeEach, describe, expect, it } from 'vitest'
import type { KeyLimitSettings } from '../../src/config/schema.js'
import { AdmissionRefused, type KeyLimiter, type KeyRejection, type KeyTicket } from '../../src/state/store.js'

export interface ContractClock {
  now(): number
}

export type CreateKeyLimiter = (clock: ContractClock) => KeyLimiter | Promise<KeyLimiter>

const T0 = 1_700_000_000_000

class ManualClock implements ContractClock {
  #now = T0
  now(): number {
    return this.#now
  }
  advance(ms: number): void {
    this.#now += ms
  }
}

/** Counts distinct key ids across runs, so a store shared between cases (Redis) never sees a key twice. */
let keySerial = 0

export function describeKeyLimiterContract(name: string, create: CreateKeyLimiter): void {
  describe(`KeyLimiter contract: ${name}`, () => {
    let clock: ManualClock
    let limiter: KeyLimiter
    let key: (label: string) => string

    beforeEach(async () => {
      clock = new ManualClock()
      limiter = await create(clock)
      const run = ++keySerial
      key = (label) => `contract-${run}-${label}`
    })

    /** The refusal an admit ends in; fails the test when it is admitted. */
    async function refused(keyId: string, limits: KeyLimitSettings, reason: KeyRejection): Promise<AdmissionRefused> {
      let ticket: KeyTicket | undefined
      let error: unknown
      try {
        ticket = await limiter.admit(keyId, limits)
      } catch (e) {
        error = e
      }
      ticket?.release()
      expect(ticket, `expected ${keyId} to be refused with ${reason}`).toBeUndefined()
      expect(error).toBeInstanceOf(AdmissionRefused)
      const refusal = error as AdmissionRefused
      expect(refusal.reason).toBe(reason)
      expect(refusal.retryAfterMs).toBeGreaterThan(0)
      return refusal
    }

    /** Admits and releases at once: one request of the key, start to end. */
    async function oneRequest(keyId: string, limits: KeyLimitSettings, tokens = 0): Promise<void> {
      const ticket = await limiter.admit(keyId, limits)
      if (tokens > 0) await ticket.chargeTokens(tokens)
      ticket.release()
    }

    it('refuses beyond max_concurrency with code concurrency; a release makes room', async () => {
      const limits = { max_concurrency: 2 }
      const k = key('conc')
      const first = await limiter.admit(k, limits)
      const second = await limiter.admit(k, limits)
      await refused(k, limits, 'concurrency')
      first.release()
      const third = await limiter.admit(k, limits)
      await refused(k, limits, 'concurrency')
      second.release()
      third.release()
      // Back to zero: two at once again.
      const again = [await limiter.admit(k, limits), await limiter.admit(k, limits)]
      await refused(k, limits, 'concurrency')
      for (const t of again) t.release()
    })

    it('a ticket released twice frees one place only', async () => {
      const limits = { max_concurrency: 2 }
      const k = key('twice')
      const first = await limiter.admit(k, limits)
      await limiter.admit(k, limits)
      first.release()
      first.release()
      await limiter.admit(k, limits)
      await refused(k, limits, 'concurrency')
    })

    it('refuses beyond requests_per_minute with rate_limit_requests and the bucket’s retry-after', async () => {
      const limits = { requests_per_minute: 3 }
      const k = key('rpm')
      for (let i = 0; i < 3; i++) await oneRequest(k, limits)
      expect((await refused(k, limits, 'rate_limit_requests')).retryAfterMs).toBe(20_000)
      clock.advance(5000)
      expect((await refused(k, limits, 'rate_limit_requests')).retryAfterMs).toBe(15_000)
      clock.advance(15_000)
      await oneRequest(k, limits)
      expect((await refused(k, limits, 'rate_limit_requests')).retryAfterMs).toBe(20_000)
    })

    it('a refused request takes nothing from the request budget', async () => {
      const limits = { requests_per_minute: 1 }
      const k = key('rpm-refusals')
      await oneRequest(k, limits)
      for (let i = 0; i < 5; i++) await refused(k, limits, 'rate_limit_requests')
      clock.advance(60_000)
      await oneRequest(k, limits)
      await refused(k, limits, 'rate_limit_requests')
    })

    it('a concurrency refusal takes nothing from the request budget', async () => {
      const limits = { max_concurrency: 1, requests_per_minute: 2 }
      const k = key('conc-rpm')
      const running = await limiter.admit(k, limits)
      for (let i = 0; i < 3; i++) await refused(k, limits, 'concurrency')
      running.release()
      await oneRequest(k, limits)
      await refused(k, limits, 'rate_limit_requests')
    })

    it('a request-rate refusal holds no concurrency place', async () => {
      const limits = { max_concurrency: 1, requests_per_minute: 1 }
      const k = key('rpm-conc')
      await oneRequest(k, limits)
      await refused(k, limits, 'rate_limit_requests')
      clock.advance(60_000)
      const ticket = await limiter.admit(k, limits)
      ticket.release()
    })

    it('refuses with rate_limit_tokens once charged answers use up tokens_per_minute, until the bucket refills', async () => {
      // 600 per minute = one token per 100 ms.
      const limits = { tokens_per_minute: 600 }
      const k = key('tpm')
      await oneRequest(k, limits, 1200)
      const refusal = await refused(k, limits, 'rate_limit_tokens')
      // -600 is back above zero after a minute; the bucket may ask for at most one token more.
      expect(refusal.retryAfterMs).toBeGreaterThan(60_000)
      expect(refusal.retryAfterMs).toBeLessThanOrEqual(60_100)
      clock.advance(30_000)
      const later = await refused(k, limits, 'rate_limit_tokens')
      expect(later.retryAfterMs).toBe(refusal.retryAfterMs - 30_000)
      clock.advance(29_999)
      await refused(k, limits, 'rate_limit_tokens')
      clock.advance(refusal.retryAfterMs - 59_999)
      await oneRequest(k, limits)
    })

    it('admits while the token budget is above zero, refuses at zero', async () => {
      const limits = { tokens_per_minute: 600 }
      const k = key('tpm-edge')
      await oneRequest(k, limits, 599)
      await oneRequest(k, limits, 1)
      await refused(k, limits, 'rate_limit_tokens')
    })

    it('tokens charged after the ticket was released still count', async () => {
      const limits = { tokens_per_minute: 100, max_concurrency: 1 }
      const k = key('late-charge')
      const ticket = await limiter.admit(k, limits)
      ticket.release()
      await ticket.chargeTokens(500)
      await refused(k, limits, 'rate_limit_tokens')
    })

    it('keeps keys independent', async () => {
      const limits = { max_concurrency: 1, requests_per_minute: 1, tokens_per_minute: 10 }
      const [a, b, c] = [key('a'), key('b'), key('c')]
      const holdA = await limiter.admit(a, limits)
      await refused(a, limits, 'concurrency')
      const holdB = await limiter.admit(b, limits)
      await holdB.chargeTokens(1000)
      holdB.release()
      holdA.release()
      await refused(a, limits, 'rate_limit_requests')
      await refused(b, limits, 'rate_limit_tokens')
      // c saw none of it.
      await oneRequest(c, limits, 5)
    })

    // Regression (limits review, session 24): the first limit's wait alone was refused again by the next.
    it('a tokens refusal waits for the request budget too, when that is the later', async () => {
      // 600 tokens per minute, 610 used: 11 back take 1.1 s; 1 request per minute, used: 60 s.
      const limits = { requests_per_minute: 1, tokens_per_minute: 600 }
      const k = key('both-limits')
      await oneRequest(k, limits, 610)
      expect((await refused(k, limits, 'rate_limit_tokens')).retryAfterMs).toBe(60_000)
      clock.advance(59_999)
      await refused(k, limits, 'rate_limit_requests')
      clock.advance(1)
      await oneRequest(k, limits)
    })

    it('a concurrency refusal waits for the rate limits too; alone, it says a second', async () => {
      const k = key('conc-and-rate')
      const limits = { max_concurrency: 1, requests_per_minute: 1 }
      const running = await limiter.admit(k, limits)
      expect((await refused(k, limits, 'concurrency')).retryAfterMs).toBe(60_000)
      running.release()
      const alone = key('conc-alone')
      const held = await limiter.admit(alone, { max_concurrency: 1 })
      expect((await refused(alone, { max_concurrency: 1 }, 'concurrency')).retryAfterMs).toBe(1000)
      held.release()
    })

    // Regression (limits review, session 24): a reload's new limits applied to what was left, not what was used.
    it('a changed limit applies to what the key used under the old one', async () => {
      const k = key('reloaded')
      for (let i = 0; i < 2; i++) await oneRequest(k, { requests_per_minute: 10 })
      await oneRequest(k, { requests_per_minute: 3 })
      await refused(k, { requests_per_minute: 3 }, 'rate_limit_requests')
      // Raised to 10 with 3 used: 7 more.
      for (let i = 0; i < 7; i++) await oneRequest(k, { requests_per_minute: 10 })
      await refused(k, { requests_per_minute: 10 }, 'rate_limit_requests')

      // Lowered below what was used: refused for a minute at most, not for the old use at the new rate.
      const all = key('reloaded-all')
      for (let i = 0; i < 10; i++) await oneRequest(all, { requests_per_minute: 10 })
      expect((await refused(all, { requests_per_minute: 1 }, 'rate_limit_requests')).retryAfterMs).toBe(60_000)
      // And let in then, not refused again minute after minute while the old use drains.
      clock.advance(30_000)
      expect((await refused(all, { requests_per_minute: 1 }, 'rate_limit_requests')).retryAfterMs).toBe(30_000)
      clock.advance(30_000)
      await oneRequest(all, { requests_per_minute: 1 })

      const t = key('reloaded-tokens')
      await oneRequest(t, { tokens_per_minute: 100_000 }, 90)
      await oneRequest(t, { tokens_per_minute: 100 }, 30)
      await refused(t, { tokens_per_minute: 100 }, 'rate_limit_tokens')
    })

    it('never refuses a key with no limits set', async () => {
      const k = key('free')
      const tickets: KeyTicket[] = []
      for (let i = 0; i < 1000; i++) tickets.push(await limiter.admit(k, {}))
      await tickets[0]!.chargeTokens(1_000_000_000)
      tickets.push(await limiter.admit(k, {}))
      for (const t of tickets) t.release()
    })

    it('limits only what is set: a key with only requests_per_minute has no concurrency cap', async () => {
      const limits = { requests_per_minute: 600 }
      const k = key('rpm-only')
      const tickets: KeyTicket[] = []
      for (let i = 0; i < 500; i++) tickets.push(await limiter.admit(k, limits))
      await tickets[0]!.chargeTokens(1_000_000)
      tickets.push(await limiter.admit(k, limits))
      for (const t of tickets) t.release()
    })
  })
}
