/**
 * A carry of a key's local use into Redis whose answer never came (the
 * link dropped, or Redis hung): Redis may have counted it or not. It is
 * sent again under the same id, which Redis counts at most once, and only
 * for what a minute has not refilled of it since it was read; newer local
 * use waits for the next carry, so a repeat never holds more than the
 * first send did. Pure: the failover limiter keeps these and sends them.
 */
import type { KeyLimitSettings } from '../config/schema.js'
import { WINDOW_MS } from '../scheduling/token-bucket.js'
import type { KeyUsage } from './memory-key-limiter.js'

export interface InDoubtCarry {
  /** The id Redis remembers a counted carry by (RedisLink.newId). */
  readonly id: string
  /** What the first send carried, as read from the local buckets. */
  readonly use: KeyUsage
  /** When it was read (ms, the local limiter's clock). */
  readonly readAt: number
}

/** What `amount` of a bucket's use, read at `readAt`, still holds at `now`: its own refill drains it first. */
function undrained(amount: number, perMinute: number | undefined, elapsedMs: number): number {
  if (perMinute === undefined || amount <= 0) return 0
  return Math.max(0, amount - (elapsedMs * perMinute) / WINDOW_MS)
}

/**
 * What is left at `now` of an in-doubt carry: the part Redis, had it
 * counted the first send, would still hold of it. Null when a minute's
 * refill has drained all of it (nothing left to send or give back). The
 * part Redis had counted already drains before the carried requests, as
 * MemoryKeyLimiter.usage reads them (its own bucket drains at the same
 * rate): drained the other way round, a resend held fewer requests than
 * the local buckets still counted apart, and the rest was given back
 * uncounted (a diff review: 5 outage requests lost from Redis's minute).
 */
export function leftOfCarry(carry: InDoubtCarry, now: number): KeyUsage | null {
  const { use } = carry
  const elapsed = Math.max(0, now - carry.readAt)
  const rpm = use.limits.requests_per_minute
  const shared = undrained(use.alreadyShared ?? 0, rpm, elapsed)
  const requestsDrain = rpm === undefined ? 0 : Math.max(0, (elapsed * rpm) / WINDOW_MS - (use.alreadyShared ?? 0))
  const requests = Math.max(0, use.requests - requestsDrain)
  const tokens = undrained(use.tokens, use.limits.tokens_per_minute, elapsed)
  if (requests <= 0 && tokens <= 0 && shared <= 0) return null
  const base = { keyId: use.keyId, limits: use.limits, requests, tokens }
  return shared > 0 ? { ...base, alreadyShared: shared } : base
}

/**
 * How long Redis must remember a carry's id: until a minute's refill has
 * drained what it carried (after that no repeat is sent: `leftOfCarry` is
 * null), and a minute more for clocks and a repeat already on its way.
 */
export function carryMemoryMs(limits: KeyLimitSettings, use: { readonly requests: number; readonly tokens: number }): number {
  const drainMs = (amount: number, perMinute: number | undefined) => (perMinute === undefined || perMinute <= 0 ? 0 : (amount * WINDOW_MS) / perMinute)
  return Math.ceil(Math.max(drainMs(use.requests, limits.requests_per_minute), drainMs(use.tokens, limits.tokens_per_minute))) + WINDOW_MS
}
