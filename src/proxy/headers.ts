/**
 * What crosses the gateway in headers. Upstream requests are built from an
 * allow-list (the client's credentials and cookies never leave); responses
 * lose only hop-by-hop headers (RFC 9110 §7.6.1) and the framing the gateway
 * recomputes.
 */
import type { IncomingHttpHeaders } from 'node:http'

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // Not in RFC 9110's list, but RFC 9110 §7.6.1 names it as one to remove (old clients send it).
  'proxy-connection',
  // Not hop-by-hop: set by whoever knows the body sent (the chat route recomputes it, a platform answer keeps the upstream's).
  'content-length',
])

/**
 * Client headers worth passing on: content negotiation and tracing. A
 * platform answer reaches the client byte for byte, so the codings it
 * accepts are its own to state (the chat route asks for identity instead).
 */
const FORWARDED_REQUEST_HEADERS = ['accept', 'accept-encoding', 'user-agent', 'traceparent', 'tracestate'] as const

export type HeaderMap = Record<string, string | string[]>

export function responseHeadersFromUpstream(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): HeaderMap {
  const connectionListed = headers.connection === undefined ? null : listedInConnection(headers.connection)
  const out: HeaderMap = {}
  // Names arrive lower-cased from node:http and undici alike; for-in over a
  // plain object, not Object.entries, as this runs for every answer.
  for (const name in headers) {
    const value = headers[name]
    const lower = name.toLowerCase()
    if (value === undefined || HOP_BY_HOP.has(lower) || connectionListed?.has(lower) === true) continue
    out[lower] = value
  }
  return out
}

/** Header names the `Connection` header declares hop-by-hop (RFC 9110 §7.6.1); null for none. */
function listedInConnection(value: string | string[]): Set<string> | null {
  // The usual values name no header: no Set for them.
  if (value === 'keep-alive' || value === 'close') return null
  return new Set(
    String(value)
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== ''),
  )
}

/**
 * A fresh map the caller may add its own headers to. A header the client's
 * `Connection` names is for the gateway's hop only (RFC 9110 §7.6.1), even
 * one from the allow-list.
 */
export function forwardedRequestHeaders(client: IncomingHttpHeaders): HeaderMap {
  const connectionListed = client.connection === undefined ? null : listedInConnection(client.connection)
  const out: HeaderMap = {}
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = client[name]
    if (typeof value === 'string' && connectionListed?.has(name) !== true) out[name] = value
  }
  return out
}
