/**
 * The Host header rule of RFC 9112 §3.2: a server must answer 400 to a
 * request with more than one Host line or with a value that is not
 * `host[:port]` (RFC 3986's authority less userinfo). The gateway routes on
 * nothing in it, but a proxy in front may have routed on the other line of
 * two, or on a `user@host` the gateway would read otherwise (a platform
 * review). HTTP/1.1 without one is refused apart, by the caller.
 */
import { headerLines } from './raw-headers.js'

/** A reg-name or IPv4 address, or an IP literal in brackets, then an optional port; empty is allowed (a target without authority). */
const HOST_VALUE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/

export function isValidHostHeader(value: string | undefined, rawHeaders: readonly string[]): boolean {
  if (value === undefined) return true
  if (!HOST_VALUE.test(value)) return false
  return headerLines(rawHeaders, 'host') === 1
}
