/**
 * A binary heap whose entries know their position, so any entry (a waiter
 * that timed out or whose client left) is removed in O(log n), not O(n).
 */

export interface HeapEntry {
  /** Position in each heap holding the entry, keyed by heap. Managed by the heap. */
  readonly positions: Map<IndexedHeap<HeapEntry>, number>
}

export class IndexedHeap<T extends HeapEntry> {
  readonly #items: T[] = []
  /** True when `a` must come out before `b`. */
  readonly #before: (a: T, b: T) => boolean

  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before
  }

  get size(): number {
    return this.#items.length
  }

  peek(): T | undefined {
    return this.#items[0]
  }

  push(entry: T): void {
    this.#items.push(entry)
    this.#place(entry, this.#items.length - 1)
    this.#up(this.#items.length - 1)
  }

  pop(): T | undefined {
    const top = this.#items[0]
    if (top !== undefined) this.remove(top)
    return top
  }

  has(entry: T): boolean {
    return entry.positions.has(this as unknown as IndexedHeap<HeapEntry>)
  }

  remove(entry: T): boolean {
    const index = entry.positions.get(this as unknown as IndexedHeap<HeapEntry>)
    if (index === undefined) return false
    const last = this.#items.pop()!
    entry.positions.delete(this as unknown as IndexedHeap<HeapEntry>)
    if (index < this.#items.length) {
      this.#place(last, index)
      this.#down(index)
      this.#up(index)
    }
    return true
  }

  #place(entry: T, index: number): void {
    this.#items[index] = entry
    entry.positions.set(this as unknown as IndexedHeap<HeapEntry>, index)
  }

  #up(index: number): void {
    let i = index
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.#before(this.#items[i]!, this.#items[parent]!)) break
      this.#swap(i, parent)
      i = parent
    }
  }

  #down(index: number): void {
    let i = index
    for (;;) {
      const left = 2 * i + 1
      const right = left + 1
      let first = i
      if (left < this.#items.length && this.#before(this.#items[left]!, this.#items[first]!)) first = left
      if (right < this.#items.length && this.#before(this.#items[right]!, this.#items[first]!)) first = right
      if (first === i) return
      this.#swap(i, first)
      i = first
    }
  }

  #swap(a: number, b: number): void {
    const [x, y] = [this.#items[a]!, this.#items[b]!]
    this.#place(y, a)
    this.#place(x, b)
  }
}
