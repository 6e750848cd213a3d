/**
 * What the schema cannot say about the credentials a config holds for its
 * backends and upstreams. Each rule catches a config that `check` used to
 * pass and that then failed at run time, or leaked:
 *
 * - a secret sent in a header must be something a header can carry: a
 *   line break (secret files usually end in one), a control character or a
 *   character beyond ASCII made undici refuse every request, which the
 *   client saw as a 502 blaming the upstream;
 * - a Basic user-id may not contain `:` (RFC 7617 §2: the upstream would
 *   split it there);
 * - a URL may not carry `user:password@`: it is not used for auth (the
 *   connection pool takes the origin only) and a backend's URL is its
 *   default name, so the password showed in metric labels and logs;
 * - a URL must parse (the schema's pattern passed `http://127.0.0.1:99999`,
 *   and the gateway then failed to start with a TypeError) and carry no
 *   query or fragment (the request path is appended to the URL's path, and
 *   those were silently dropped).
 */

import { isNumericHostName, NUMERIC_HOST_PROBLEM } from './listen-host.js'

/** Why `value` cannot be sent as a header credential; null when it can. */
export function headerSecretProblem(value: string): string | null {
  if (/[\r\n]\s*$/.test(value)) return 'ends in a line break (a secret read from a file often does): remove it'
  if (hasControlCharacter(value)) return 'contains a control character, which an HTTP header cannot carry'
  if (/[^\u0020-\u007e]/.test(value)) return 'contains a character beyond printable ASCII, which an HTTP header cannot carry as is'
  if (value.trim() !== value) return 'starts or ends with a space, which HTTP drops from a header value'
  return null
}

/** Why `value` cannot be one half of Basic credentials; null when it can. */
export function basicCredentialProblem(value: string, half: 'username' | 'password'): string | null {
  if (/[\r\n]\s*$/.test(value)) return 'ends in a line break (a secret read from a file often does): remove it'
  if (hasControlCharacter(value)) return 'contains a control character (RFC 7617 §2 forbids them)'
  if (half === 'username' && value.includes(':')) return 'contains ":", which RFC 7617 §2 forbids in a user-id: the upstream would split it there'
  return null
}

/** C0 controls and DEL (ASCII control characters). */
function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code < 0x20 || code === 0x7f) return true
  }
  return false
}

/** Why `url` may not be configured as a backend's or an upstream's base URL; null when it may. */
export function baseUrlProblem(url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    // The schema's pattern reports one that is not http(s) at all.
    return /^https?:\/\//.test(url) ? 'is not a valid URL (check the host, the port (1-65535) and any %-escapes)' : null
  }
  // Port 0 parses, but no server listens there: every request would fail to connect.
  if (parsed.port === '0') return 'has port 0: give the port the server listens on (1-65535)'
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry user:password@ (it is not sent, and would show in metric labels and logs): use api_key or auth instead'
  if (url.includes('?') || url.includes('#')) return 'must not carry a query (?…) or fragment (#…): request paths are appended to the URL’s path, and these would be dropped'
  return null
}

/**
 * Why `url` cannot be the base of a server whose paths the gateway writes
 * from `/v1/…` on (vLLM backends, the training and checkpoint upstreams):
 * a base ending in `/v1` (the OpenAI clients' habit) sent every request to
 * `…/v1/v1/…` and every health check to `…/v1/health`, and `check` passed it.
 */
export function v1BaseProblem(url: string): string | null {
  let path: string
  try {
    path = new URL(url).pathname
  } catch {
    return null
  }
  return /\/v1\/*$/i.test(path) ? 'ends in /v1, and the gateway adds /v1/… itself (requests would go to …/v1/v1/…): give the server’s root' : null
}

/**
 * Why ioredis cannot use `url` as written; null when it can. Both passed
 * `check` and then failed at run time (a security audit): a database path
 * that is not a number (`/notadb`) became SELECT NaN, whose refusal was
 * thrown where nothing caught it and ended the process after it announced
 * it was listening; a broken %-escape in the userinfo (a password with a
 * bare %) threw from ioredis's decodeURIComponent at start, with a stack.
 * Neither message quotes the URL: it may hold a password.
 */
export function redisUrlProblem(url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return null
  }
  // ioredis reads a URL without a host as its defaults, localhost:6379: `redis://${REDIS_HOST:-}` with the variable empty.
  if (parsed.hostname === '') return 'has no host: redis://host[:port][/db] (ioredis would take localhost:6379)'
  // Its scheme is not one URL parsing checks an IPv4 address for: `redis://10.0.0.256` parsed (an ops review's listen host, here too).
  if (isNumericHostName(parsed.hostname)) return `has a host that ${NUMERIC_HOST_PROBLEM}`
  if (!/^\/?(\d+)?$/.test(parsed.pathname)) return 'has a path that is not a database number: redis://host:port/N, N from 0'
  try {
    decodeURIComponent(parsed.username)
    decodeURIComponent(parsed.password)
  } catch {
    return 'has a broken %-escape in its user or password: write a % in them as %25'
  }
  return null
}
