/**
 * A secret as an HTML or XML writer may have escaped it in an error page:
 * any of its characters other than letters and digits as a numeric
 * character reference (`&#43;`, `&#x2B;`, `&#X2b;`, zeros allowed) or, for
 * `& < > " '`, a named one. Writers escape different sets (Go's
 * html/template `+` as `&#43;`, .NET's HtmlEncoder `+` as `&#x2B;`, OWASP's
 * `/` as `&#x2F;`, Python's `"` as `&quot;`) and leave the rest as it is,
 * so each character may be either: one pattern per secret matches every
 * mixture, where a list of forms would need one per combination (a diff
 * review: Go's `&#43;` quoted the token past the search).
 */
import { encoded, hasLatin1Form, utf16Text, type TextEncoding } from './body-charset.js'

const NAMED: Readonly<Record<string, string>> = { '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' }

/** How the secret's own characters appear where the pattern runs: a body read byte for byte holds UTF-8's bytes; text (Latin-1 read so, or UTF-16 decoded) the characters. */
export type Literal = 'utf8-bytes' | 'characters'

/** Hex digits in either case (the pattern is case-sensitive: the secret's own letters are not). */
function anyCaseHex(code: number): string {
  return [...code.toString(16)].map((digit) => (/[a-f]/.test(digit) ? `[${digit}${digit.toUpperCase()}]` : digit)).join('')
}

function escapeForRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')
}

/** One character of the secret: itself, or a character reference to it. */
function characterPattern(char: string, literal: Literal): string {
  const itself = escapeForRegExp(literal === 'characters' ? char : Buffer.from(char, 'utf8').toString('latin1'))
  if (/[A-Za-z0-9]/.test(char)) return itself
  const code = char.codePointAt(0)!
  const named = NAMED[char] === undefined ? '' : `|&${NAMED[char]};`
  return `(?:${itself}|&#0*${code};|&#[xX]0*${anyCaseHex(code)};${named})`
}

/** A pattern for `secret` with any of its characters escaped; null when it has none an escaper would change (the plain search finds it then). */
export function htmlEscapedPattern(secret: string, literal: Literal): RegExp | null {
  if (/^[A-Za-z0-9]*$/.test(secret)) return null
  return new RegExp([...secret].map((char) => characterPattern(char, literal)).join(''), 'g')
}

/** Compiled once per secret: they are the configuration's, few, and searched on every error answer. */
const PATTERNS = new Map<string, RegExp | null>()

function patternFor(secret: string, literal: Literal): RegExp | null {
  const key = `${literal}:${secret}`
  let pattern = PATTERNS.get(key)
  if (pattern === undefined) {
    // A bound for a gateway reloaded with new secrets for months: the next calls compile again.
    if (PATTERNS.size >= 1024) PATTERNS.clear()
    pattern = htmlEscapedPattern(secret, literal)
    PATTERNS.set(key, pattern)
  }
  return pattern
}

/** `text` with what `pattern` matches replaced by `replacement`; the same string when nothing does. */
function replaced(text: string, pattern: RegExp | null, replacement: string): string {
  if (pattern === null) return text
  pattern.lastIndex = 0
  return pattern.test(text) ? text.replace(pattern, () => replacement) : text
}

/** A body read byte for byte (UTF-8, or Latin-1 for a secret it can write), each secret's escaped writings replaced. */
function withoutInBytes(body: Buffer, secrets: readonly string[], replacement: string): Buffer {
  const text = body.toString('latin1')
  let out = text
  for (const secret of secrets) {
    out = replaced(out, patternFor(secret, 'utf8-bytes'), replacement)
    if (hasLatin1Form(secret)) out = replaced(out, patternFor(secret, 'characters'), replacement)
  }
  return out === text ? body : Buffer.from(out, 'latin1')
}

/** A UTF-16 body, searched as text and written back in its byte order (a last odd byte kept). */
function withoutInUtf16(body: Buffer, secrets: readonly string[], encoding: 'utf16le' | 'utf16be', replacement: string): Buffer {
  const text = utf16Text(body, encoding)
  if (!text.includes('&')) return body
  let out = text
  for (const secret of secrets) out = replaced(out, patternFor(secret, 'characters'), replacement)
  return out === text ? body : Buffer.concat([encoded(out, encoding), body.subarray(body.length - (body.length % 2))])
}

/**
 * `body` with every HTML-escaped writing of each secret replaced by
 * `replacement` (ASCII), in each of `encodings`; the same buffer when none
 * occurs. Only a body with an `&` in it can hold one: most never pay for
 * the patterns.
 */
export function withoutHtmlEscapedSecrets(body: Buffer, secrets: readonly string[], encodings: readonly TextEncoding[], replacement: string): Buffer {
  let out = body
  for (const encoding of encodings) {
    if (encoding !== 'utf8') out = withoutInUtf16(out, secrets, encoding, replacement)
    else if (out.indexOf('&') >= 0) out = withoutInBytes(out, secrets, replacement)
  }
  return out
}
