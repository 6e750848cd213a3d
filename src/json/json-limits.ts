/**
 * What a JSON body may not contain even when it parses: nesting deeper than
 * MAX_DEPTH (re-serializing it would overflow the stack, and no request of
 * the interface needs it), more objects and arrays than its size allows
 * (BYTES_PER_CONTAINER), `__proto__` or `constructor.prototype` keys, and
 * numbers beyond the double range (JSON.parse turns 1e400 into Infinity,
 * which would be re-sent as null). One scan of the text, strings skipped,
 * gives the first two and says whether the parsed value needs looking at
 * for the other two: a prompt's text is read neither byte by byte nor by a
 * regular expression.
 */
import { bytesAt } from '../bytes-at.js'
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, closingQuote, COLON, isDigit, isJsonWhitespace, OPEN_BRACE, OPEN_BRACKET, QUOTE, ZERO } from './json-bytes.js'

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
  /** Some member is named `__proto__` or `constructor`, or has an escaped name that could spell one. */
  readonly mayHoldPrototypeKey: boolean
  /** Some number has 309 digits or more before its point, its exponent counted: it may be beyond a double. */
  readonly mayHoldHugeNumber: boolean
}

const MINUS = 0x2d
const PLUS = 0x2b
const DOT = 0x2e
const LOWER_CASE_BIT = 0x20
const LOWER_E = 0x65
/** A double's largest is 1.8e308: a number of 309 digits or more before the point, exponent included, may pass it. */
const DOUBLE_DIGITS = 309

/** The scan's findings, filled as it goes. */
interface Scan {
  mayHoldPrototypeKey: boolean
  mayHoldHugeNumber: boolean
}

/** The nesting, the number of containers, and what the parsed value must be checked for, in one scan of JSON text. */
export function jsonShape(raw: Buffer): JsonShape {
  const scan: Scan = { mayHoldPrototypeKey: false, mayHoldHugeNumber: false }
  let depth = 0
  let deepest = 0
  let containers = 0
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!
    if (byte === QUOTE) {
      const end = closingQuote(raw, i)
      if (end < 0) break
      if (!scan.mayHoldPrototypeKey && mayNamePrototypeKey(raw, i, end)) scan.mayHoldPrototypeKey = true
      i = end
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      containers++
      depth++
      if (depth > deepest) deepest = depth
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--
    else if (byte === MINUS || isDigit(byte)) i = numberEnd(raw, i, scan) - 1
  }
  return { depth: deepest, containers, mayHoldPrototypeKey: scan.mayHoldPrototypeKey, mayHoldHugeNumber: scan.mayHoldHugeNumber }
}

const PROTO = Buffer.from('__proto__')
const CONSTRUCTOR = Buffer.from('constructor')
/** `constructor` with every letter escaped (`\u0063…`) is 66 bytes; no longer name can spell either. */
const LONGEST_SPELLING = CONSTRUCTOR.length * 6

/** Whether the string quoted from `opening` to `closing` is a member name that is, or may be once unescaped, `__proto__` or `constructor`. */
function mayNamePrototypeKey(raw: Buffer, opening: number, closing: number): boolean {
  const length = closing - opening - 1
  if (length < PROTO.length || length > LONGEST_SPELLING || !isMemberName(raw, closing)) return false
  if (spells(raw, opening + 1, closing, PROTO) || spells(raw, opening + 1, closing, CONSTRUCTOR)) return true
  return holdsBackslash(raw, opening + 1, closing)
}

/**
 * Whether a backslash lies from `start` to `end` (at most 66 bytes here).
 * Not raw.indexOf: that searches on past `end` to the next backslash or the
 * body's end, and a review's 7.9 MiB of 40-name objects with no backslash
 * took 32 s to scan that way (names × body), against 0.3 s before.
 */
function holdsBackslash(raw: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (raw[i] === BACKSLASH) return true
  return false
}

function spells(raw: Buffer, start: number, end: number, word: Buffer): boolean {
  return end - start === word.length && bytesAt(raw, word, start)
}

/** A string is a member name when a colon follows it. */
function isMemberName(raw: Buffer, closing: number): boolean {
  let i = closing + 1
  while (isJsonWhitespace(raw[i])) i++
  return raw[i] === COLON
}

/**
 * Just past the number that starts at `start`; notes in `scan` when it may
 * be beyond a double: when its integer digits (JSON allows no leading
 * zeros) plus a non-negative exponent reach 309, since a number under
 * 10^308 is finite. 308 nines then `e5` is one; the regular expression
 * this replaced looked only for a 3-digit exponent or a 309-digit run, and
 * passed it through as Infinity.
 */
function numberEnd(raw: Buffer, start: number, scan: Scan): number {
  const digits = raw[start] === MINUS ? start + 1 : start
  let end = digitRunEnd(raw, digits)
  let magnitude = end - digits
  if (raw[end] === DOT) end = digitRunEnd(raw, end + 1)
  if ((raw[end]! | LOWER_CASE_BIT) === LOWER_E) {
    let i = end + 1
    const sign = raw[i]
    if (sign === PLUS || sign === MINUS) i++
    end = digitRunEnd(raw, i)
    // A negative exponent only comes closer to zero.
    if (sign !== MINUS) magnitude += exponentOf(raw, i, end)
  }
  if (magnitude >= DOUBLE_DIGITS) scan.mayHoldHugeNumber = true
  return Math.max(end, start + 1)
}

/** The value of the exponent digits from `start` to `end`, up to DOUBLE_DIGITS (0 for none). */
function exponentOf(raw: Buffer, start: number, end: number): number {
  let value = 0
  for (let i = start; i < end && value < DOUBLE_DIGITS; i++) value = value * 10 + raw[i]! - ZERO
  return value
}

function digitRunEnd(raw: Buffer, from: number): number {
  let i = from
  while (isDigit(raw[i])) i++
  return i
}

/** The dotted path of the first number that parsed to ±Infinity, depth first ('' for the body itself), or null. */
export function firstNonFiniteNumber(value: unknown): string | null {
  const names = nonFiniteNames(value)
  return names === null ? null : names.reverse().join('.')
}

/**
 * The names down to the first non-finite number, innermost first. A name is
 * written out only for the one found: one string per member made a body
 * holding `1e308` (finite, but flagged) and 8 MiB of numbers hold the event
 * loop for 6 s (a review).
 */
function nonFiniteNames(value: unknown): (string | number)[] | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : []
  if (value === null || typeof value !== 'object') return null
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = memberNames(value[i], i)
      if (found !== null) return found
    }
    return null
  }
  for (const name of Object.keys(value)) {
    const found = memberNames((value as Record<string, unknown>)[name], name)
    if (found !== null) return found
  }
  return null
}

/** nonFiniteNames of a member, its own name added; plain values answered without a call. */
function memberNames(member: unknown, name: string | number): (string | number)[] | null {
  if (typeof member === 'number') return Number.isFinite(member) ? null : [name]
  if (member === null || typeof member !== 'object') return null
  const found = nonFiniteNames(member)
  found?.push(name)
  return found
}
