/**
 * Per-key limits in this process: concurrency (requests queued or in
 * flight), requests per minute and tokens per minute as token buckets
 * (scheduling/token-bucket.ts). In redis mode it is the outage fallback,
 * and what its buckets used is read out (`usage`) to be carried into Redis,
 * then kept as counted there (`countedElsewhere`).
 */
import type { Clock } from '../context.js'
import type { KeyLimitSettings } from '../config/schema.js'
import { chargeTokens, checkTokens, refill, takeRequest, usedOf, type Bucket } from '../scheduling/token-bucket.js'
import { concurrencyRefusal, requestsRefusal, tokensRefusal } from './key-refusals.js'
import type { KeyLimiter, KeyTicket, MinuteUse } from './store.js'

/** What a key's buckets hold as used of its trailing minute and no other store has counted. */
export interface KeyUsage extends MinuteUse {
  readonly keyId: string
  readonly limits: KeyLimitSettings
  /** Requests also held, which another store counted already (not in `requests`: never carried). */
  readonly alreadyShared?: number
}

/** Less than this of a request or a token is rounding, not use. */
const NOTHING_LEFT = 1e-6

export class MemoryKeyLimiter implements KeyLimiter {
  readonly #clock: Clock
  readonly #active = new Map<string, number>()
  readonly #requests = new Map<string, Bucket>()
  readonly #tokens = new Map<string, Bucket>()
  /** Of the requests counted, those another store counted too (a late Redis call's admission, a carry): enforced here, never carried. */
  readonly #alreadyShared = new Map<string, Bucket>()
  /** Of the tokens counted, those another store counted too (a carry). */
  readonly #sharedTokens = new Map<string, Bucket>()
  /** The limits each key with a bucket was last counted under (`usage` needs its per-minute figures). */
  readonly #limits = new Map<string, KeyLimitSettings>()

  constructor(clock: Clock) {
    this.#clock = clock
  }

  /** `elsewhere`: the key's requests running here but counted in another store (Redis), which its concurrency counts too. */
  /** Requests of the key admitted here and still running. */
  running(keyId: string): number {
    return this.#active.get(keyId) ?? 0
  }

  async admit(keyId: string, limits: KeyLimitSettings, elsewhere = 0): Promise<KeyTicket> {
    const now = this.#clock.now()
    const active = this.#active.get(keyId) ?? 0
    const tokens = limits.tokens_per_minute === undefined ? null : checkTokens(this.#tokens.get(keyId), limits.tokens_per_minute, now)
    const taken = limits.requests_per_minute === undefined ? null : takeRequest(this.#requests.get(keyId), limits.requests_per_minute, now)
    // A refused take's bucket holds the use capped at a minute's allowance (token-bucket.ts): kept, or the cap
    // would start again from the old use at every try (a code review: still refused after 10 minutes).
    if (taken !== null && !taken.ok) {
      this.#requests.set(keyId, taken.bucket)
      this.#capShared(keyId, taken.bucket, limits.requests_per_minute!, now)
      // Under the limits it is now read at, or the carry into Redis drained it at the old rate (a code review).
      this.#countedUnder(keyId, limits)
    }
    const tokensWait = tokens !== null && !tokens.ok ? tokens.retryAfterMs : 0
    const requestsWait = taken !== null && !taken.ok ? taken.retryAfterMs : 0
    // Every refusal's Retry-After is when all of the key's limits let it in: the first limit's alone was
    // refused again by the next (a limits review).
    const wait = Math.max(tokensWait, requestsWait)
    if (limits.max_concurrency !== undefined && active + elsewhere >= limits.max_concurrency) {
      throw concurrencyRefusal(keyId, active + elsewhere, limits, wait)
    }
    if (tokensWait > 0) throw tokensRefusal(keyId, wait, limits)
    if (requestsWait > 0) throw requestsRefusal(keyId, wait, limits)
    if (taken !== null) {
      this.#requests.set(keyId, taken.bucket)
      this.#countedUnder(keyId, limits)
    }
    this.#active.set(keyId, active + 1)
    return this.#ticket(keyId, limits)
  }

  /** Charges an answer's tokens to the key (what its tickets do; also used for answers admitted elsewhere). */
  charge(keyId: string, limits: KeyLimitSettings, tokens: number): void {
    if (limits.tokens_per_minute === undefined || tokens <= 0) return
    this.#tokens.set(keyId, chargeTokens(this.#tokens.get(keyId), limits.tokens_per_minute, tokens, this.#clock.now()))
    this.#countedUnder(keyId, limits)
  }

  /** One request this limiter admitted was counted by another store too (Redis, by a late call): enforced here, never carried. */
  markShared(keyId: string, limits: KeyLimitSettings): void {
    const rpm = limits.requests_per_minute
    if (rpm === undefined) return
    const now = this.#clock.now()
    this.#alreadyShared.set(keyId, chargeTokens(this.#alreadyShared.get(keyId), rpm, 1, now))
    this.#capShared(keyId, refill(this.#requests.get(keyId), rpm, now), rpm, now)
  }

  /** What another store counted never exceeds what the request bucket holds (it is capped at a lowered limit): else later requests hid behind it. */
  #capShared(keyId: string, requests: Bucket, rpm: number, now: number): void {
    const shared = this.#alreadyShared.get(keyId)
    if (shared !== undefined && usedOf(shared, rpm, now) > requests.used) this.#alreadyShared.set(keyId, { used: requests.used, at: now })
  }

  /** Every key whose buckets hold use no other store has counted, right now. */
  usage(): KeyUsage[] {
    const now = this.#clock.now()
    const usage: KeyUsage[] = []
    for (const [keyId, limits] of this.#limits) {
      const rpm = limits.requests_per_minute
      const tpm = limits.tokens_per_minute
      const held = rpm === undefined ? 0 : usedOf(this.#requests.get(keyId), rpm, now)
      const shared = rpm === undefined ? 0 : Math.min(held, usedOf(this.#alreadyShared.get(keyId), rpm, now))
      const heldTokens = tpm === undefined ? 0 : usedOf(this.#tokens.get(keyId), tpm, now)
      const tokens = heldTokens - (tpm === undefined ? 0 : Math.min(heldTokens, usedOf(this.#sharedTokens.get(keyId), tpm, now)))
      const requests = held - shared
      // What floating-point drains leave of use counted elsewhere (2e-16 requests in a full run) is nothing to carry.
      if (requests <= NOTHING_LEFT && tokens <= NOTHING_LEFT) continue
      usage.push(shared > 0 ? { keyId, limits, requests, tokens, alreadyShared: shared } : { keyId, limits, requests, tokens })
    }
    return usage
  }

  /**
   * `usage` counts in another store from now on (a carry into Redis): kept
   * in these buckets as counted there, enforced and never carried again,
   * until a minute's refill drains it. Taken out, a flapping Redis gave
   * every replica a new local minute at each outage (a review: 1,182
   * requests in a minute on a key of 60, three replicas).
   */
  countedElsewhere(usage: KeyUsage): void {
    const now = this.#clock.now()
    const { keyId } = usage
    const { requests_per_minute: rpm, tokens_per_minute: tpm } = usage.limits
    if (rpm !== undefined && usage.requests > 0) {
      this.#alreadyShared.set(keyId, chargeTokens(this.#alreadyShared.get(keyId), rpm, usage.requests, now))
      this.#capShared(keyId, refill(this.#requests.get(keyId), rpm, now), rpm, now)
    }
    if (tpm !== undefined && usage.tokens > 0) {
      const tokens = refill(this.#tokens.get(keyId), tpm, now)
      const shared = chargeTokens(this.#sharedTokens.get(keyId), tpm, usage.tokens, now)
      this.#sharedTokens.set(keyId, shared.used > tokens.used ? { used: tokens.used, at: now } : shared)
    }
  }

  #countedUnder(keyId: string, limits: KeyLimitSettings): void {
    if (this.#limits.get(keyId) !== limits) this.#limits.set(keyId, limits)
  }

  #ticket(keyId: string, limits: KeyLimitSettings): KeyTicket {
    let released = false
    return {
      chargeTokens: async (tokens) => this.charge(keyId, limits, tokens),
      release: () => {
        if (released) return
        released = true
        const left = (this.#active.get(keyId) ?? 1) - 1
        if (left <= 0) this.#active.delete(keyId)
        else this.#active.set(keyId, left)
      },
    }
  }
}
