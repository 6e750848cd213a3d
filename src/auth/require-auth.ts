/**
 * A route-level `onRequest` hook: authenticate before the body is even read.
 * Node keeps only the first of several Authorization headers; a proxy in
 * front might read the last, so a request carrying more than one is refused
 * rather than have the two disagree about who is calling.
 */
import type { onRequestHookHandler } from 'fastify'
import type { Authenticators } from './authenticate.js'
import { authenticate, duplicateCredentials } from './authenticate.js'
import type { AuthRequirement, Principal } from './principal.js'

export function requireAuth(authenticators: Authenticators, requirement: AuthRequirement): onRequestHookHandler {
  // Callback style: a Bearer check is synchronous, so no promise is made for it.
  return (request, _reply, done) => {
    if (countAuthorizationHeaders(request.raw.rawHeaders) > 1) {
      done(duplicateCredentials(requirement))
      return
    }
    let outcome: Principal | Promise<Principal>
    try {
      outcome = authenticate(request.headers.authorization, requirement, authenticators)
    } catch (error) {
      done(error as Error)
      return
    }
    if (!(outcome instanceof Promise)) {
      request.facts.principal = outcome
      done()
      return
    }
    outcome.then(
      (principal) => {
        request.facts.principal = principal
        done()
      },
      (error: unknown) => done(error as Error),
    )
  }
}

function countAuthorizationHeaders(rawHeaders: readonly string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'authorization') count++
  return count
}
