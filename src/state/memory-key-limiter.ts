/**
 * Per-key limits in this process: concurrency (requests queued or in
 * flight), requests per minute and tokens per minute as token buckets
 * (scheduling/token-bucket.ts).
 */
import type { Clock } from '../context.js'
import type { KeyLimitSettings } from '../config/schema.js'
import { chargeTokens, checkTokens, takeRequest, type Bucket } from '../scheduling/token-bucket.js'
import { concurrencyRefusal, requestsRefusal, tokensRefusal } from './key-refusals.js'
import type { KeyLimiter, KeyTicket } from './store.js'

export class MemoryKeyLimiter implements KeyLimiter {
  readonly #clock: Clock
  readonly #active = new Map<string, number>()
  readonly #requests = new Map<string, Bucket>()
  readonly #tokens = new Map<string, Bucket>()

  constructor(clock: Clock) {
    this.#clock = clock
  }

  async admit(keyId: string, limits: KeyLimitSettings): Promise<KeyTicket> {
    const now = this.#clock.now()
    const active = this.#active.get(keyId) ?? 0
    if (limits.max_concurrency !== undefined && active >= limits.max_concurrency) {
      throw concurrencyRefusal(keyId, active, limits)
    }
    if (limits.tokens_per_minute !== undefined) {
      const tokens = checkTokens(this.#tokens.get(keyId), limits.tokens_per_minute, now)
      if (!tokens.ok) throw tokensRefusal(keyId, tokens.retryAfterMs, limits)
    }
    if (limits.requests_per_minute !== undefined) {
      const taken = takeRequest(this.#requests.get(keyId), limits.requests_per_minute, now)
      if (!taken.ok) throw requestsRefusal(keyId, taken.retryAfterMs, limits)
      this.#requests.set(keyId, taken.bucket)
    }
    this.#active.set(keyId, active + 1)
    return this.#ticket(keyId, limits)
  }

  #ticket(keyId: string, limits: KeyLimitSettings): KeyTicket {
    let released = false
    return {
      chargeTokens: async (tokens) => {
        if (limits.tokens_per_minute === undefined || tokens <= 0) return
        this.#tokens.set(keyId, chargeTokens(this.#tokens.get(keyId), limits.tokens_per_minute, tokens, this.#clock.now()))
      },
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
