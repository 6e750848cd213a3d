/**
 * Checks a request's Authorization header against a route's requirement:
 * 401 for missing, malformed, unknown or wrong-scheme credentials (with the
 * `WWW-Authenticate` challenge of the route's scheme), 403 for a valid
 * principal without the route's scope.
 */
import { isUtf8 } from 'node:buffer'
import { GatewayError } from '../errors/gateway-error.js'
import { parseAuthorization } from './authorization-header.js'
import type { BearerKeyring } from './bearer.js'
import type { ProvenCredentials } from './proven-credentials.js'
import type { AuthRequirement, Principal } from './principal.js'

export interface Authenticators {
  readonly bearer: BearerKeyring
  /** What each connection already proved (this generation's keys and users). */
  readonly proven: ProvenCredentials
  /** Basic credential check (an unknown user costs a derivation too: auth/basic.ts). */
  readonly basic: (username: string, password: string, clientGone?: AbortSignal) => Promise<Principal | null>
}

const CHALLENGE = {
  bearer: 'Bearer realm="sluice"',
  basic: 'Basic realm="sluice", charset="UTF-8"',
} as const

function unauthorized(requirement: AuthRequirement, code: 'missing_credentials' | 'invalid_credentials' | 'wrong_auth_scheme', message: string): GatewayError {
  const challenge = code === 'invalid_credentials' && requirement.scheme === 'bearer' ? `${CHALLENGE.bearer}, error="invalid_token"` : CHALLENGE[requirement.scheme]
  return new GatewayError(code, message, { headers: { 'www-authenticate': challenge } })
}

/** 403: the credentials are good, so the refusal names whom it refused (the access log records it). */
export class InsufficientScopeError extends GatewayError {
  readonly principal: Principal

  constructor(principal: Principal, requirement: AuthRequirement) {
    super('insufficient_scope', `Credentials "${principal.id}" lack the "${requirement.scope}" scope this route needs.`)
    this.principal = principal
  }
}

/** Several Authorization headers: which one counts is ambiguous, so none does. */
export function duplicateCredentials(requirement: AuthRequirement): GatewayError {
  return unauthorized(requirement, 'invalid_credentials', 'Send exactly one Authorization header.')
}

/** Synchronous for Bearer keys (the hot path); a promise for Basic (scrypt is asynchronous). */
export function authenticate(header: string | undefined, requirement: AuthRequirement, authenticators: Authenticators, clientGone?: AbortSignal): Principal | Promise<Principal> {
  const parsed = parseAuthorization(header)
  const expected = requirement.scheme === 'bearer' ? 'Bearer' : 'Basic'
  if (header === undefined || header.trim() === '') {
    throw unauthorized(requirement, 'missing_credentials', `Missing credentials: send an Authorization: ${expected} header.`)
  }
  if (parsed === null) {
    throw unauthorized(requirement, 'invalid_credentials', `Malformed Authorization header: expected "${expected} <credentials>".`)
  }
  if (parsed.scheme !== requirement.scheme) throw wrongScheme(requirement, expected, parsed.scheme)
  if (requirement.scheme === 'bearer') return admitted(findKey(parsed.credentials, authenticators), requirement)
  return findUser(parsed.credentials, authenticators, clientGone).then((principal) => admitted(principal, requirement))
}

/**
 * Names the scheme sent only when it is the other one this gateway knows:
 * an unknown word may be the secret itself, sent without a scheme
 * (`Authorization: sk-… x`), and an error body never carries credentials.
 */
function wrongScheme(requirement: AuthRequirement, expected: string, sent: string): GatewayError {
  const known = sent === 'basic' ? 'Basic' : sent === 'bearer' ? 'Bearer' : null
  const message = known === null ? `This route takes ${expected} credentials: send "Authorization: ${expected} <credentials>".` : `This route takes ${expected} credentials, not ${known}.`
  return unauthorized(requirement, 'wrong_auth_scheme', message)
}

/** The principal if it may use the route (403 without its scope), 401 for none. */
export function admitted(principal: Principal | null, requirement: AuthRequirement): Principal {
  if (principal === null) {
    throw unauthorized(requirement, 'invalid_credentials', requirement.scheme === 'bearer' ? 'Invalid API key.' : 'Invalid username or password.')
  }
  if (!principal.scopes.includes(requirement.scope)) {
    throw new InsufficientScopeError(principal, requirement)
  }
  return principal
}

function findKey(token: string, authenticators: Authenticators): Principal | null {
  const key = authenticators.bearer.find(token)
  return key === null ? null : { kind: 'key', id: key.id, scopes: key.scopes, key }
}

async function findUser(encoded: string, authenticators: Authenticators, clientGone?: AbortSignal): Promise<Principal | null> {
  const decoded = decodeBasic(encoded)
  if (decoded === null) return null
  return authenticators.basic(decoded.username, decoded.password, clientGone)
}

/**
 * `base64(username:password)`; the password may itself contain `:`. The
 * bytes must be UTF-8 (the charset the challenge names) without control
 * characters (RFC 7617): decoded leniently, invalid bytes all became U+FFFD
 * and matched each other, and scrypt's HMAC pads a short key with zeros, so
 * `pw` followed by NULs passed as `pw`. The encoding must be standard padded
 * base64 in its one canonical form (RFC 7617 cites RFC 4648 §4): Node's
 * decoder also takes it unpadded or with stray bits in the last character,
 * so several header values would open the same account.
 */
export function decodeBasic(encoded: string): { username: string; password: string } | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return null
  const bytes = Buffer.from(encoded, 'base64')
  if (bytes.toString('base64') !== encoded) return null
  if (!isUtf8(bytes)) return null
  const text = bytes.toString('utf8')
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(text)) return null
  const colon = text.indexOf(':')
  if (colon <= 0) return null
  return { username: text.slice(0, colon), password: text.slice(colon + 1) }
}
