/**
 * How many distinct object layouts JSON text holds: a layout is an object's
 * member names in order up to some member, so `{"a":1,"b":2}` and
 * `{"a":3,"c":4}` hold three (a; a,b; a,c). V8 gives every new layout its
 * own hidden class while parsing, and that, not bytes, is what makes
 * parsing slow: 7 MiB of 60,000 objects with distinct names held the event
 * loop for 1.3 s, and 100,000 objects made of 6 of 26 one-letter names in
 * shuffled order for 0.5 s, while 600,000 members in repeated layouts take
 * 50 ms. Real bodies repeat a few layouts (messages, tools, logprobs).
 *
 * Layouts are told apart by a seeded 52-bit hash of the names so far (two
 * FNV-style 32-bit states, the second cut to 20 bits, so the pair is one
 * exact double): two layouts share one with odds of ~1e-6 at 131,072, and
 * a collision only makes the count fall short by one. The seeds are per
 * process, so a body cannot be made to collide in advance. Names are
 * hashed as written: `"\u0061"` and `"a"` count as two layouts though V8
 * makes one, which can only refuse a body sooner, never let one through.
 * Names that are array indices (`"0"`, `"50256"`) are not counted: V8 keeps
 * them apart from the hidden class.
 */
import { randomInt } from 'node:crypto'
import { CLOSE_BRACE, CLOSE_BRACKET, closingQuote, COMMA, isDigit, OPEN_BRACE, OPEN_BRACKET, QUOTE, ZERO } from './json-bytes.js'
import { MAX_DEPTH } from './json-limits.js'

/** Bytes of `body_limit_bytes` per distinct object layout a body may hold (131,072 for 8 MiB). */
export const BYTES_PER_LAYOUT = 64

/** The fewest bytes a new layout takes: `"":0,` with a new name is 5, so a shorter body cannot exceed a cap of length / 5. */
const FEWEST_BYTES_PER_LAYOUT = 5

const FNV_PRIME = 16777619
const MURMUR_MULTIPLIER = 0x5bd1e995
const SEEDS = [randomInt(2 ** 32) | 0, randomInt(2 ** 32) | 0] as const
const LOW_WORD = 2 ** 32
const HIGH_BITS = 0xfffff

/**
 * The number of distinct layouts in `raw`, counted up to `most + 1` (one
 * over is enough to refuse). Text too short to exceed `most` is not
 * scanned. Text nested deeper than MAX_DEPTH is counted only above it: it
 * is refused for its depth anyway.
 */
export function countObjectLayouts(raw: Buffer, most: number): number {
  if (raw.length <= most * FEWEST_BYTES_PER_LAYOUT) return 0
  const seen = new Set<number>()
  // Each open container, by depth: whether it is an object, and the two hash states of its layout so far.
  const isObject = new Uint8Array(MAX_DEPTH + 2)
  const low = new Int32Array(MAX_DEPTH + 2)
  const high = new Int32Array(MAX_DEPTH + 2)
  let depth = 0
  let expectingName = false
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]
    if (byte === QUOTE) {
      if (!expectingName || depth > MAX_DEPTH) {
        i = closingQuote(raw, i)
        if (i < 0) break
        continue
      }
      const end = closingQuote(raw, i)
      if (end < 0) break
      if (isArrayIndex(raw, i + 1, end)) {
        i = end
        expectingName = false
        continue
      }
      let a = low[depth]!
      let b = high[depth]!
      // Through the closing quote, so that "ab","c" and "a","bc" differ.
      for (let j = i + 1; j <= end; j++) {
        a = Math.imul(a ^ raw[j]!, FNV_PRIME)
        b = Math.imul(b ^ raw[j]!, MURMUR_MULTIPLIER) ^ (b >>> 15)
      }
      i = end
      low[depth] = a
      high[depth] = b
      expectingName = false
      seen.add((a >>> 0) + (b & HIGH_BITS) * LOW_WORD)
      if (seen.size > most) return seen.size
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      depth++
      if (depth <= MAX_DEPTH) {
        isObject[depth] = byte === OPEN_BRACE ? 1 : 0
        low[depth] = SEEDS[0]
        high[depth] = SEEDS[1]
      }
      expectingName = byte === OPEN_BRACE
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--
    } else if (byte === COMMA) {
      expectingName = depth <= MAX_DEPTH && isObject[depth] === 1
    }
  }
  return seen.size
}

const LARGEST_INDEX = Buffer.from('4294967294')

/**
 * Whether the name from `start` to `end` is an array index as written
 * (`0`, `17`, up to 2^32 - 2, no leading zero). V8 keeps such members as
 * elements, not in the hidden class: 600,000 of them parse in ~0.2 s,
 * sparse ones in ~0.4 s for 8 MiB. A `logit_bias` over a whole vocabulary
 * (150,000 token ids) is made of them, and counted as layouts it was refused.
 */
function isArrayIndex(raw: Buffer, start: number, end: number): boolean {
  const length = end - start
  if (length === 0 || length > LARGEST_INDEX.length || (length > 1 && raw[start] === ZERO)) return false
  for (let i = start; i < end; i++) if (!isDigit(raw[i])) return false
  return length < LARGEST_INDEX.length || raw.compare(LARGEST_INDEX, 0, LARGEST_INDEX.length, start, end) <= 0
}
