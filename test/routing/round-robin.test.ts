import { describe, it, expect } from 'vitest'
import type { BalancerCandidate } from '../../src/routing/balancers/balancer.js'
import { pickSmoothWeighted } from '../../src/routing/balancers/round-robin.js'

/** Picks `count` times, carrying the running weights; returns the chosen names and the final state. */
function run(candidates: readonly BalancerCandidate[], count: number, start: ReadonlyMap<string, number> = new Map()) {
  let current = start
  const names: string[] = []
  for (let i = 0; i < count; i++) {
    const pick = pickSmoothWeighted(candidates, current)
    expect(pick.index).toBeGreaterThanOrEqual(0)
    expect(pick.index).toBeLessThan(candidates.length)
    names.push(candidates[pick.index]!.name)
    current = pick.current
  }
  return { names, current }
}

function counts(names: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const name of names) out[name] = (out[name] ?? 0) + 1
  return out
}

function longestRun(names: readonly string[], name: string): number {
  let longest = 0
  let run = 0
  for (const n of names) {
    run = n === name ? run + 1 : 0
    longest = Math.max(longest, run)
  }
  return longest
}

const FIVE_ONE_ONE = [
  { name: 'a', weight: 5 },
  { name: 'b', weight: 1 },
  { name: 'c', weight: 1 },
]

describe('pickSmoothWeighted', () => {
  it('honours weights 5,1,1 exactly over a cycle of 7 picks', () => {
    expect(counts(run(FIVE_ONE_ONE, 7).names)).toEqual({ a: 5, b: 1, c: 1 })
  })

  it('spreads the heavy backend out rather than bunching it', () => {
    const { names } = run(FIVE_ONE_ONE, 7)
    // The nginx sequence for 5,1,1.
    expect(names).toEqual(['a', 'a', 'b', 'a', 'c', 'a', 'a'])
    expect(longestRun(names, 'a')).toBeLessThan(5)
    // Across cycles too: the heavy one is never picked 5 times in a row.
    expect(longestRun(run(FIVE_ONE_ONE, 70).names, 'a')).toBeLessThan(5)
  })

  it('returns to the starting state after each full cycle, so every cycle is exact', () => {
    const { names, current } = run(FIVE_ONE_ONE, 7)
    expect([...current.values()]).toEqual([0, 0, 0])
    const many = run(FIVE_ONE_ONE, 70).names
    for (let cycle = 0; cycle < 10; cycle++) {
      expect(many.slice(cycle * 7, cycle * 7 + 7)).toEqual(names)
    }
  })

  it.each([
    [[3, 2], [3, 2]],
    [[1, 1, 1, 1], [1, 1, 1, 1]],
    [[10, 1], [10, 1]],
    [[2, 7, 4], [2, 7, 4]],
  ])('weights %j give counts %j over one cycle', (weights, expected) => {
    const candidates = weights.map((weight, i) => ({ name: `n${i}`, weight }))
    const total = weights.reduce((a, b) => a + b, 0)
    const got = counts(run(candidates, total).names)
    expect(candidates.map((c) => got[c.name] ?? 0)).toEqual(expected)
  })

  it('alternates between equal weights', () => {
    const equal = [
      { name: 'x', weight: 1 },
      { name: 'y', weight: 1 },
    ]
    expect(run(equal, 6).names).toEqual(['x', 'y', 'x', 'y', 'x', 'y'])
  })

  it('always picks a single candidate', () => {
    const { names } = run([{ name: 'only', weight: 3 }], 5)
    expect(names).toEqual(['only', 'only', 'only', 'only', 'only'])
  })

  it('depends on the state passed in: a fresh state every call always picks the heaviest', () => {
    const fresh = Array.from({ length: 4 }, () => pickSmoothWeighted(FIVE_ONE_ONE, new Map()).index)
    expect(fresh).toEqual([0, 0, 0, 0])
    const carried = run(FIVE_ONE_ONE, 4).names
    expect(carried).toContain('b')
  })

  it('does not modify the state passed in', () => {
    const state = new Map([
      ['a', 1],
      ['b', -1],
    ])
    pickSmoothWeighted(
      [
        { name: 'a', weight: 1 },
        { name: 'b', weight: 1 },
      ],
      state,
    )
    expect([...state.entries()]).toEqual([
      ['a', 1],
      ['b', -1],
    ])
  })

  it('resumes from a state kept between calls exactly as one uninterrupted run', () => {
    const first = run(FIVE_ONE_ONE, 3)
    const second = run(FIVE_ONE_ONE, 4, first.current)
    expect([...first.names, ...second.names]).toEqual(run(FIVE_ONE_ONE, 7).names)
  })

  it('keys the state by name, so a reordered candidate list keeps its place', () => {
    const first = run(FIVE_ONE_ONE, 3)
    const reordered = [FIVE_ONE_ONE[2]!, FIVE_ONE_ONE[0]!, FIVE_ONE_ONE[1]!]
    const second = run(reordered, 4, first.current)
    expect([...first.names, ...second.names]).toEqual(run(FIVE_ONE_ONE, 7).names)
  })

  it('never picks a candidate that disappeared, drops its state, and shares among the rest by weight', () => {
    const before = run(FIVE_ONE_ONE, 3)
    const rest = [
      { name: 'a', weight: 2 },
      { name: 'c', weight: 1 },
    ]
    const after = run(rest, 300, before.current)
    expect(after.names).not.toContain('b')
    expect([...after.current.keys()].sort()).toEqual(['a', 'c'])
    // Left-over running weights skew only the first picks: over many the ratio is the weights'.
    const got = counts(after.names)
    expect(Math.abs((got.a ?? 0) - 200)).toBeLessThanOrEqual(3)
    expect(Math.abs((got.c ?? 0) - 100)).toBeLessThanOrEqual(3)
  })

  it('gives a candidate that comes back a fresh start', () => {
    const without = run(FIVE_ONE_ONE.slice(0, 2), 4)
    const pick = pickSmoothWeighted(FIVE_ONE_ONE, without.current)
    expect(pick.current.has('c')).toBe(true)
    expect(pick.current.get('c')).toBeLessThanOrEqual(1)
    const back = run(FIVE_ONE_ONE, 70, without.current).names
    expect(back.slice(0, 7)).toContain('c')
    const got = counts(back)
    expect(Math.abs((got.a ?? 0) - 50)).toBeLessThanOrEqual(1)
    expect(Math.abs((got.b ?? 0) - 10)).toBeLessThanOrEqual(1)
    expect(Math.abs((got.c ?? 0) - 10)).toBeLessThanOrEqual(1)
  })

  it('refuses an empty candidate list', () => {
    expect(() => pickSmoothWeighted([], new Map())).toThrow(/at least one candidate/)
  })
})

describe('weighted round robin over 1,000 picks', () => {
  it('matches weights 5:3:2 exactly (1,000 is a whole number of cycles of 10)', () => {
    const { names } = run([{ name: 'a', weight: 5 }, { name: 'b', weight: 3 }, { name: 'c', weight: 2 }], 1000)
    expect(counts(names)).toEqual({ a: 500, b: 300, c: 200 })
  })
})
