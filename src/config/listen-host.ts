/**
 * What is wrong with `server.host` as an address to listen on, or null.
 * `check` accepted `localhost:8080` and `[::1]:8080`, and serve then failed
 * with getaddrinfo ENOTFOUND (operator audits): a host is an IP address as
 * Node reads one (IPv6 without brackets, a zone allowed) or a DNS name.
 */
import { isIP } from 'node:net'

/** RFC 1123 labels (underscores allowed: container runtimes' service names have them), at most 253 characters. */
const HOST_NAME = /^(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/

export function listenHostProblem(host: string): string | null {
  if (isIP(host) !== 0 || HOST_NAME.test(host)) return null
  if (/^[^:[\]]+:\d+$/.test(host)) return 'looks like host:port: give the host alone, and the port in server.port'
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(host)
  if (bracketed !== null && isIP(bracketed[1]!) === 6) return `is an IPv6 address in URL brackets: give it bare (${bracketed[1]!}), and the port in server.port`
  return 'must be an IP address (0.0.0.0, ::, 127.0.0.1, ::1) or a host name'
}
