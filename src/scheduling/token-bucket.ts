/**
 * Per-key rate limits as token buckets: a bucket holds up to a minute's
 * allowance and refills continuously at allowance / 60 s, so a limit "per
 * minute" holds over every sliding minute without the double burst of fixed
 * windows at their boundary. Pure: the bucket's state goes in and comes out.
 *
 * Requests take 1 at admission. Tokens are charged when an answer ends
 * (its usage is known only then), so that bucket may go below zero; a key
 * is refused while its token bucket is not above zero.
 */

export interface Bucket {
  /** Allowance available, may be negative after a large answer. */
  readonly level: number
  /** When `level` was computed, ms since the epoch. */
  readonly at: number
}

export const WINDOW_MS = 60_000

export function refill(bucket: Bucket | undefined, perMinute: number, now: number): Bucket {
  if (bucket === undefined) return { level: perMinute, at: now }
  // A clock that steps back must not let the same interval be counted twice.
  if (now <= bucket.at) return bucket
  return { level: Math.min(perMinute, bucket.level + ((now - bucket.at) * perMinute) / WINDOW_MS), at: now }
}

/** Milliseconds until the bucket holds `needed`, 0 when it already does. */
export function waitFor(bucket: Bucket, needed: number, perMinute: number): number {
  if (bucket.level >= needed) return 0
  return Math.ceil(((needed - bucket.level) * WINDOW_MS) / perMinute)
}

export type Take = { readonly ok: true; readonly bucket: Bucket } | { readonly ok: false; readonly bucket: Bucket; readonly retryAfterMs: number }

/** Takes one request from a requests-per-minute bucket. */
export function takeRequest(bucket: Bucket | undefined, perMinute: number, now: number): Take {
  const current = refill(bucket, perMinute, now)
  if (current.level >= 1) return { ok: true, bucket: { level: current.level - 1, at: current.at } }
  return { ok: false, bucket: current, retryAfterMs: waitFor(current, 1, perMinute) }
}

/** Admits while the tokens-per-minute bucket is above zero (the smallest answer costs at least one token). */
export function checkTokens(bucket: Bucket | undefined, perMinute: number, now: number): Take {
  const current = refill(bucket, perMinute, now)
  if (current.level > 0) return { ok: true, bucket: current }
  // Strictly above zero: wait until one whole token is back.
  return { ok: false, bucket: current, retryAfterMs: waitFor(current, 1, perMinute) }
}

export function chargeTokens(bucket: Bucket | undefined, perMinute: number, tokens: number, now: number): Bucket {
  const current = refill(bucket, perMinute, now)
  return { level: current.level - tokens, at: current.at }
}

/**
 * How much of a minute's allowance the bucket holds as used right now: what
 * another store must count to know about this one's admissions (0 for a
 * missing bucket, more than `perMinute` after large answers).
 */
export function usedOf(bucket: Bucket | undefined, perMinute: number, now: number): number {
  if (bucket === undefined) return 0
  return perMinute - refill(bucket, perMinute, now).level
}

/** The bucket with `amount` of its use handed to another store, which counts it from now on. */
export function giveBack(bucket: Bucket | undefined, perMinute: number, amount: number, now: number): Bucket {
  const current = refill(bucket, perMinute, now)
  return { level: Math.min(perMinute, current.level + amount), at: current.at }
}
