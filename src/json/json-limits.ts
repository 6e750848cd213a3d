/**
 * What a JSON body may not contain even when it parses: nesting deeper than
 * MAX_DEPTH (re-serializing it would overflow the stack, and no request of
 * the interface needs it), more objects and arrays than its size allows
 * (BYTES_PER_CONTAINER), and numbers beyond the double range (JSON.parse
 * turns 1e400 into Infinity, which would be re-sent as null). Each check is
 * a linear scan; the number check only runs when the text holds a long
 * exponent or digit run.
 */
import { CLOSE_BRACE, CLOSE_BRACKET, closingQuote, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-bytes.js'

export const MAX_DEPTH = 128
/**
 * Bytes of `body_limit_bytes` per object or array a body may hold: the
 * most containers is that limit / 16 (524,288 for 8 MiB). Parsing cost goes
 * with containers, not bytes: 8 MiB of `{},{},…` (2.8 million objects) held
 * the event loop for 1.7 s in JSON.parse alone, and every other client with
 * it (a security audit); at the cap, ~0.25 s. Real bodies are far sparser:
 * a trajectory with per-token logprobs, the densest the interface allows,
 * has about one container per 27 bytes.
 */
export const BYTES_PER_CONTAINER = 16

export interface JsonShape {
  /** The deepest nesting of objects and arrays. */
  readonly depth: number
  /** How many objects and arrays there are in all. */
  readonly containers: number
}

/** The nesting and the number of objects and arrays of JSON text (strings skipped), in one scan. */
export function jsonShape(raw: Buffer): JsonShape {
  let depth = 0
  let deepest = 0
  let containers = 0
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]
    if (byte === QUOTE) {
      i = closingQuote(raw, i)
      if (i < 0) break
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      containers++
      depth++
      if (depth > deepest) deepest = depth
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--
  }
  return { depth: deepest, containers }
}

/**
 * An exponent of 3 digits or more, or 309 digits in a row (10^308 is the
 * double's limit). The run is matched only from its first digit: written
 * `\d{309,}`, it was tried again from every digit of every shorter run, and
 * 8 MiB of 308-digit runs (an ordinary-looking prompt) held the event loop
 * for 3 s; now 55 ms.
 */
const MAYBE_HUGE_NUMBER = /[eE]\+?\d{3}|(?<!\d)\d{309}/

/** True when some number in the parsed text was too large for a double. */
export function mayHoldNonFiniteNumber(text: string): boolean {
  return MAYBE_HUGE_NUMBER.test(text)
}

/** The dotted path of the first number that parsed to ±Infinity, or null. */
export function firstNonFiniteNumber(value: unknown, path = ''): string | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : path
  if (value === null || typeof value !== 'object') return null
  for (const [key, member] of Object.entries(value)) {
    const found = firstNonFiniteNumber(member, path === '' ? key : `${path}.${key}`)
    if (found !== null) return found
  }
  return null
}
