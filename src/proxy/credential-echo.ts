/**
 * The gateway's own upstream credential, when an upstream's answer echoes
 * it back ("Incorrect API key provided: Bearer sk-…", as OpenAI-style
 * servers and proxies write a 401), is replaced before the answer reaches
 * the client: an answer is otherwise passed on byte for byte (DESIGN.md),
 * but the credential is the operator's, never the client's to see.
 */
import type { UpstreamAuthSettings } from '../config/schema.js'
import type { HeaderMap } from './headers.js'
import { codingList, decodedBody, isIdentityCoding } from './content-coding.js'

const REDACTED_TEXT = '[redacted]'
export const REDACTED = Buffer.from(REDACTED_TEXT)

/**
 * What of the gateway's credential an answer could echo: a bearer token or
 * API key, a Basic password and the encoded `user:password`. Nothing for an
 * upstream that forwards the client's own credentials.
 */
export function echoableSecrets(auth: UpstreamAuthSettings | undefined): string[] {
  if (auth === undefined || 'forward_client' in auth) return []
  if ('bearer' in auth) return echoForms([auth.bearer])
  const encoded = Buffer.from(`${auth.basic.username}:${auth.basic.password}`, 'utf8').toString('base64')
  return echoForms([encoded, auth.basic.password])
}

/**
 * Each secret as written, then as an answer may have escaped it: in a
 * JSON string (`"` and `\` escaped; `/` as `\/`, as PHP writes it; past
 * ASCII and `+` as `\uxxxx` or `\uXXXX`, as Java and .NET do) and
 * percent-encoded (a redirect's query, percentEncodings). A search for the
 * bytes alone let `train-tok\/XYZ` through.
 */
export function echoForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>()
  for (const secret of secrets) {
    const json = JSON.stringify(secret).slice(1, -1)
    forms.add(secret)
    forms.add(json)
    forms.add(json.replaceAll('/', '\\/'))
    const escaped = json.replace(/[^\x20-\x7e]|[+<>&']/g, unicodeEscape)
    forms.add(escaped)
    forms.add(escaped.replace(/\\u[0-9a-f]{4}/g, (escape) => `\\u${escape.slice(2).toUpperCase()}`))
    for (const encoded of percentEncodings(secret)) forms.add(encoded)
  }
  return [...forms]
}

/**
 * A secret percent-encoded as URL builders write it: JavaScript's
 * encodeURIComponent, RFC 3986's strict set (`!'()*` too), Python's
 * `quote` (which keeps `/`), each with upper- and lowercase hex.
 */
function percentEncodings(secret: string): string[] {
  const component = encodeURIComponent(secret)
  const strict = component.replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`)
  const upper = [component, strict, strict.replaceAll('%2F', '/')]
  return [...upper, ...upper.map((form) => form.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()))]
}

function unicodeEscape(char: string): string {
  return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`
}

/**
 * A text in each encoding an answer's body may be written in: UTF-8 (and so
 * ASCII and the ISO 8859 sets for an ASCII secret), UTF-16 in either byte
 * order (an upstream declaring `charset=utf-16le`, or a BOM, quoted the
 * credential past a search for its UTF-8 bytes: an auth review), and
 * Latin-1 for a secret whose characters beyond ASCII it has.
 */
function encodings(text: string): Buffer[] {
  const littleEndian = Buffer.from(text, 'utf16le')
  const found = [Buffer.from(text, 'utf8'), littleEndian, Buffer.from(littleEndian).swap16()]
  // eslint-disable-next-line no-control-regex
  return /^[\u0000-\u00ff]*$/.test(text) && /[\u0080-\u00ff]/.test(text) ? [...found, Buffer.from(text, 'latin1')] : found
}

const REDACTED_ENCODINGS = encodings(REDACTED_TEXT)

/** `body` with every occurrence of `needle` replaced by `replacement`; the same buffer when none occurs. */
function replacedAll(body: Buffer, needle: Buffer, replacement: Buffer): Buffer {
  if (body.indexOf(needle) < 0) return body
  const parts: Buffer[] = []
  let from = 0
  for (let at = body.indexOf(needle); at >= 0; at = body.indexOf(needle, from)) {
    parts.push(body.subarray(from, at), replacement)
    from = at + needle.length
  }
  parts.push(body.subarray(from))
  return Buffer.concat(parts)
}

/** `body` with every occurrence of each secret, in each encoding, replaced by `[redacted]` in that encoding; the same buffer when none occurs. */
export function withoutEchoedSecrets(body: Buffer, secrets: readonly string[]): Buffer {
  let out = body
  for (const secret of secrets) {
    // An empty or one-character "secret" would match everywhere: nothing that short is a credential.
    if (secret.length < 2) continue
    // Latin-1's [redacted] is its UTF-8 one.
    encodings(secret).forEach((needle, i) => (out = replacedAll(out, needle, REDACTED_ENCODINGS[i] ?? REDACTED)))
  }
  return out
}

/** Charsets in which an ASCII secret is written neither as its own bytes nor as UTF-16: a body in one cannot be searched. */
const UNSEARCHABLE_CHARSET = /^(?:utf-?32(?:le|be)?|ucs-?4|utf-?7|cp0?37|ibm0?37|ebcdic.*)$/i

/** Whether a Content-Type names a charset whose bytes a search for the secret would miss. */
function unsearchableCharset(contentType: string | string[] | undefined): boolean {
  const type = Array.isArray(contentType) ? contentType.join(',') : contentType
  const charset = type === undefined ? undefined : /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type)?.[1]
  return charset !== undefined && UNSEARCHABLE_CHARSET.test(charset)
}

/** Header values with every occurrence of each secret replaced by `[redacted]`, in place (`headers` is the answer's own copy). */
export function withoutEchoedSecretsInHeaders(headers: HeaderMap, secrets: readonly string[]): void {
  for (const secret of secrets) {
    if (secret.length < 2) continue
    for (const name of Object.keys(headers)) {
      const value = headers[name]!
      if (typeof value === 'string') {
        if (value.includes(secret)) headers[name] = value.replaceAll(secret, REDACTED_TEXT)
      } else if (value.some((item) => item.includes(secret))) {
        headers[name] = value.map((item) => item.replaceAll(secret, REDACTED_TEXT))
      }
    }
  }
}

/** The warn line for an answer whose body searchedAnswerBody could not search. */
export const UNSEARCHABLE_ANSWER = 'an error or redirect answer in a coding or charset the gateway cannot read was sent without its body: it could not be searched for the gateway credential'

/**
 * An answer's body to send with the secrets cut out, searched decoded when
 * it came compressed (content-coding.ts): sent decoded, its
 * `Content-Encoding` dropped from `headers`, only when something was cut.
 * Null when it cannot be decoded (a coding never offered, broken bytes, more
 * than `limitBytes` decoded) or is in a charset a search misses (UTF-32,
 * UTF-7, EBCDIC), so cannot be searched: the caller sends the
 * status alone (`headers` then names no coding) and says so in a warn line.
 */
export function searchedAnswerBody(body: Buffer, headers: HeaderMap, secrets: readonly string[], limitBytes: number): Buffer | null {
  if (secrets.length === 0) return body
  if (unsearchableCharset(headers['content-type'])) {
    delete headers['content-encoding']
    return null
  }
  const list = codingList(headers['content-encoding'])
  if (isIdentityCoding(list)) return withoutEchoedSecrets(body, secrets)
  const decoded = decodedBody(body, list!, limitBytes)
  if (decoded === null) {
    delete headers['content-encoding']
    return null
  }
  const scrubbed = withoutEchoedSecrets(decoded, secrets)
  if (scrubbed === decoded) return body
  delete headers['content-encoding']
  return scrubbed
}
