/**
 * A model's queue of waiting requests: lowest `priority` first, then
 * arrival (interface.md: "Lower means handled earlier"). A second heap keeps
 * the worst entry (highest priority number, newest arrival) at hand, because
 * a full queue turns that one away (DESIGN.md chat path step 2).
 */
import { IndexedHeap, type HeapEntry } from './indexed-heap.js'

export interface QueueEntry extends HeapEntry {
  readonly priority: number
  /** Arrival order, unique and increasing. */
  readonly seq: number
}

/** Head order: lower priority number first, then earlier arrival. */
export function servedBefore(a: QueueEntry, b: QueueEntry): boolean {
  return a.priority !== b.priority ? a.priority < b.priority : a.seq < b.seq
}

/** Eviction order: the newest request of the worst priority present comes out first. */
export function evictedBefore(a: QueueEntry, b: QueueEntry): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.seq > b.seq
}

export class WaitQueue<T extends QueueEntry> {
  readonly #head = new IndexedHeap<T>(servedBefore)
  readonly #tail = new IndexedHeap<T>(evictedBefore)

  get size(): number {
    return this.#head.size
  }

  /** The next to serve. */
  peek(): T | undefined {
    return this.#head.peek()
  }

  /** The one a full queue turns away first. */
  worst(): T | undefined {
    return this.#tail.peek()
  }

  push(entry: T): void {
    this.#head.push(entry)
    this.#tail.push(entry)
  }

  shift(): T | undefined {
    const entry = this.#head.pop()
    if (entry !== undefined) this.#tail.remove(entry)
    return entry
  }

  remove(entry: T): boolean {
    const removed = this.#head.remove(entry)
    this.#tail.remove(entry)
    return removed
  }

  /** Empties the queue, returning the entries in serving order. */
  drain(): T[] {
    const out: T[] = []
    for (let entry = this.shift(); entry !== undefined; entry = this.shift()) out.push(entry)
    return out
  }
}
