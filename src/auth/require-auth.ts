/** A route-level `onRequest` hook: authenticate before the body is even read. */
import type { onRequestAsyncHookHandler } from 'fastify'
import type { Authenticators } from './authenticate.js'
import { authenticate } from './authenticate.js'
import type { AuthRequirement } from './principal.js'

export function requireAuth(authenticators: Authenticators, requirement: AuthRequirement): onRequestAsyncHookHandler {
  return async (request) => {
    request.facts.principal = await authenticate(request.headers.authorization, requirement, authenticators)
  }
}
