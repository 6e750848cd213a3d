import { describe, it, expect } from 'vitest'
import { WINDOW_MS, chargeTokens, checkTokens, refill, takeRequest, usedOf, waitFor, type Bucket, type Take } from '../../src/scheduling/token-bucket.js'

const T0 = 1_700_000_000_000

function refused(take: Take): number {
  if (take.ok) throw new Error(`expected a refusal, got use ${take.bucket.used}`)
  return take.retryAfterMs
}

describe('refill', () => {
  it('starts a new key with nothing used: a full minute of allowance', () => {
    expect(refill(undefined, 30, T0)).toEqual({ used: 0, at: T0 })
  })

  it('refills continuously at perMinute / 60 s', () => {
    expect(refill({ used: 60, at: T0 }, 60, T0 + 1000)).toEqual({ used: 59, at: T0 + 1000 })
    expect(refill({ used: 600, at: T0 }, 600, T0 + 250)).toEqual({ used: 597.5, at: T0 + 250 })
    expect(refill({ used: 110, at: T0 }, 120, T0 + 30_000)).toEqual({ used: 50, at: T0 + 30_000 })
  })

  it('never holds more than perMinute: use does not drain below zero', () => {
    expect(refill({ used: 10, at: T0 }, 60, T0 + 10 * WINDOW_MS)).toEqual({ used: 0, at: T0 + 10 * WINDOW_MS })
    expect(refill({ used: 0.5, at: T0 }, 60, T0 + 1000).used).toBe(0)
  })

  it('drains use past the allowance at the same rate', () => {
    expect(refill({ used: 1200, at: T0 }, 600, T0 + 30_000).used).toBe(900)
    expect(refill({ used: 1200, at: T0 }, 600, T0 + 2 * WINDOW_MS).used).toBe(0)
  })

  it('adds nothing when the clock reads earlier than the bucket', () => {
    expect(refill({ used: 57, at: T0 }, 60, T0 - 5000).used).toBe(57)
  })

  // Found in the committed refill (it returned `at: now` for an earlier
  // clock reading, so the next read credited the same interval twice: with
  // {level 0, at T0} read at T0-1000 then at T0 the level was 1, not 0; the level is now kept as use).
  // Pins the intended semantics: `at` never moves backwards.
  it('does not mint allowance when the clock steps back and forward again', () => {
    const stepped = refill(refill({ used: 60, at: T0 }, 60, T0 - 1000), 60, T0)
    expect(stepped.used).toBe(60)
  })
})

describe('a clock stepping back', () => {
  it('neither takes nor charges at an earlier time than the bucket already saw', () => {
    const taken = takeRequest({ used: 59, at: T0 }, 60, T0 - 1000)
    expect(taken.ok).toBe(true)
    expect(taken.bucket.at).toBeGreaterThanOrEqual(T0)
    // Back at T0 nothing was earned in between.
    expect(refused(takeRequest(taken.bucket, 60, T0))).toBe(1000)

    const charged = chargeTokens({ used: 60, at: T0 }, 60, 30, T0 - 5000)
    expect(charged.at).toBeGreaterThanOrEqual(T0)
    expect(refill(charged, 60, T0).used).toBe(90)
  })
})

describe('waitFor', () => {
  it('is 0 when the bucket already holds enough', () => {
    expect(waitFor({ used: 59, at: T0 }, 1, 60)).toBe(0)
    expect(waitFor({ used: 55, at: T0 }, 1, 60)).toBe(0)
  })

  it('is the time to refill the shortfall, rounded up to whole milliseconds', () => {
    expect(waitFor({ used: 3, at: T0 }, 1, 3)).toBe(20_000)
    expect(waitFor({ used: 59.5, at: T0 }, 1, 60)).toBe(500)
    expect(waitFor({ used: 7, at: T0 }, 1, 7)).toBe(Math.ceil(60_000 / 7))
    expect(waitFor({ used: 69, at: T0 }, 1, 60)).toBe(10_000)
  })
})

describe('takeRequest', () => {
  it('admits perMinute requests at once, then refuses with retryAfterMs 60000 / perMinute', () => {
    let bucket: Bucket | undefined
    for (let i = 0; i < 3; i++) {
      const take = takeRequest(bucket, 3, T0)
      expect(take.ok).toBe(true)
      bucket = take.bucket
    }
    expect(bucket?.used).toBe(3)
    const fourth = takeRequest(bucket, 3, T0)
    expect(refused(fourth)).toBe(20_000)
    // A refusal takes nothing.
    expect(fourth.bucket.used).toBe(3)
  })

  it('after a partial refill says how much longer, and admits exactly then', () => {
    const empty: Bucket = { used: 3, at: T0 }
    expect(refused(takeRequest(empty, 3, T0 + 5000))).toBe(15_000)
    expect(refused(takeRequest(empty, 3, T0 + 19_999))).toBe(1)
    const take = takeRequest(empty, 3, T0 + 20_000)
    expect(take.ok).toBe(true)
    expect(take.bucket).toEqual({ used: 3, at: T0 + 20_000 })
  })

  it('keeps fractional allowance: two requests 30 s apart at 2 per minute drain a spent bucket to 0', () => {
    let bucket: Bucket = { used: 2, at: T0 }
    const first = takeRequest(bucket, 2, T0 + 30_000)
    expect(first.ok).toBe(true)
    bucket = first.bucket
    expect(bucket.used).toBe(2)
    expect(refused(takeRequest(bucket, 2, T0 + 45_000))).toBe(15_000)
  })

  it('a retry after retryAfterMs is admitted, one a millisecond earlier is not (seeded sweep)', () => {
    let state = 17
    const random = () => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0
      return state / 4294967296
    }
    for (let i = 0; i < 2000; i++) {
      const perMinute = 1 + Math.floor(random() * 5000)
      const bucket: Bucket = { used: perMinute - random() * 0.999, at: T0 }
      const wait = refused(takeRequest(bucket, perMinute, T0))
      expect(wait).toBeGreaterThan(0)
      expect(takeRequest(bucket, perMinute, T0 + wait).ok).toBe(true)
      if (wait > 1) expect(takeRequest(bucket, perMinute, T0 + wait - 1).ok).toBe(false)
    }
  })
})

describe('checkTokens / chargeTokens', () => {
  it('charging spends the bucket and may take it below zero', () => {
    const charged = chargeTokens(undefined, 1000, 1500, T0)
    expect(charged).toEqual({ used: 1500, at: T0 })
    expect(chargeTokens(charged, 1000, 100, T0 + 6000)).toEqual({ used: 1500, at: T0 + 6000 })
  })

  it('admits while above zero without spending anything', () => {
    const bucket: Bucket = { used: 599.75, at: T0 }
    const check = checkTokens(bucket, 600, T0)
    expect(check.ok).toBe(true)
    expect(check.bucket.used).toBe(599.75)
    expect(checkTokens(undefined, 600, T0).ok).toBe(true)
  })

  it('refuses at exactly zero', () => {
    expect(refused(checkTokens({ used: 600, at: T0 }, 600, T0))).toBe(100)
  })

  it('stays refused while negative, with a retry-after that shrinks as it refills', () => {
    // 600 per minute = 10 per second; an answer of 1200 tokens on a full bucket leaves -600.
    const spent = chargeTokens(undefined, 600, 1200, T0)
    const first = refused(checkTokens(spent, 600, T0))
    // Back above zero takes a minute; the bucket asks for one whole token on top.
    expect(first).toBeGreaterThan(WINDOW_MS)
    expect(first).toBe(60_100)
    expect(refused(checkTokens(spent, 600, T0 + 30_000))).toBe(first - 30_000)
    expect(checkTokens(spent, 600, T0 + 59_999).ok).toBe(false)
    expect(checkTokens(spent, 600, T0 + 60_000).ok).toBe(false)
    expect(checkTokens(spent, 600, T0 + 60_001).ok).toBe(true)
    expect(checkTokens(spent, 600, T0 + first).ok).toBe(true)
  })
})

describe('usedOf (carrying use to another store)', () => {
  it('reads what the trailing minute used, net of the refill since', () => {
    expect(usedOf(undefined, 60, T0)).toBe(0)
    expect(usedOf({ used: 2, at: T0 }, 60, T0)).toBe(2)
    expect(usedOf({ used: 2, at: T0 }, 60, T0 + 1000)).toBe(1)
    expect(usedOf({ used: 2, at: T0 }, 60, T0 + WINDOW_MS)).toBe(0)
    // Tokens: an answer larger than the allowance is used beyond it.
    expect(usedOf({ used: 140, at: T0 }, 100, T0)).toBe(140)
  })
})

// Regression (limits review, session 24): the bucket kept what was left, capped at the new limit by a
// reload that lowered it and left empty under one that raised it. Use is what a limit change keeps.
describe('a limit changed between two reads (a reload)', () => {
  it('applies to the same use: lowered after 2 of 10, 1 of 3 is left; raised after 3 of 3, 7 of 10 are', () => {
    let lowered: Bucket | undefined
    for (let i = 0; i < 2; i++) lowered = (takeRequest(lowered, 10, T0) as { bucket: Bucket }).bucket
    const one = takeRequest(lowered, 3, T0)
    expect(one.ok).toBe(true)
    expect(takeRequest(one.bucket, 3, T0).ok).toBe(false)

    let raised: Bucket | undefined
    for (let i = 0; i < 3; i++) raised = (takeRequest(raised, 3, T0) as { bucket: Bucket }).bucket
    let admitted = 0
    for (let take = takeRequest(raised, 10, T0); take.ok; take = takeRequest(take.bucket, 10, T0)) admitted++
    expect(admitted).toBe(7)
  })

  it('keeps tokens charged under the old limit against the new one', () => {
    const charged = chargeTokens(undefined, 100_000, 90, T0)
    expect(checkTokens(charged, 100, T0).ok).toBe(true)
    expect(checkTokens(chargeTokens(charged, 100, 30, T0), 100, T0).ok).toBe(false)
  })
})
