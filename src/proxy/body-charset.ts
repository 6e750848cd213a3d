/**
 * Which encodings an answer body's text is in, for the credential search
 * (credential-echo.ts): from its Content-Type charset, else from its first
 * bytes (a byte order mark, or RFC 4627's pattern of NULs in JSON's first
 * two characters). Pure.
 *
 * An ASCII secret is written as its own bytes in every charset that is a
 * superset of ASCII; UTF-16 interleaves it with NULs. Any other charset
 * (UTF-32, UTF-7, the EBCDIC code pages, one this list does not know)
 * writes it some other way: such a body is unsearchable, and the caller
 * drops it. UTF-16 needles are searched only in a body said to be UTF-16:
 * searched in every error body, their NULs slowed Buffer.indexOf on a
 * large NUL-dense body from 24 ms to 3.5 s (a diff review).
 */

import { ASCII_SUPERSET_LABELS } from './whatwg-charset-labels.js'

export type TextEncoding = 'utf8' | 'utf16le' | 'utf16be'

/**
 * Other names of ASCII supersets than the WHATWG labels: IANA's names and
 * aliases (`ISO_8859-1:1987`, `KS_C_5601-1987`, `utf_8`) and the DOS and
 * Windows code pages by their numbers (not the EBCDIC ones, whose numbers
 * differ). A diff review found common labels (`windows-874`, `cp932`,
 * `ks_c_5601-1987`, `greek`, `cp819`) dropping legitimate bodies.
 */
const OTHER_ASCII_SUPERSETS: readonly RegExp[] = [
  /^(?:cs)?utf[-_]?8$|^(?:unicode11utf8|unicode20utf8|x-unicode20utf8)$/,
  /^(?:us-ascii|csascii|ansi_x3\.4-1986|iso-ir-6|iso646-us|us|ibm367|cp367)$/,
  /^(?:iso[-_ ]?8859[-_ ]?\d{1,2}(?:[-_ ][ie])?(?::\d{4})?|csisolatin[a-z0-9]+|latin-?\d{1,2}|l\d{1,2}|iso-ir-\d{2,3})$/,
  /^(?:x-|ms-?|dos-|cs)?(?:cp|ibm|windows-?|pc)?-?(?:437|737|775|819|85[02578]|86[0-69]|874|932|936|949|950|125[0-8])$/,
  /^(?:cs)?koi8(?:[-_][a-z]+)?$|^(?:mac|x-mac-(?:roman|ukrainian)|tis-620|viscii|armscii-8)$/,
  /^(?:shift-jis|sjis|ms932|ks_c_5601-1989|ksc_?5601|uhc|euc-cn|x-x-big5|windows-949)$/,
]

/** UTF-16 of either byte order (WHATWG reads these as little-endian, RFC 2781 as big-endian: the body's own bytes decide, else both are searched). */
const UTF16 = /^(?:(?:cs)?utf-?16|ucs-?2|iso-10646-ucs-2|csunicode|unicode|unicodefeff)$/
const UTF16LE = /^(?:cs)?utf-?16le$/
const UTF16BE = /^(?:(?:cs)?utf-?16be|unicodefffe)$/

/** The charset a Content-Type names, lowercased and unquoted; undefined when it names none. */
export function declaredCharset(contentType: string | readonly string[] | undefined): string | undefined {
  const type = typeof contentType === 'string' ? contentType : contentType?.join(',')
  return type === undefined ? undefined : /;\s*charset\s*=\s*"?([^";,\s]+)/i.exec(type)?.[1]?.toLowerCase()
}

/** UTF-16's byte order from a BOM or the first character's NUL (RFC 4627 §3); null when the bytes do not say. */
function utf16Order(body: Buffer): TextEncoding | null {
  if (body.length < 2) return null
  if ((body[0] === 0xff && body[1] === 0xfe) || (body[0] !== 0 && body[1] === 0)) return 'utf16le'
  if ((body[0] === 0xfe && body[1] === 0xff) || (body[0] === 0 && body[1] !== 0)) return 'utf16be'
  return null
}

/** UTF-32's byte order marks and RFC 4627's NUL patterns (three NULs around the first character). */
function looksUtf32(body: Buffer): boolean {
  if (body.length < 4) return false
  const [a, b, c, d] = body
  return (a === 0 && b === 0 && c === 0 && d !== 0) || (a !== 0 && b === 0 && c === 0 && d === 0) || (a === 0 && b === 0 && c === 0xfe && d === 0xff)
}

/**
 * The encodings to search `body` in for an ASCII-written secret, or null
 * when it cannot be searched. UTF-8 always (an ASCII superset's bytes).
 */
export function searchEncodings(contentType: string | readonly string[] | undefined, body: Buffer): readonly TextEncoding[] | null {
  const charset = declaredCharset(contentType)
  if (charset === undefined) {
    if (looksUtf32(body)) return null
    const order = utf16Order(body)
    return order === null ? ['utf8'] : ['utf8', order]
  }
  if (ASCII_SUPERSET_LABELS.has(charset) || OTHER_ASCII_SUPERSETS.some((pattern) => pattern.test(charset))) return ['utf8']
  if (UTF16LE.test(charset)) return ['utf8', 'utf16le']
  if (UTF16BE.test(charset)) return ['utf8', 'utf16be']
  if (!UTF16.test(charset)) return null
  const order = utf16Order(body)
  return order === null ? ['utf8', 'utf16be', 'utf16le'] : ['utf8', order]
}

/** A text's bytes in `encoding`. */
export function encoded(text: string, encoding: TextEncoding): Buffer {
  if (encoding === 'utf16be') return Buffer.from(text, 'utf16le').swap16()
  return Buffer.from(text, encoding)
}

/** A UTF-16 body as text (a last odd byte left out). */
export function utf16Text(body: Buffer, encoding: 'utf16le' | 'utf16be'): string {
  const even = body.subarray(0, body.length - (body.length % 2))
  return encoding === 'utf16le' ? even.toString('utf16le') : Buffer.from(even).swap16().toString('utf16le')
}

/** A secret whose characters beyond ASCII Latin-1 has: an ISO 8859-1 body writes it other than UTF-8 does. */
export function hasLatin1Form(secret: string): boolean {
  // eslint-disable-next-line no-control-regex
  return /^[\u0000-\u00ff]*$/.test(secret) && /[\u0080-\u00ff]/.test(secret)
}
