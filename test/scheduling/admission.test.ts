import { describe, it, expect } from 'vitest'
import { backendsWithRoom, comesBefore, decideArrival, peerEvictedInstead, remainingWaitMs, retryAfterSeconds } from '../../src/scheduling/admission.js'
import type { QueueEntry } from '../../src/scheduling/wait-queue.js'

interface Entry extends QueueEntry {
  readonly label: string
}

function entry(priority: number, seq: number, label = `p${priority}#${seq}`): Entry {
  return { priority, seq, label, positions: new Map() }
}

describe('decideArrival', () => {
  it('queues while there is room, whatever is waiting', () => {
    expect(decideArrival(0, 10, undefined, entry(5, 0))).toEqual({ kind: 'queue' })
    expect(decideArrival(9, 10, entry(-5, 3), entry(100, 20))).toEqual({ kind: 'queue' })
  })

  it('turns the arriving request away when the queue is full and it is the worst', () => {
    expect(decideArrival(3, 3, entry(2, 1), entry(5, 9))).toEqual({ kind: 'reject' })
  })

  it('evicts a waiter of a worse priority to make room for the arriving one', () => {
    const worse = entry(5, 1, 'waiting-worse')
    const decision = decideArrival(3, 3, worse, entry(0, 9))
    expect(decision).toEqual({ kind: 'evict-and-queue', evicted: worse })
    // The very entry, not a copy: the caller rejects that waiter's promise.
    expect(decision.kind === 'evict-and-queue' && decision.evicted).toBe(worse)
  })

  it('on a priority tie turns away the arriving one (the newest)', () => {
    expect(decideArrival(3, 3, entry(2, 1), entry(2, 9))).toEqual({ kind: 'reject' })
  })

  it('evicts for an arrival better by one, even at negative priorities', () => {
    const worse = entry(-2, 4)
    expect(decideArrival(1, 1, worse, entry(-3, 5))).toEqual({ kind: 'evict-and-queue', evicted: worse })
  })

  it('rejects when the queue is over its size (a smaller limit after reload)', () => {
    expect(decideArrival(7, 5, entry(9, 1), entry(9, 8))).toEqual({ kind: 'reject' })
  })

  it('rejects everything when the queue may hold nothing', () => {
    expect(decideArrival(0, 0, undefined, entry(-100, 0))).toEqual({ kind: 'reject' })
  })
})

describe('backendsWithRoom', () => {
  const backends = ['a', 'b', 'c', 'd'] as const
  const load: Record<string, number> = { a: 0, b: 2, c: 1, d: 3 }

  it('keeps usable backends below the slot count, in their configured order', () => {
    expect(backendsWithRoom(backends, (b) => load[b]!, () => true, () => 2)).toEqual(['a', 'c'])
  })

  it('drops unusable backends even when they have room', () => {
    expect(backendsWithRoom(backends, (b) => load[b]!, (b) => b !== 'a', () => 2)).toEqual(['c'])
  })

  it('is empty when every backend is full or unusable', () => {
    expect(backendsWithRoom(backends, (b) => load[b]!, () => true, () => 1)).toEqual(['a'])
    expect(backendsWithRoom(backends, (b) => load[b]!, (b) => b !== 'a', () => 1)).toEqual([])
    expect(backendsWithRoom([], () => 0, () => true, () => 5)).toEqual([])
  })

  it('treats a backend over its slots (after a smaller limit) as full', () => {
    expect(backendsWithRoom(['x'], () => 9, () => true, () => 4)).toEqual([])
  })
})

describe('retryAfterSeconds', () => {
  it.each([
    [0, 1],
    [1, 1],
    [999, 1],
    [1000, 1],
    [1001, 2],
    [20_000, 20],
    [20_001, 21],
    [59_999.5, 60],
  ])('%s ms → %s s', (ms, seconds) => {
    expect(retryAfterSeconds(ms)).toBe(seconds)
  })

  it('never says less than 1, even for a negative wait', () => {
    expect(retryAfterSeconds(-5000)).toBe(1)
  })
})

describe('remainingWaitMs', () => {
  it('is the limit less the time waited since the first arrival, never below 0', () => {
    expect(remainingWaitMs(1000, 5000, 1000)).toBe(5000)
    expect(remainingWaitMs(1000, 5000, 4000)).toBe(2000)
    expect(remainingWaitMs(1000, 5000, 6000)).toBe(0)
    expect(remainingWaitMs(1000, 5000, 9000)).toBe(0)
  })
})

describe('comesBefore (two queues of one model)', () => {
  it('orders by priority, then arrival; the same millisecond puts neither first', () => {
    expect(comesBefore({ priority: -1, arrivedAt: 500 }, { priority: 0, arrivedAt: 100 })).toBe(true)
    expect(comesBefore({ priority: 0, arrivedAt: 100 }, { priority: 0, arrivedAt: 200 })).toBe(true)
    expect(comesBefore({ priority: 0, arrivedAt: 200 }, { priority: 0, arrivedAt: 100 })).toBe(false)
    expect(comesBefore({ priority: 0, arrivedAt: 100 }, { priority: 0, arrivedAt: 100 })).toBe(false)
  })
})

describe('peerEvictedInstead (two queues of one model, full together)', () => {
  const rank = (priority: number, arrivedAt: number) => ({ priority, arrivedAt })

  it('turns the other queue\'s worst away when it is worse than the arriving request and than this queue\'s choice', () => {
    expect(peerEvictedInstead(rank(5, 100), undefined, rank(0, 200))).toBe(true)
    expect(peerEvictedInstead(rank(5, 100), rank(3, 150), rank(0, 200))).toBe(true)
    expect(peerEvictedInstead(rank(5, 100), rank(5, 150), rank(0, 200))).toBe(false)
  })

  it('keeps it when the arriving request is as bad or worse: the newest of the worst goes', () => {
    expect(peerEvictedInstead(rank(5, 100), undefined, rank(5, 200))).toBe(false)
    expect(peerEvictedInstead(rank(5, 100), undefined, rank(5, 100))).toBe(false)
    expect(peerEvictedInstead(rank(0, 100), undefined, rank(5, 200))).toBe(false)
  })
})
