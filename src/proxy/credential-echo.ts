/**
 * The gateway's own upstream credential, when an upstream's answer echoes
 * it back ("Incorrect API key provided: Bearer sk-…", as OpenAI-style
 * servers and proxies write a 401), is replaced before the answer reaches
 * the client: an answer is otherwise passed on byte for byte (DESIGN.md),
 * but the credential is the operator's, never the client's to see.
 */
import type { UpstreamAuthSettings } from '../config/schema.js'
import type { HeaderMap } from './headers.js'
import { encoded, hasLatin1Form, searchEncodings, utf16Text, type TextEncoding } from './body-charset.js'
import { withoutHtmlEscapedSecrets } from './html-escaped-secret.js'
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
/**
 * Each list echoForms made, with the secrets it was made of: the HTML search
 * (html-escaped-secret.ts) looks for those escaped, not for their JSON- and
 * percent-escaped forms (each is a pass over the body). Told apart by their
 * text, a raw secret with `%41` or `\\` in it was skipped (a diff review).
 */
const RAW_SECRETS = new WeakMap<readonly string[], readonly string[]>()

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
    for (const form of percentEncodings(secret)) forms.add(form)
  }
  const list = [...forms]
  RAW_SECRETS.set(list, secrets)
  return list
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

/**
 * `body` with every occurrence of each secret replaced by `[redacted]`, in
 * each of `encodings` (UTF-8 alone unless the body says it is UTF-16: until
 * 2026-11-29 only UTF-8 was searched, and a review's upstream answering in
 * `charset=utf-16le` quoted the token to the client); the same buffer when none occurs.
 */
export function withoutEchoedSecrets(body: Buffer, secrets: readonly string[], encodings: readonly TextEncoding[] = ['utf8']): Buffer {
  // An empty or one-character "secret" would match everywhere: nothing that short is a credential.
  const searched = secrets.filter((secret) => secret.length >= 2)
  let out = body
  for (const encoding of encodings) {
    // UTF-16 is looked for in the decoded text first: Buffer.indexOf with a needle of NULs crawls through a
    // body full of them (a diff review: a 48 MB UTF-16 error body held the event loop 0.9 s).
    const text = encoding === 'utf8' ? null : utf16Text(out, encoding)
    for (const secret of searched) {
      if (text !== null && !text.includes(secret)) continue
      out = replacedAll(out, encoded(secret, encoding), encoded(REDACTED_TEXT, encoding))
    }
  }
  // Latin-1's [redacted] is its UTF-8 one.
  for (const secret of searched) if (hasLatin1Form(secret)) out = replacedAll(out, Buffer.from(secret, 'latin1'), REDACTED)
  return withoutHtmlEscapedSecrets(out, (RAW_SECRETS.get(secrets) ?? secrets).filter((secret) => secret.length >= 2), encodings, REDACTED_TEXT)
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
 * than `limitBytes` decoded) or is in a charset that does not write an
 * ASCII secret as its bytes or as UTF-16 (body-charset.ts: UTF-32, UTF-7,
 * EBCDIC, one it does not know), so cannot be searched: the caller sends the
 * status alone (`headers` then names no coding) and says so in a warn line.
 */
export function searchedAnswerBody(body: Buffer, headers: HeaderMap, secrets: readonly string[], limitBytes: number): Buffer | null {
  if (secrets.length === 0) return body
  const list = codingList(headers['content-encoding'])
  const decoded = isIdentityCoding(list) ? body : decodedBody(body, list!, limitBytes)
  const encodings = decoded === null ? null : searchEncodings(headers['content-type'], decoded)
  if (decoded === null || encodings === null) {
    delete headers['content-encoding']
    return null
  }
  const scrubbed = withoutEchoedSecrets(decoded, secrets, encodings)
  if (scrubbed === decoded) return body
  delete headers['content-encoding']
  return scrubbed
}
