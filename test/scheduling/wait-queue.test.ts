import { describe, it, expect } from 'vitest'
import { WaitQueue, evictedBefore, servedBefore, type QueueEntry } from '../../src/scheduling/wait-queue.js'
import { seeded } from '../support/seeded-random.js'

interface Entry extends QueueEntry {
  readonly label: string
}

function entry(priority: number, seq: number, label = `p${priority}#${seq}`): Entry {
  return { priority, seq, label, positions: new Map() }
}


/** The model's own orders, written out independently of the code under test. */
function modelServed(a: Entry, b: Entry): boolean {
  return a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq)
}
function modelEvicted(a: Entry, b: Entry): boolean {
  return a.priority > b.priority || (a.priority === b.priority && a.seq > b.seq)
}

/** The model's answer: the entry that no other entry comes before. */
function first(entries: readonly Entry[], before: (a: Entry, b: Entry) => boolean): Entry | undefined {
  let best: Entry | undefined
  for (const e of entries) if (best === undefined || before(e, best)) best = e
  return best
}

/** Fills a queue from [priority, label] pairs in arrival order. */
function queueOf(pairs: ReadonlyArray<readonly [number, string]>): { queue: WaitQueue<Entry>; entries: Entry[] } {
  const queue = new WaitQueue<Entry>()
  const entries = pairs.map(([priority, label], seq) => entry(priority, seq, label))
  for (const e of entries) queue.push(e)
  return { queue, entries }
}

describe('servedBefore / evictedBefore', () => {
  it('serves the lower priority number first, then the earlier arrival', () => {
    expect(servedBefore(entry(-3, 9), entry(0, 1))).toBe(true)
    expect(servedBefore(entry(0, 1), entry(-3, 9))).toBe(false)
    expect(servedBefore(entry(2, 1), entry(2, 4))).toBe(true)
    expect(servedBefore(entry(2, 4), entry(2, 1))).toBe(false)
  })

  it('evicts the higher priority number first, then the later arrival', () => {
    expect(evictedBefore(entry(5, 0), entry(0, 9))).toBe(true)
    expect(evictedBefore(entry(0, 9), entry(5, 0))).toBe(false)
    expect(evictedBefore(entry(5, 4), entry(5, 1))).toBe(true)
    expect(evictedBefore(entry(5, 1), entry(5, 4))).toBe(false)
  })

  it('is irreflexive: an entry is never before itself', () => {
    const e = entry(1, 1)
    expect(servedBefore(e, e)).toBe(false)
    expect(evictedBefore(e, e)).toBe(false)
  })
})

describe('WaitQueue', () => {
  it('is empty at first', () => {
    const queue = new WaitQueue<Entry>()
    expect(queue.size).toBe(0)
    expect(queue.peek()).toBeUndefined()
    expect(queue.worst()).toBeUndefined()
    expect(queue.shift()).toBeUndefined()
    expect(queue.drain()).toEqual([])
  })

  it('serves by priority then arrival: 5, 0, 5, -3, 0 come out -3, 0, 0, 5, 5', () => {
    const { queue } = queueOf([
      [5, 'a'],
      [0, 'b'],
      [5, 'c'],
      [-3, 'd'],
      [0, 'e'],
    ])
    expect(queue.peek()?.label).toBe('d')
    expect(queue.drain().map((e) => e.label)).toEqual(['d', 'b', 'e', 'a', 'c'])
    expect(queue.size).toBe(0)
    expect(queue.worst()).toBeUndefined()
  })

  it('names as worst the newest entry of the worst priority present', () => {
    const { queue } = queueOf([
      [5, 'a'],
      [0, 'b'],
      [5, 'c'],
      [-3, 'd'],
      [0, 'e'],
    ])
    expect(queue.worst()?.label).toBe('c')
    // Serving does not disturb it while it waits...
    queue.shift()
    expect(queue.worst()?.label).toBe('c')
    // ...and once it goes, the older entry of the same priority is next.
    const c = queue.worst()!
    expect(queue.remove(c)).toBe(true)
    expect(queue.worst()?.label).toBe('a')
  })

  it('shift also forgets the entry as a candidate for eviction', () => {
    const { queue } = queueOf([
      [1, 'only-low'],
      [0, 'high'],
    ])
    expect(queue.worst()?.label).toBe('only-low')
    expect(queue.shift()?.label).toBe('high')
    expect(queue.shift()?.label).toBe('only-low')
    expect(queue.worst()).toBeUndefined()
  })

  it('removes a waiter from the middle: neither served nor named worst afterwards', () => {
    const { queue, entries } = queueOf([
      [1, 'a'],
      [2, 'b'],
      [3, 'c'],
    ])
    expect(queue.remove(entries[2]!)).toBe(true)
    expect(queue.worst()?.label).toBe('b')
    expect(queue.remove(entries[0]!)).toBe(true)
    expect(queue.peek()?.label).toBe('b')
    expect(queue.size).toBe(1)
    expect(queue.remove(entries[0]!)).toBe(false)
    expect(queue.drain().map((e) => e.label)).toEqual(['b'])
  })

  it('treats negative and large priorities as plain numbers', () => {
    const { queue } = queueOf([
      [1_000_000, 'huge'],
      [-1_000_000, 'tiny'],
      [0, 'zero'],
    ])
    expect(queue.peek()?.label).toBe('tiny')
    expect(queue.worst()?.label).toBe('huge')
  })

  it.each([11, 12, 13])('matches a model for peek and worst over thousands of random operations (seed %i)', (seed) => {
    const random = seeded(seed)
    const queue = new WaitQueue<Entry>()
    let model: Entry[] = []
    let seq = 0
    for (let step = 0; step < 5000; step++) {
      const roll = random()
      if (roll < 0.5 || model.length === 0) {
        const e = entry(Math.floor(random() * 7) - 3, seq++)
        queue.push(e)
        model.push(e)
      } else if (roll < 0.7) {
        const expected = first(model, modelServed)
        expect(queue.shift()).toBe(expected)
        model = model.filter((e) => e !== expected)
      } else if (roll < 0.8) {
        // A full queue turning away its worst.
        const expected = first(model, modelEvicted)
        expect(queue.worst()).toBe(expected)
        expect(queue.remove(expected!)).toBe(true)
        model = model.filter((e) => e !== expected)
      } else {
        // A waiter that timed out or whose client left.
        const victim = model[Math.floor(random() * model.length)]!
        expect(queue.remove(victim)).toBe(true)
        model = model.filter((e) => e !== victim)
      }
      expect(queue.size).toBe(model.length)
      expect(queue.peek()).toBe(first(model, modelServed))
      expect(queue.worst()).toBe(first(model, modelEvicted))
    }
    const order = [...model].sort((a, b) => a.priority - b.priority || a.seq - b.seq)
    expect(queue.drain()).toEqual(order)
    expect(queue.size).toBe(0)
    expect(queue.worst()).toBeUndefined()
  })

  it('stays correct at 10,000 waiters with half leaving from arbitrary positions', () => {
    const random = seeded(99)
    const queue = new WaitQueue<Entry>()
    const entries = Array.from({ length: 10_000 }, (_, seq) => entry(Math.floor(random() * 50), seq))
    for (const e of entries) queue.push(e)
    const gone = new Set<Entry>()
    while (gone.size < 5000) {
      const victim = entries[Math.floor(random() * entries.length)]!
      expect(queue.remove(victim)).toBe(!gone.has(victim))
      gone.add(victim)
    }
    const left = entries.filter((e) => !gone.has(e))
    expect(queue.size).toBe(5000)
    expect(queue.worst()).toBe(first(left, modelEvicted))
    const drained = queue.drain()
    expect(drained).toEqual([...left].sort((a, b) => a.priority - b.priority || a.seq - b.seq))
    // Drained entries are out of both heaps.
    expect(drained.every((e) => e.positions.size === 0)).toBe(true)
  })
})
