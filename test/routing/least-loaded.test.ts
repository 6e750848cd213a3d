import { describe, it, expect } from 'vitest'
import type { BackendStats, BalancerCandidate, Rng } from '../../src/routing/balancers/balancer.js'
import { pickLeastLoaded } from '../../src/routing/balancers/least-loaded.js'
import { seeded } from '../support/seeded-random.js'

/** An rng that fails the test if it is called. */
const noRng: Rng = () => {
  throw new Error('rng must not be called when there is a single best candidate')
}

const constant =
  (value: number): Rng =>
  () =>
    value

function equal(...names: string[]): BalancerCandidate[] {
  return names.map((name) => ({ name, weight: 1 }))
}

function statsOf(entries: Record<string, BackendStats>): ReadonlyMap<string, BackendStats> {
  return new Map(Object.entries(entries))
}

function pickName(candidates: readonly BalancerCandidate[], stats: ReadonlyMap<string, BackendStats>, rng: Rng): string {
  return candidates[pickLeastLoaded(candidates, stats, rng)]!.name
}

describe('pickLeastLoaded', () => {
  it('picks the fewest in flight at this gateway', () => {
    const stats = statsOf({ a: { inFlight: 3 }, b: { inFlight: 1 }, c: { inFlight: 2 } })
    expect(pickName(equal('a', 'b', 'c'), stats, noRng)).toBe('b')
  })

  // Regression (contract audit): the queue only broke in-flight ties, so a backend reporting 50 waiting
  // got the same share as an idle one once the counts differed (3 and 3 of 6 held requests).
  it('weighs the in-flight count with the backend queue: their sum decides', () => {
    const stats = statsOf({
      queued: { inFlight: 1, backendWaiting: 50 },
      idle: { inFlight: 2, backendWaiting: 0 },
    })
    expect(pickName(equal('queued', 'idle'), stats, noRng)).toBe('idle')
    const overtaken = statsOf({
      queued: { inFlight: 1, backendWaiting: 50 },
      idle: { inFlight: 52, backendWaiting: 0 },
    })
    expect(pickName(equal('queued', 'idle'), overtaken, noRng)).toBe('queued')
  })

  it('ranks the load above weight', () => {
    const candidates = [
      { name: 'a', weight: 10 },
      { name: 'b', weight: 1 },
    ]
    const stats = statsOf({
      a: { inFlight: 1, backendWaiting: 3 },
      b: { inFlight: 2, backendWaiting: 1 },
    })
    expect(pickName(candidates, stats, noRng)).toBe('b')
  })

  it('compares raw in-flight counts, not counts per weight', () => {
    const candidates = [
      { name: 'heavy', weight: 4 },
      { name: 'light', weight: 1 },
    ]
    const stats = statsOf({ heavy: { inFlight: 2 }, light: { inFlight: 1 } })
    expect(pickName(candidates, stats, noRng)).toBe('light')
  })

  it('counts the queue on an in-flight tie', () => {
    const stats = statsOf({
      a: { inFlight: 1, backendWaiting: 4 },
      b: { inFlight: 1, backendWaiting: 1 },
      c: { inFlight: 1, backendWaiting: 2 },
    })
    expect(pickName(equal('a', 'b', 'c'), stats, noRng)).toBe('b')
  })

  it('at an equal load, prefers a known queue to an unknown one', () => {
    const stats = statsOf({ unknown: { inFlight: 3 }, known: { inFlight: 1, backendWaiting: 2 } })
    expect(pickName(equal('unknown', 'known'), stats, noRng)).toBe('known')
    expect(pickName(equal('known', 'unknown'), stats, noRng)).toBe('known')
  })

  it('prefers a known empty queue to an unknown one', () => {
    const stats = statsOf({ unknown: { inFlight: 0 }, empty: { inFlight: 0, backendWaiting: 0 } })
    expect(pickName(equal('unknown', 'empty'), stats, noRng)).toBe('empty')
    expect(pickName(equal('empty', 'unknown'), stats, noRng)).toBe('empty')
  })

  it('counts an unknown queue as 0 against a known non-empty one', () => {
    const stats = statsOf({ busy: { inFlight: 0, backendWaiting: 3 }, unknown: { inFlight: 0 } })
    expect(pickName(equal('busy', 'unknown'), stats, noRng)).toBe('unknown')
    const loaded = statsOf({ busy: { inFlight: 0, backendWaiting: 3 }, unknown: { inFlight: 4 } })
    expect(pickName(equal('busy', 'unknown'), loaded, noRng)).toBe('busy')
  })

  it('breaks a queue tie by weight, higher first', () => {
    const candidates = [
      { name: 'a', weight: 1 },
      { name: 'b', weight: 3 },
      { name: 'c', weight: 2 },
    ]
    const stats = statsOf({
      a: { inFlight: 0, backendWaiting: 0 },
      b: { inFlight: 0, backendWaiting: 0 },
      c: { inFlight: 0, backendWaiting: 0 },
    })
    expect(pickName(candidates, stats, noRng)).toBe('b')
  })

  it('draws among exact ties only, in candidate order', () => {
    const candidates = equal('a', 'b', 'c', 'd')
    const stats = statsOf({
      a: { inFlight: 1 },
      b: { inFlight: 0 },
      c: { inFlight: 2 },
      d: { inFlight: 0 },
    })
    expect(pickName(candidates, stats, constant(0))).toBe('b')
    expect(pickName(candidates, stats, constant(0.49))).toBe('b')
    expect(pickName(candidates, stats, constant(0.5))).toBe('d')
    expect(pickName(candidates, stats, constant(0.999999))).toBe('d')
  })

  it('spreads exact ties evenly over many picks', () => {
    const candidates = equal('a', 'b', 'c')
    const rng = seeded(42)
    const got: Record<string, number> = {}
    for (let i = 0; i < 3000; i++) {
      const name = pickName(candidates, new Map(), rng)
      got[name] = (got[name] ?? 0) + 1
    }
    for (const name of ['a', 'b', 'c']) {
      expect(got[name]).toBeGreaterThan(900)
      expect(got[name]).toBeLessThan(1100)
    }
  })

  it('stays in range when the random source misbehaves', () => {
    const candidates = equal('a', 'b')
    expect(pickName(candidates, new Map(), constant(1))).toBe('b')
    expect(pickName(candidates, new Map(), constant(-0.5))).toBe('a')
    expect(pickName(candidates, new Map(), constant(Number.NaN))).toBe('a')
  })

  it('treats a candidate without stats as idle with an unknown queue', () => {
    const stats = statsOf({ a: { inFlight: 1 } })
    expect(pickName(equal('a', 'b'), stats, noRng)).toBe('b')
    const known = statsOf({ a: { inFlight: 0, backendWaiting: 0 } })
    expect(pickName(equal('b', 'a'), known, noRng)).toBe('a')
  })

  it('always picks a single candidate without drawing', () => {
    expect(pickLeastLoaded(equal('only'), statsOf({ only: { inFlight: 9 } }), noRng)).toBe(0)
  })

  it('does not modify its inputs', () => {
    const candidates = equal('a', 'b')
    const stats = new Map<string, BackendStats>([['a', { inFlight: 1 }]])
    pickLeastLoaded(candidates, stats, seeded(1))
    expect(candidates).toEqual(equal('a', 'b'))
    expect([...stats.entries()]).toEqual([['a', { inFlight: 1 }]])
  })

  it('refuses an empty candidate list', () => {
    expect(() => pickLeastLoaded([], new Map(), seeded(1))).toThrow(/at least one candidate/)
  })
})
