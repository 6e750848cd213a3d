/**
 * The gateway's own upstream credential, when an upstream's answer echoes
 * it back ("Incorrect API key provided: Bearer sk-…", as OpenAI-style
 * servers and proxies write a 401), is replaced before the answer reaches
 * the client: an answer is otherwise passed on byte for byte (DESIGN.md),
 * but the credential is the operator's, never the client's to see.
 */
import type { UpstreamAuthSettings } from '../config/schema.js'
import type { HeaderMap } from './headers.js'

const REDACTED_TEXT = '[redacted]'
export const REDACTED = Buffer.from(REDACTED_TEXT)

/**
 * What of the gateway's credential an answer could echo: a bearer token or
 * API key, a Basic password and the encoded `user:password`. Nothing for an
 * upstream that forwards the client's own credentials.
 */
export function echoableSecrets(auth: UpstreamAuthSettings | undefined): string[] {
  if (auth === undefined || 'forward_client' in auth) return []
  if ('bearer' in auth) return [auth.bearer]
  const encoded = Buffer.from(`${auth.basic.username}:${auth.basic.password}`, 'utf8').toString('base64')
  return [encoded, auth.basic.password]
}

/** `body` with every occurrence of each secret replaced by `[redacted]`; the same buffer when none occurs. */
export function withoutEchoedSecrets(body: Buffer, secrets: readonly string[]): Buffer {
  let out = body
  for (const secret of secrets) {
    // An empty or one-character "secret" would match everywhere: nothing that short is a credential.
    if (secret.length < 2) continue
    const needle = Buffer.from(secret, 'utf8')
    if (out.indexOf(needle) < 0) continue
    const parts: Buffer[] = []
    let from = 0
    for (let at = out.indexOf(needle); at >= 0; at = out.indexOf(needle, from)) {
      parts.push(out.subarray(from, at), REDACTED)
      from = at + needle.length
    }
    parts.push(out.subarray(from))
    out = Buffer.concat(parts)
  }
  return out
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
