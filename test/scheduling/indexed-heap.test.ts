import { describe, it, expect } from 'vitest'
import { IndexedHeap, type HeapEntry } from '../../src/scheduling/indexed-heap.js'
import { seeded } from '../support/seeded-random.js'

interface Item extends HeapEntry {
  readonly key: number
  /** Tie-breaker, unique: makes the expected order total. */
  readonly id: number
}

function item(key: number, id: number): Item {
  return { key, id, positions: new Map() }
}

const lessThan = (a: Item, b: Item): boolean => (a.key !== b.key ? a.key < b.key : a.id < b.id)
const compare = (a: Item, b: Item): number => (lessThan(a, b) ? -1 : lessThan(b, a) ? 1 : 0)


function smallest(items: readonly Item[]): Item | undefined {
  let best: Item | undefined
  for (const i of items) if (best === undefined || lessThan(i, best)) best = i
  return best
}

function drain(heap: IndexedHeap<Item>): Item[] {
  const out: Item[] = []
  for (let next = heap.pop(); next !== undefined; next = heap.pop()) out.push(next)
  return out
}

describe('IndexedHeap', () => {
  it('is empty at first', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    expect(heap.size).toBe(0)
    expect(heap.peek()).toBeUndefined()
    expect(heap.pop()).toBeUndefined()
  })

  it('pops in comparator order whatever the push order', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    const keys = [5, 3, 8, 1, 9, 2, 7, 3, 0, 6]
    keys.forEach((key, id) => heap.push(item(key, id)))
    expect(heap.size).toBe(keys.length)
    expect(heap.peek()?.key).toBe(0)
    const popped = drain(heap)
    expect(popped.map((i) => i.key)).toEqual([0, 1, 2, 3, 3, 5, 6, 7, 8, 9])
    // The comparator's tie-break is honoured: id 1 (pushed first) before id 7.
    expect(popped.filter((i) => i.key === 3).map((i) => i.id)).toEqual([1, 7])
    expect(heap.size).toBe(0)
  })

  it('removes an arbitrary entry and keeps the rest in order', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    const items = [4, 1, 6, 2, 8, 3, 7].map((key, id) => item(key, id))
    items.forEach((i) => heap.push(i))
    const middle = items[0]! // key 4
    expect(heap.remove(middle)).toBe(true)
    expect(heap.has(middle)).toBe(false)
    expect(heap.size).toBe(6)
    expect(drain(heap).map((i) => i.key)).toEqual([1, 2, 3, 6, 7, 8])
  })

  it('removes the top, the last slot and the only entry', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    const items = [3, 1, 2].map((key, id) => item(key, id))
    items.forEach((i) => heap.push(i))
    expect(heap.remove(items[1]!)).toBe(true) // the top (key 1)
    expect(heap.peek()?.key).toBe(2)
    expect(heap.remove(items[0]!)).toBe(true)
    expect(heap.remove(items[2]!)).toBe(true)
    expect(heap.size).toBe(0)
    expect(heap.peek()).toBeUndefined()
  })

  it('answers false when removing an entry it does not hold, or one already removed', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    const held = item(1, 0)
    const stranger = item(0, 1)
    heap.push(held)
    expect(heap.has(stranger)).toBe(false)
    expect(heap.remove(stranger)).toBe(false)
    expect(heap.remove(held)).toBe(true)
    expect(heap.remove(held)).toBe(false)
    expect(heap.size).toBe(0)
  })

  it('lets one entry sit in two heaps with different orders, tracked separately', () => {
    const ascending = new IndexedHeap<Item>(lessThan)
    const descending = new IndexedHeap<Item>((a, b) => lessThan(b, a))
    const items = [5, 2, 9, 1, 7].map((key, id) => item(key, id))
    for (const i of items) {
      ascending.push(i)
      descending.push(i)
    }
    expect(ascending.peek()?.key).toBe(1)
    expect(descending.peek()?.key).toBe(9)
    // Removing from one heap leaves the entry in the other.
    const nine = items[2]!
    expect(descending.remove(nine)).toBe(true)
    expect(descending.has(nine)).toBe(false)
    expect(ascending.has(nine)).toBe(true)
    expect(drain(ascending).map((i) => i.key)).toEqual([1, 2, 5, 7, 9])
    expect(drain(descending).map((i) => i.key)).toEqual([7, 5, 2, 1])
  })

  it('can take an entry back after it was popped', () => {
    const heap = new IndexedHeap<Item>(lessThan)
    const a = item(1, 0)
    const b = item(2, 1)
    heap.push(a)
    heap.push(b)
    expect(heap.pop()).toBe(a)
    heap.push(a)
    expect(heap.has(a)).toBe(true)
    expect(drain(heap)).toEqual([a, b])
  })

  it.each([1, 2, 3, 42, 2024])('matches a sorted-array model over thousands of random operations (seed %i)', (seed) => {
    const random = seeded(seed)
    const heap = new IndexedHeap<Item>(lessThan)
    let model: Item[] = []
    let nextId = 0
    for (let step = 0; step < 4000; step++) {
      const roll = random()
      if (roll < 0.5 || model.length === 0) {
        // Few distinct keys, so ties are common.
        const entry = item(Math.floor(random() * 20) - 10, nextId++)
        heap.push(entry)
        model.push(entry)
      } else if (roll < 0.7) {
        const expected = smallest(model)
        const popped = heap.pop()
        expect(popped).toBe(expected)
        model = model.filter((i) => i !== expected)
      } else {
        const victim = model[Math.floor(random() * model.length)]!
        expect(heap.remove(victim)).toBe(true)
        expect(heap.has(victim)).toBe(false)
        model = model.filter((i) => i !== victim)
      }
      expect(heap.size).toBe(model.length)
      expect(heap.peek()).toBe(smallest(model))
    }
    expect(drain(heap)).toEqual([...model].sort(compare))
  })

  it('stays correct at 10,000 entries with half removed from arbitrary positions', () => {
    const random = seeded(7)
    const heap = new IndexedHeap<Item>(lessThan)
    const items = Array.from({ length: 10_000 }, (_, id) => item(Math.floor(random() * 1000), id))
    for (const i of items) heap.push(i)
    expect(heap.size).toBe(10_000)
    const removed = new Set<Item>()
    while (removed.size < 5000) {
      const victim = items[Math.floor(random() * items.length)]!
      if (removed.has(victim)) {
        expect(heap.remove(victim)).toBe(false)
        continue
      }
      expect(heap.remove(victim)).toBe(true)
      removed.add(victim)
    }
    expect(heap.size).toBe(5000)
    const rest = drain(heap)
    expect(rest).toEqual(items.filter((i) => !removed.has(i)).sort(compare))
    expect(rest.every((i) => i.positions.size === 0)).toBe(true)
  })
})
