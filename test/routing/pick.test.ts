import { describe, it, expect, expectTypeOf } from 'vitest'
import type { BALANCERS } from '../../src/config/schema.js'
import type { BackendStats } from '../../src/routing/balancers/balancer.js'
import { pickLeastLoaded } from '../../src/routing/balancers/least-loaded.js'
import { pickBackend, type BalanceStrategy } from '../../src/routing/balancers/pick.js'
import { affinityKey, rankByAffinity } from '../../src/routing/balancers/prefix-affinity.js'
import { pickSmoothWeighted } from '../../src/routing/balancers/round-robin.js'
import { seeded } from '../support/seeded-random.js'

const CANDIDATES = [
  { name: 'a', weight: 2 },
  { name: 'b', weight: 1 },
  { name: 'c', weight: 1 },
]

const STATS: ReadonlyMap<string, BackendStats> = new Map([
  ['a', { inFlight: 4 }],
  ['b', { inFlight: 1, backendWaiting: 3 }],
  ['c', { inFlight: 1, backendWaiting: 0 }],
])

const NO_KEY = { affinityKey: null }

describe('pickBackend', () => {
  it('takes exactly the config\'s balance values', () => {
    expectTypeOf<BalanceStrategy>().toEqualTypeOf<(typeof BALANCERS)[number]>()
  })

  it('round_robin: picks by smooth weighted round robin and returns the new state', () => {
    let state: ReadonlyMap<string, number> = new Map()
    let expected: ReadonlyMap<string, number> = new Map()
    const names: string[] = []
    for (let i = 0; i < 8; i++) {
      const pick = pickBackend('round_robin', CANDIDATES, STATS, NO_KEY, seeded(i), state)
      const reference = pickSmoothWeighted(CANDIDATES, expected)
      expect(pick.index).toBe(reference.index)
      expect([...pick.roundRobinState]).toEqual([...reference.current])
      names.push(CANDIDATES[pick.index]!.name)
      state = pick.roundRobinState
      expected = reference.current
    }
    // Load is ignored: a, with the most in flight, still gets its half.
    expect(names.filter((n) => n === 'a')).toHaveLength(4)
  })

  it('least_loaded: picks the least loaded and hands the state back untouched', () => {
    const state = new Map([['a', 1]])
    const pick = pickBackend('least_loaded', CANDIDATES, STATS, NO_KEY, seeded(1), state)
    expect(CANDIDATES[pick.index]!.name).toBe('c')
    expect(pick.roundRobinState).toBe(state)
    expect([...state]).toEqual([['a', 1]])
  })

  it('least_loaded: uses the random source for exact ties', () => {
    const idle = new Map<string, BackendStats>()
    const equal = CANDIDATES.map((c) => ({ ...c, weight: 1 }))
    for (let seed = 0; seed < 10; seed++) {
      const pick = pickBackend('least_loaded', equal, idle, NO_KEY, seeded(seed), new Map())
      expect(pick.index).toBe(pickLeastLoaded(equal, idle, seeded(seed)))
    }
  })

  it('prefix_affinity: follows the key, and hands the state back untouched', () => {
    const key = affinityKey({ messages: [{ role: 'user', content: 'hello' }] })
    const state = new Map([['b', -1]])
    const idle = new Map<string, BackendStats>()
    const pick = pickBackend('prefix_affinity', CANDIDATES, idle, { affinityKey: key }, seeded(1), state)
    expect(pick.index).toBe(rankByAffinity(CANDIDATES, key!)[0])
    expect(pick.roundRobinState).toBe(state)
    const again = pickBackend('prefix_affinity', CANDIDATES, idle, { affinityKey: key }, seeded(2), state)
    expect(again.index).toBe(pick.index)
  })

  it('prefix_affinity: without a key, picks the least loaded', () => {
    const pick = pickBackend('prefix_affinity', CANDIDATES, STATS, NO_KEY, seeded(1), new Map())
    expect(CANDIDATES[pick.index]!.name).toBe('c')
  })

  it('refuses an unknown strategy at run time', () => {
    const bogus = 'random' as unknown as BalanceStrategy
    expect(() => pickBackend(bogus, CANDIDATES, STATS, NO_KEY, seeded(1), new Map())).toThrow(/unknown balance strategy/)
  })
})
