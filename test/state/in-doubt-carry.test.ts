/** What is sent again of a carry whose answer never came, and how long Redis remembers a carry's id. */
import { describe, expect, it } from 'vitest'
import { carryMemoryMs, leftOfCarry, type InDoubtCarry } from '../../src/state/in-doubt-carry.js'

const limits = { requests_per_minute: 60, tokens_per_minute: 6000 }
const carry = (use: Partial<InDoubtCarry['use']>): InDoubtCarry => ({
  id: 'replica/1',
  use: { keyId: 'k', limits, requests: 0, tokens: 0, ...use },
  readAt: 1_000_000,
})

describe('leftOfCarry', () => {
  it('is the carry itself when no time has passed', () => {
    expect(leftOfCarry(carry({ requests: 3, tokens: 500 }), 1_000_000)).toEqual({ keyId: 'k', limits, requests: 3, tokens: 500 })
  })

  it('takes off what each bucket refilled since the carry was read (60 a minute: 1 a second)', () => {
    expect(leftOfCarry(carry({ requests: 3, tokens: 500 }), 1_001_500)).toEqual({ keyId: 'k', limits, requests: 1.5, tokens: 350 })
  })

  it('is null once a minute has drained all of it', () => {
    expect(leftOfCarry(carry({ requests: 3, tokens: 500 }), 1_005_000)).toBeNull()
  })

  // Regression (diff review, session 27): drained the other way round, 5 outage requests were given back uncounted.
  it('drains the part Redis counted already before the carried requests, as the local limiter reads them', () => {
    expect(leftOfCarry(carry({ requests: 2, alreadyShared: 3 }), 1_002_000)).toEqual({ keyId: 'k', limits, requests: 2, tokens: 0, alreadyShared: 1 })
    expect(leftOfCarry(carry({ requests: 2, alreadyShared: 3 }), 1_004_000)).toEqual({ keyId: 'k', limits, requests: 1, tokens: 0 })
  })

  it('counts nothing for a limit the key does not have', () => {
    const onlyTokens = { keyId: 'k', limits: { tokens_per_minute: 600 }, requests: 0, tokens: 20 }
    expect(leftOfCarry({ id: 'r/1', use: onlyTokens, readAt: 0 }, 1000)).toEqual({ ...onlyTokens, tokens: 10 })
  })

  it('takes a clock that stepped back as no time passed', () => {
    expect(leftOfCarry(carry({ requests: 3 }), 999_000)).toEqual({ keyId: 'k', limits, requests: 3, tokens: 0 })
  })
})

describe('carryMemoryMs', () => {
  it('outlasts the slower bucket’s drain by a minute', () => {
    // 30 requests at 60 a minute drain in 30 s; 12,000 tokens at 6,000 a minute in 2 minutes.
    expect(carryMemoryMs(limits, { requests: 30, tokens: 12_000 })).toBe(180_000)
    expect(carryMemoryMs(limits, { requests: 30, tokens: 0 })).toBe(90_000)
  })

  it('is a minute for use of limits the key does not have', () => {
    expect(carryMemoryMs({}, { requests: 5, tokens: 5 })).toBe(60_000)
  })
})
