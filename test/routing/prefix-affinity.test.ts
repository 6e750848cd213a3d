import { describe, it, expect } from 'vitest'
import type { BackendStats, BalancerCandidate, Rng } from '../../src/routing/balancers/balancer.js'
import { pickLeastLoaded } from '../../src/routing/balancers/least-loaded.js'
import { affinityKey, pickPrefixAffine, rankByAffinity } from '../../src/routing/balancers/prefix-affinity.js'
import { seeded } from '../support/seeded-random.js'

const noRng: Rng = () => {
  throw new Error('rng must not be called when a key decides')
}

/** `count` affinity keys of distinct random prompts, the same on every run. */
function keys(count: number, seed = 7): string[] {
  const rng = seeded(seed)
  return Array.from({ length: count }, (_, i) => {
    const body = { messages: [{ role: 'user', content: `question ${i} ${rng()}` }] }
    return affinityKey(body)!
  })
}

const IDLE: ReadonlyMap<string, BackendStats> = new Map()

function pickName(
  candidates: readonly BalancerCandidate[],
  key: string | null,
  stats: ReadonlyMap<string, BackendStats> = IDLE,
  rng: Rng = noRng,
): string {
  return candidates[pickPrefixAffine(candidates, stats, { affinityKey: key }, rng)]!.name
}

function inFlight(entries: Record<string, number>): ReadonlyMap<string, BackendStats> {
  return new Map(Object.entries(entries).map(([name, n]) => [name, { inFlight: n }]))
}

const WEIGHTED = [
  { name: 'a', weight: 1 },
  { name: 'b', weight: 2 },
  { name: 'c', weight: 3 },
  { name: 'd', weight: 4 },
]

describe('affinityKey', () => {
  const system = { role: 'system', content: 'You are a helpful assistant.' }
  const user = { role: 'user', content: 'Summarise this contract.' }

  it('is the same for requests sharing system prompt, first user message and salt', () => {
    const first = affinityKey({ messages: [system, user], cache_salt: 's1' })
    const later = affinityKey({
      messages: [system, user, { role: 'assistant', content: 'Sure.' }, { role: 'user', content: 'Shorter.' }],
      cache_salt: 's1',
    })
    expect(first).not.toBeNull()
    expect(later).toBe(first)
    expect(affinityKey({ messages: [system, user], cache_salt: 's1' })).toBe(first)
  })

  it('is a fixed-size digest that does not contain the prompt', () => {
    const key = affinityKey({ messages: [system, user] })!
    expect(key).toMatch(/^[0-9a-f]{64}$/)
  })

  it('differs with the salt, and with a salt against none', () => {
    const none = affinityKey({ messages: [system, user] })
    const s1 = affinityKey({ messages: [system, user], cache_salt: 's1' })
    const s2 = affinityKey({ messages: [system, user], cache_salt: 's2' })
    expect(new Set([none, s1, s2]).size).toBe(3)
    expect(affinityKey({ messages: [system, user], cache_salt: null })).toBe(none)
  })

  it('differs with the system prompt, the first user message or a role', () => {
    const base = affinityKey({ messages: [system, user] })
    expect(affinityKey({ messages: [{ ...system, content: 'Be terse.' }, user] })).not.toBe(base)
    expect(affinityKey({ messages: [system, { ...user, content: 'Translate this.' }] })).not.toBe(base)
    expect(affinityKey({ messages: [{ ...system, role: 'developer' }, user] })).not.toBe(base)
  })

  it('cannot be fooled by moving text across a message boundary or into the salt', () => {
    const split = (s: string, u: string, salt?: string) =>
      affinityKey({
        messages: [
          { role: 'system', content: s },
          { role: 'user', content: u },
        ],
        cache_salt: salt,
      })
    expect(split('ab', 'c')).not.toBe(split('a', 'bc'))
    expect(split('a","user', 'c')).not.toBe(split('a', 'c'))
    expect(split('x', 'y', 'ab')).not.toBe(split('bx', 'y', 'a'))
  })

  it('keys on every system/developer prompt before the first user message', () => {
    const two = [system, { role: 'developer', content: 'Answer in French.' }, user]
    const other = [system, { role: 'developer', content: 'Answer in German.' }, user]
    expect(affinityKey({ messages: two })).not.toBe(affinityKey({ messages: other }))
  })

  it('ignores everything after the first user message, whatever its role', () => {
    const base = affinityKey({ messages: [system, user] })
    expect(affinityKey({ messages: [system, user, { role: 'system', content: 'late' }] })).toBe(base)
    expect(affinityKey({ messages: [system, user, { role: 'user', content: 'second' }] })).toBe(base)
  })

  it('reads the text parts of a content-part array, as vLLM joins them', () => {
    const parts = {
      role: 'user',
      content: [
        { type: 'text', text: 'Describe' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        { type: 'text', text: 'this picture.' },
      ],
    }
    const text = { role: 'user', content: 'Describe\nthis picture.' }
    expect(affinityKey({ messages: [system, parts] })).toBe(affinityKey({ messages: [system, text] }))
    const otherImage = {
      ...parts,
      content: [parts.content[0], { type: 'image_url', image_url: { url: 'https://x/y.png' } }, parts.content[2]],
    }
    expect(affinityKey({ messages: [system, otherImage] })).toBe(affinityKey({ messages: [system, parts] }))
  })

  it('counts at most maxChars characters of prompt text, across messages', () => {
    const long = 'x'.repeat(10)
    const body = (s: string, u: string) =>
      affinityKey(
        {
          messages: [
            { role: 'system', content: s },
            { role: 'user', content: u },
          ],
        },
        12,
      )
    // 10 of system + 2 of user count.
    expect(body(long, 'abZZZ')).toBe(body(long, 'abYYY'))
    expect(body(long, 'abZ')).not.toBe(body(long, 'acZ'))
    // A system prompt longer than the budget decides alone.
    expect(body('y'.repeat(20), 'one')).toBe(body('y'.repeat(20), 'two'))
    // The default budget is 2048 characters.
    const big = 'z'.repeat(2048)
    expect(affinityKey({ messages: [{ role: 'system', content: big }, { role: 'user', content: 'a' }] })).toBe(
      affinityKey({ messages: [{ role: 'system', content: big }, { role: 'user', content: 'b' }] }),
    )
    expect(affinityKey({ messages: [{ role: 'system', content: big.slice(1) }, { role: 'user', content: 'a' }] })).not.toBe(
      affinityKey({ messages: [{ role: 'system', content: big.slice(1) }, { role: 'user', content: 'b' }] }),
    )
  })

  it('keys on a conversation without a user message too', () => {
    expect(affinityKey({ messages: [system] })).not.toBeNull()
  })

  it('is null when there is no prompt text to key on', () => {
    expect(affinityKey({})).toBeNull()
    expect(affinityKey({ messages: 'hello' })).toBeNull()
    expect(affinityKey({ messages: [] })).toBeNull()
    expect(affinityKey({ messages: [], cache_salt: 'salt' })).toBeNull()
    expect(affinityKey({ messages: [{ role: 'user', content: '' }] })).toBeNull()
    expect(affinityKey({ messages: [{ role: 'assistant', content: null }, 42, null] })).toBeNull()
    expect(
      affinityKey({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x' } }] }] }),
    ).toBeNull()
    expect(affinityKey({ messages: [user] }, 0)).toBeNull()
  })
})

describe('pickPrefixAffine', () => {
  it('sends the same key to the same backend on every call, whatever the candidate order', () => {
    for (const key of keys(50)) {
      const name = pickName(WEIGHTED, key)
      expect(pickName(WEIGHTED, key)).toBe(name)
      expect(pickName([...WEIGHTED].reverse(), key)).toBe(name)
    }
  })

  it('sends requests sharing a prompt prefix to the same backend', () => {
    const system = { role: 'system', content: 'You review pull requests.' }
    const names = new Set(
      ['diff one', 'diff two', 'diff three'].map((later) =>
        pickName(
          WEIGHTED,
          affinityKey({
            messages: [system, { role: 'user', content: 'Review PR 1' }, { role: 'assistant', content: later }],
          }),
        ),
      ),
    )
    expect(names.size).toBe(1)
  })

  it('spreads keys according to weights (chi-square over 10,000 keys)', () => {
    const total = WEIGHTED.reduce((sum, c) => sum + c.weight, 0)
    const got = new Map<string, number>()
    const sample = keys(10_000)
    for (const key of sample) {
      const name = pickName(WEIGHTED, key)
      got.set(name, (got.get(name) ?? 0) + 1)
    }
    let chiSquare = 0
    for (const c of WEIGHTED) {
      const expected = (sample.length * c.weight) / total
      const observed = got.get(c.name) ?? 0
      chiSquare += (observed - expected) ** 2 / expected
      expect(Math.abs(observed - expected) / expected).toBeLessThan(0.1)
    }
    // 3 degrees of freedom: 16.27 is the p = 0.001 critical value.
    expect(chiSquare).toBeLessThan(16.27)
  })

  it('spreads keys evenly over equal weights', () => {
    const equal = ['p', 'q', 'r', 's', 't'].map((name) => ({ name, weight: 1 }))
    const got = new Map<string, number>()
    for (const key of keys(10_000, 11)) {
      const name = pickName(equal, key)
      got.set(name, (got.get(name) ?? 0) + 1)
    }
    let chiSquare = 0
    for (const c of equal) chiSquare += ((got.get(c.name) ?? 0) - 2000) ** 2 / 2000
    // 4 degrees of freedom: 18.47 is the p = 0.001 critical value.
    expect(chiSquare).toBeLessThan(18.47)
  })

  it('moves only the keys of a removed backend, and spreads them over the rest', () => {
    const without = WEIGHTED.filter((c) => c.name !== 'c')
    const moved = new Map<string, number>()
    let onRemoved = 0
    for (const key of keys(10_000)) {
      const before = pickName(WEIGHTED, key)
      const after = pickName(without, key)
      if (before === 'c') {
        onRemoved++
        moved.set(after, (moved.get(after) ?? 0) + 1)
      } else {
        expect(after).toBe(before)
      }
    }
    expect(onRemoved).toBeGreaterThan(2500)
    // Its keys go to the others by weight (1:2:4 of its ~3,000).
    expect(moved.get('a')!).toBeGreaterThan(300)
    expect(moved.get('b')!).toBeGreaterThan(moved.get('a')!)
    expect(moved.get('d')!).toBeGreaterThan(moved.get('b')!)
  })

  it('moves only about weight/total of the keys when a backend is added, all to it', () => {
    const withE = [...WEIGHTED, { name: 'e', weight: 2 }]
    const sample = keys(10_000)
    let movedCount = 0
    for (const key of sample) {
      const before = pickName(WEIGHTED, key)
      const after = pickName(withE, key)
      if (after !== before) {
        movedCount++
        expect(after).toBe('e')
      }
    }
    const expected = sample.length * (2 / 12)
    expect(Math.abs(movedCount - expected) / expected).toBeLessThan(0.1)
  })

  it('ranks candidates so that dropping the first gives the second', () => {
    for (const key of keys(200)) {
      const rank = rankByAffinity(WEIGHTED, key)
      expect([...rank].sort()).toEqual([0, 1, 2, 3])
      expect(rank[0]).toBe(pickPrefixAffine(WEIGHTED, IDLE, { affinityKey: key }, noRng))
      const rest = WEIGHTED.filter((_, i) => i !== rank[0])
      expect(pickName(rest, key)).toBe(WEIGHTED[rank[1]!]!.name)
    }
  })

  describe('bounded load', () => {
    const EQUAL = ['a', 'b', 'c'].map((name) => ({ name, weight: 1 }))
    const key = keys(1, 3)[0]!
    const order = rankByAffinity(EQUAL, key).map((i) => EQUAL[i]!.name)
    const [first, second, third] = order as [string, string, string]

    it('keeps the hashed backend while it is within max(1.5 x average, average + 2)', () => {
      // Average 5/3: the bound is 3.67.
      expect(pickName(EQUAL, key, inFlight({ [first]: 3, [second]: 1, [third]: 1 }))).toBe(first)
      // Average 2: the bound is 4.
      expect(pickName(EQUAL, key, inFlight({ [first]: 4, [second]: 1, [third]: 1 }))).toBe(first)
      // Idle: the bound is 2 (the slack), so a lone request or two stay put.
      expect(pickName(EQUAL, key, inFlight({ [first]: 2 }))).toBe(first)
    })

    it('moves to the next in hash order when the hashed one has 10 in flight and the others none', () => {
      expect(pickName(EQUAL, key, inFlight({ [first]: 10, [second]: 0, [third]: 0 }))).toBe(second)
      // Deterministic: the same on every call, not the least loaded at random.
      for (let i = 0; i < 20; i++) {
        expect(pickName(EQUAL, key, inFlight({ [first]: 10 }), seeded(i))).toBe(second)
      }
    })

    it('passes over every overloaded backend in hash order', () => {
      const four = [...EQUAL, { name: 'd', weight: 1 }]
      const ranked = rankByAffinity(four, key).map((i) => four[i]!.name)
      // Average 5: the bound is 7.5.
      const stats = inFlight({ [ranked[0]!]: 10, [ranked[1]!]: 10, [ranked[2]!]: 0, [ranked[3]!]: 0 })
      expect(pickName(four, key, stats)).toBe(ranked[2])
    })

    it('lets a heavier backend carry its weighted share before passing it over', () => {
      const candidates = [
        { name: 'heavy', weight: 3 },
        { name: 'light', weight: 2 },
      ]
      const heavyKey = keys(100, 5).find((k) => pickName(candidates, k) === 'heavy')!
      // 10 in flight: heavy's share is 6, its bound 9 (the unweighted average, 5, would bound it at 7.5).
      expect(pickName(candidates, heavyKey, inFlight({ heavy: 8, light: 2 }))).toBe('heavy')
      expect(pickName(candidates, heavyKey, inFlight({ heavy: 9, light: 1 }))).toBe('heavy')
      // Alone with everything: 5 is within max(0.9 x 5, 3 + 2); 6 is not.
      expect(pickName(candidates, heavyKey, inFlight({ heavy: 5, light: 0 }))).toBe('heavy')
      expect(pickName(candidates, heavyKey, inFlight({ heavy: 6, light: 0 }))).toBe('light')
    })

    it('never passes over a backend with more than 1/loadFactor of the weight on load alone', () => {
      // Its bound, 1.5 x 3/4 of all in flight, is at least all in flight: only the
      // per-backend concurrency cap (which removes it from the candidates) moves its keys.
      const candidates = [
        { name: 'heavy', weight: 3 },
        { name: 'light', weight: 1 },
      ]
      const heavyKey = keys(100, 5).find((k) => pickName(candidates, k) === 'heavy')!
      expect(pickName(candidates, heavyKey, inFlight({ heavy: 60, light: 0 }))).toBe('heavy')
    })

    it('honours other load options', () => {
      // No slack and factor 1: anything above the average moves.
      const strict = { loadFactor: 1, minSlack: 0 }
      const stats = inFlight({ [first]: 2, [second]: 1, [third]: 1 })
      const pick = pickPrefixAffine(EQUAL, stats, { affinityKey: key }, noRng, strict)
      expect(EQUAL[pick]!.name).toBe(second)
    })

    it('falls back to the least loaded when no candidate is within its bound', () => {
      const impossible = { loadFactor: 0, minSlack: -1 }
      const stats = inFlight({ [first]: 0, [second]: 3, [third]: 1 })
      const pick = pickPrefixAffine(EQUAL, stats, { affinityKey: key }, seeded(1), impossible)
      expect(EQUAL[pick]!.name).toBe(first)
      const busy = inFlight({ [first]: 5, [second]: 3, [third]: 1 })
      expect(EQUAL[pickPrefixAffine(EQUAL, busy, { affinityKey: key }, seeded(1), impossible)]!.name).toBe(third)
    })
  })

  it('falls back to least loaded when there is no key', () => {
    const candidates = ['a', 'b', 'c'].map((name) => ({ name, weight: 1 }))
    const stats = inFlight({ a: 3, b: 0, c: 1 })
    expect(pickName(candidates, null, stats)).toBe('b')
    // Ties are drawn at random, as least loaded does.
    for (let seed = 0; seed < 10; seed++) {
      expect(pickPrefixAffine(candidates, IDLE, { affinityKey: null }, seeded(seed))).toBe(
        pickLeastLoaded(candidates, IDLE, seeded(seed)),
      )
    }
  })

  it('always picks a single candidate', () => {
    expect(pickPrefixAffine([{ name: 'only', weight: 1 }], inFlight({ only: 50 }), { affinityKey: 'k' }, noRng)).toBe(0)
  })

  it('refuses an empty candidate list', () => {
    expect(() => pickPrefixAffine([], IDLE, { affinityKey: 'k' }, noRng)).toThrow(/at least one candidate/)
  })
})

describe('1,000 conversations over 4 backends, then one removed', () => {
  const FOUR = [
    { name: 'g1', weight: 1 },
    { name: 'g2', weight: 1 },
    { name: 'g3', weight: 1 },
    { name: 'g4', weight: 1 },
  ]
  const conversations = Array.from({ length: 1000 }, (_, i) => ({
    messages: [
      { role: 'system', content: `You are assistant number ${i}.` },
      { role: 'user', content: `Opening question ${i * 7919}` },
    ],
  }))

  it('moves exactly the conversations of the removed backend', () => {
    const before = conversations.map((c) => pickName(FOUR, affinityKey(c)))
    const after = conversations.map((c) => pickName(FOUR.filter((b) => b.name !== 'g2'), affinityKey(c)))
    const moved = new Set(conversations.map((_, i) => i).filter((i) => before[i] !== after[i]))
    const onRemoved = new Set(conversations.map((_, i) => i).filter((i) => before[i] === 'g2'))
    expect(onRemoved.size).toBeGreaterThan(150)
    expect(moved).toEqual(onRemoved)
  })

  it('keeps every later turn of a conversation on its backend (the key ignores what follows the first user message)', () => {
    for (const conversation of conversations.slice(0, 100)) {
      const first = pickName(FOUR, affinityKey(conversation))
      const later = { messages: [...conversation.messages, { role: 'assistant', content: 'An answer' }, { role: 'user', content: 'A follow-up' }] }
      expect(pickName(FOUR, affinityKey(later))).toBe(first)
    }
  })
})
