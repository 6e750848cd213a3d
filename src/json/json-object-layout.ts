/**
 * Where the members of a JSON object's top level sit in its bytes: each
 * member's name (as JSON.parse reads it, escapes decoded) and the span of its
 * value, and where the closing brace is. Only for text that already parsed
 * as a JSON object (the body parser saw it first, past a leading UTF-8 byte
 * order mark, which is skipped here too), so the scan checks structure only
 * as far as it needs to find its way; anything unexpected gives null and the
 * caller serializes instead.
 */
import { CLOSE_BRACE, CLOSE_BRACKET, closingQuote, COLON, COMMA, isJsonWhitespace, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-bytes.js'

export interface MemberSpan {
  readonly name: string
  /** The value's first byte. */
  readonly start: number
  /** Just past the value's last byte. */
  readonly end: number
}

export interface ObjectLayout {
  readonly members: readonly MemberSpan[]
  /** The index of the object's closing brace. */
  readonly close: number
}

export function topLevelLayout(raw: Uint8Array): ObjectLayout | null {
  let i = skipWhitespace(raw, startsWithByteOrderMark(raw) ? 3 : 0)
  if (raw[i] !== OPEN_BRACE) return null
  i = skipWhitespace(raw, i + 1)
  const members: MemberSpan[] = []
  if (raw[i] === CLOSE_BRACE) return { members, close: i }
  for (;;) {
    if (raw[i] !== QUOTE) return null
    const nameEnd = stringEnd(raw, i)
    if (nameEnd < 0) return null
    const name = memberName(raw, i, nameEnd)
    i = skipWhitespace(raw, nameEnd)
    if (raw[i] !== COLON) return null
    const start = skipWhitespace(raw, i + 1)
    const end = valueEnd(raw, start)
    if (end < 0) return null
    members.push({ name, start, end })
    i = skipWhitespace(raw, end)
    if (raw[i] === CLOSE_BRACE) return { members, close: i }
    if (raw[i] !== COMMA) return null
    i = skipWhitespace(raw, i + 1)
  }
}

function skipWhitespace(raw: Uint8Array, from: number): number {
  let i = from
  while (i < raw.length && isJsonWhitespace(raw[i])) i++
  return i
}

function startsWithByteOrderMark(raw: Uint8Array): boolean {
  return raw.length >= 3 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf
}

/**
 * The body parser (secure-json-parse) reads past a leading UTF-8 byte order
 * mark; Python's json module refuses one (the chat backend and the platform
 * upstreams answered 422 to a body the gateway had passed), so none is sent on.
 */
export function withoutByteOrderMark(raw: Buffer): Buffer {
  return startsWithByteOrderMark(raw) ? raw.subarray(3) : raw
}

/**
 * The name whose quoted text spans `from` to `end`, as every JSON parser
 * reads it: `"se\u0065d"` is `seed` (found by its plain spelling only, a
 * check on it was skipped and the backend still read it as `seed`).
 */
function memberName(raw: Uint8Array, from: number, end: number): string {
  const text = Buffer.from(raw.buffer, raw.byteOffset + from + 1, end - from - 2).toString('utf8')
  return text.includes('\\') ? (JSON.parse(`"${text}"`) as string) : text
}

/** Just past the string that opens at `from` (a quote), or -1. */
function stringEnd(raw: Uint8Array, from: number): number {
  const quote = closingQuote(raw, from)
  return quote < 0 ? -1 : quote + 1
}

/** Just past the value that starts at `from`, or -1. */
function valueEnd(raw: Uint8Array, from: number): number {
  const first = raw[from]
  if (first === QUOTE) return stringEnd(raw, from)
  if (first === OPEN_BRACE || first === OPEN_BRACKET) return containerEnd(raw, from)
  // A number, true, false or null: it runs to the next delimiter.
  let i = from
  while (i < raw.length && raw[i] !== COMMA && raw[i] !== CLOSE_BRACE && raw[i] !== CLOSE_BRACKET && !isJsonWhitespace(raw[i])) i++
  return i > from ? i : -1
}

function containerEnd(raw: Uint8Array, from: number): number {
  let depth = 0
  for (let i = from; i < raw.length; i++) {
    const byte = raw[i]
    if (byte === QUOTE) {
      i = stringEnd(raw, i) - 1
      if (i < 0) return -1
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++
    else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--
      if (depth === 0) return i + 1
    }
  }
  return -1
}
