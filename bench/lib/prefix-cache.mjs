// The prefix cache of a simulated vLLM server: an LRU of prompt prefixes cut
// at message boundaries. A prefix is known by the hash of the messages up to
// that boundary (chained: each boundary's hash covers the previous one and
// the next message, which is the hash of their concatenation without
// re-reading it). A lookup walks the boundaries from the shortest and stops
// at the first one not cached, as a block-level prefix cache does: a longer
// prefix is of no use without the shorter one before it.
import { createHash } from 'node:crypto'

/** Text of a message content: a string, or the text parts of a part list joined by "\n". */
function textOf(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('\n')
}

function nextBoundary(previous, message) {
  const role = typeof message?.role === 'string' ? message.role : ''
  const text = textOf(message?.content)
  const hash = createHash('sha256').update(`${previous.hash}\0${role}\0${text.length}\0${text}`).digest('base64')
  return { hash, chars: previous.chars + text.length }
}

/** One entry per message: the hash of everything up to and including it, and its length in characters. */
export function prefixBoundaries(messages) {
  const boundaries = []
  let previous = { hash: '', chars: 0 }
  for (const message of Array.isArray(messages) ? messages : []) {
    previous = nextBoundary(previous, message)
    boundaries.push(previous)
  }
  return boundaries
}

/** The boundaries one message further: the prompt followed by the answer the server generated for it. */
export function extendBoundaries(boundaries, message) {
  return [...boundaries, nextBoundary(boundaries.at(-1) ?? { hash: '', chars: 0 }, message)]
}

export class PrefixCache {
  /** hash -> characters of the prefix; Map order is recency order, oldest first. */
  #entries = new Map()
  #capacity

  constructor(capacity) {
    this.#capacity = capacity
  }

  get size() {
    return this.#entries.size
  }

  get capacity() {
    return this.#capacity
  }

  /** Characters of the longest cached prefix (0 when even the first message is not cached). */
  lookup(boundaries) {
    let cached = 0
    for (const boundary of boundaries) {
      if (!this.#entries.has(boundary.hash)) break
      cached = boundary.chars
    }
    return cached
  }

  /**
   * Marks every boundary as just used. Longest first, so the shortest
   * prefixes (the system prompt every turn shares) are the most recent and
   * evicted last, as vLLM evicts the tail blocks of a sequence first.
   */
  touch(boundaries) {
    for (let i = boundaries.length - 1; i >= 0; i--) {
      const { hash, chars } = boundaries[i]
      this.#entries.delete(hash)
      this.#entries.set(hash, chars)
    }
    while (this.#entries.size > this.#capacity) this.#entries.delete(this.#entries.keys().next().value)
  }
}
