/**
 * What is wrong with `server.host` as an address to listen on, or null.
 * `check` accepted `localhost:8080` and `[::1]:8080`, and serve then failed
 * with getaddrinfo ENOTFOUND (operator audits): a host is an IP address as
 * Node reads one (IPv6 without brackets, a zone allowed) or a DNS name.
 */
import { isIP } from 'node:net'

/** RFC 1123 labels (underscores allowed: container runtimes' service names have them), at most 253 characters. */
const HOST_NAME = /^(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/

/**
 * A top label of digits (or C's hex): RFC 1123 §2.1 keeps host names out of
 * the dotted-decimal form, and getaddrinfo reads such a "name" as an IPv4
 * address its own way: `10.0.0.256` failed at start, `1.2.3` listened on
 * 1.2.0.3 and `127.1` on 127.0.0.1, each after `check` said ok (an ops review).
 */
const NUMERIC_TOP_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/i

export const NUMERIC_HOST_PROBLEM = 'is neither an IPv4 address (four decimal parts, each 0-255) nor a host name (whose last label is not a number)'

/** A host written as a name that only a number's reading could resolve (`10.0.0.256`, `127.1`): never what was meant. */
export function isNumericHostName(host: string): boolean {
  return isIP(host) === 0 && HOST_NAME.test(host) && NUMERIC_TOP_LABEL.test(host)
}

export function listenHostProblem(host: string): string | null {
  if (isIP(host) !== 0) return null
  if (isNumericHostName(host)) return NUMERIC_HOST_PROBLEM
  if (HOST_NAME.test(host)) return null
  if (/^[^:[\]]+:\d+$/.test(host)) return 'looks like host:port: give the host alone, and the port in server.port'
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(host)
  if (bracketed !== null && isIP(bracketed[1]!) === 6) return `is an IPv6 address in URL brackets: give it bare (${bracketed[1]!}), and the port in server.port`
  return 'must be an IP address (0.0.0.0, ::, 127.0.0.1, ::1) or a host name'
}
