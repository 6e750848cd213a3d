/**
 * A route-level `onRequest` hook: authenticate before the body is even read.
 * Node keeps only the first of several Authorization headers; a proxy in
 * front might read the last, so a request carrying more than one is refused
 * rather than have the two disagree about who is calling.
 */
import type { onRequestAsyncHookHandler } from 'fastify'
import type { Authenticators } from './authenticate.js'
import { authenticate, duplicateCredentials } from './authenticate.js'
import type { AuthRequirement } from './principal.js'

export function requireAuth(authenticators: Authenticators, requirement: AuthRequirement): onRequestAsyncHookHandler {
  return async (request) => {
    if (countAuthorizationHeaders(request.raw.rawHeaders) > 1) throw duplicateCredentials(requirement)
    request.facts.principal = await authenticate(request.headers.authorization, requirement, authenticators)
  }
}

function countAuthorizationHeaders(rawHeaders: readonly string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'authorization') count++
  return count
}
