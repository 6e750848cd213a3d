/**
 * What a JSON body may not contain even when it parses: nesting deeper than
 * MAX_DEPTH (re-serializing it would overflow the stack, and no request of
 * the interface needs it), and numbers beyond the double range (JSON.parse
 * turns 1e400 into Infinity, which would be re-sent as null). Both checks
 * are linear scans; the number check only runs when the text holds a long
 * exponent or digit run.
 */
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-bytes.js'

export const MAX_DEPTH = 128

/** The deepest nesting of objects and arrays in JSON text (strings skipped). */
export function nestingDepth(raw: Buffer): number {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]
    if (inString) {
      if (byte === BACKSLASH) i++
      else if (byte === QUOTE) inString = false
    } else if (byte === QUOTE) inString = true
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      depth++
      if (depth > deepest) deepest = depth
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--
  }
  return deepest
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
