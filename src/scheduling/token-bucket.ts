/**
 * Per-key rate limits as token buckets: a bucket holds up to a minute's
 * allowance and refills continuously at allowance / 60 s. A key may spend
 * its whole allowance at once and then one more every 60 s / allowance, so
 * over any one minute it gets at most about twice the limit (the full
 * bucket, then a minute's refill) and over longer spans the limit itself.
 * Pure: the bucket's state goes in and comes out.
 *
 * The state is what the key has used, draining at the current rate, not
 * what it has left: a reload that changes the limit then applies it to the
 * same use (lowered from 10 to 3 after 2 requests, 1 is left; raised from 3
 * to 10 after 3, 7 are). Stored as what was left, the level was capped at
 * the new limit or stayed empty under a raised one (a limits review).
 *
 * Requests take 1 at admission. Tokens are charged when an answer ends
 * (its usage is known only then), so a key may use more than its allowance;
 * it is refused while it has not used less than its allowance.
 */

export interface Bucket {
  /** Allowance used and not yet refilled; more than the allowance after a large answer. */
  readonly used: number
  /** When `used` was computed, ms since the epoch. */
  readonly at: number
}

export const WINDOW_MS = 60_000

export function refill(bucket: Bucket | undefined, perMinute: number, now: number): Bucket {
  if (bucket === undefined) return { used: 0, at: now }
  // A clock that steps back must not let the same interval be counted twice.
  if (now <= bucket.at) return bucket
  return { used: Math.max(0, bucket.used - ((now - bucket.at) * perMinute) / WINDOW_MS), at: now }
}

/** Milliseconds until the bucket has `needed` of its allowance unused, 0 when it already has. */
export function waitFor(bucket: Bucket, needed: number, perMinute: number): number {
  const shortfall = bucket.used + needed - perMinute
  if (shortfall <= 0) return 0
  return Math.ceil((shortfall * WINDOW_MS) / perMinute)
}

export type Take = { readonly ok: true; readonly bucket: Bucket } | { readonly ok: false; readonly bucket: Bucket; readonly retryAfterMs: number }

/**
 * Takes one request from a requests-per-minute bucket. Use counts at most a
 * full minute's allowance: only a reload that lowered the limit leaves more
 * (10 of 10 used, lowered to 1, was a 10-minute wait; a review), and a
 * limit per minute should not refuse for longer than a minute.
 */
export function takeRequest(bucket: Bucket | undefined, perMinute: number, now: number): Take {
  const refilled = refill(bucket, perMinute, now)
  const current = refilled.used > perMinute ? { used: perMinute, at: refilled.at } : refilled
  if (current.used + 1 <= perMinute) return { ok: true, bucket: { used: current.used + 1, at: current.at } }
  return { ok: false, bucket: current, retryAfterMs: waitFor(current, 1, perMinute) }
}

/** Admits while the tokens-per-minute bucket has some allowance unused (the smallest answer costs at least one token). */
export function checkTokens(bucket: Bucket | undefined, perMinute: number, now: number): Take {
  const current = refill(bucket, perMinute, now)
  if (current.used < perMinute) return { ok: true, bucket: current }
  // Strictly below the allowance: wait until one whole token is back.
  return { ok: false, bucket: current, retryAfterMs: waitFor(current, 1, perMinute) }
}

export function chargeTokens(bucket: Bucket | undefined, perMinute: number, tokens: number, now: number): Bucket {
  const current = refill(bucket, perMinute, now)
  return { used: current.used + tokens, at: current.at }
}

/**
 * How much of a minute's allowance the bucket holds as used right now: what
 * another store must count to know about this one's admissions (0 for a
 * missing bucket, more than `perMinute` after large answers).
 */
export function usedOf(bucket: Bucket | undefined, perMinute: number, now: number): number {
  return refill(bucket, perMinute, now).used
}

