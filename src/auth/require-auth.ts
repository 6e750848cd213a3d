/**
 * A route-level `onRequest` hook: authenticate before the body is even read.
 * Node keeps only the first of several Authorization headers; a proxy in
 * front might read the last, so a request carrying more than one is refused
 * rather than have the two disagree about who is calling. A header its
 * connection already proved is not checked again (proven-credentials.ts).
 */
import type { ServerResponse } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Authenticators } from './authenticate.js'
import { admitted, authenticate, duplicateCredentials, InsufficientScopeError } from './authenticate.js'
import type { AuthRequirement, Principal } from './principal.js'
import { sendContinue } from './expect-continue.js'
import { ClientLeftError, DerivationsBusyError } from './derivation-limiter.js'
import { GatewayError } from '../errors/gateway-error.js'
import { headerLines } from '../raw-headers.js'

/** An `onRequest` hook, callable outside one too (app.ts, for a target the router refused). */
export type CredentialCheck = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void

/** `bodyLimitBytes`: a client waiting for "100 Continue" is told to send a body up to this size once its credentials passed. */
export function requireAuth(authenticators: Authenticators, requirement: AuthRequirement, bodyLimitBytes: number): CredentialCheck {
  // Callback style: a Bearer check is synchronous, so no promise is made for it.
  return (request, reply, done) => {
    if (headerLines(request.raw.rawHeaders, 'authorization') > 1) {
      done(duplicateCredentials(requirement))
      return
    }
    const header = request.headers.authorization
    const connection = request.raw.socket
    const known = header === undefined ? null : authenticators.proven.recall(connection, header, requirement.scheme)
    let outcome: Principal | Promise<Principal>
    const gone = known === null && requirement.scheme === 'basic' ? whenGone(reply.raw) : undefined
    try {
      outcome = known !== null ? admitted(known, requirement) : authenticate(header, requirement, authenticators, gone?.signal)
    } catch (error) {
      gone?.stop()
      done(refusal(request, error))
      return
    }
    const proven = (principal: Principal) => {
      request.facts.principal = principal
      if (known === null) authenticators.proven.remember(connection, header!, requirement.scheme, principal)
      sendContinue(request.headers, reply.raw, bodyLimitBytes)
    }
    if (!(outcome instanceof Promise)) {
      gone?.stop()
      proven(outcome)
      done()
      return
    }
    // The Basic check is over either way: its 'close' listener goes.
    if (gone !== undefined) outcome = outcome.finally(gone.stop)
    outcome.then(
      (principal) => {
        proven(principal)
        done()
      },
      (error: unknown) => done(refusal(request, error)),
    )
  }
}

/**
 * Aborted when the response closes before its answer: a Basic check still
 * waiting for its turn is dropped. Stopped once the check is over, so the
 * 'close' listener does not stay for the rest of the request (Node warns of
 * a leak past ten listeners of one event, and a platform response gathers
 * nine others by its end).
 */
function whenGone(response: ServerResponse): { readonly signal: AbortSignal; stop(): void } {
  const gone = new AbortController()
  const abort = (): void => gone.abort()
  response.once('close', abort)
  return { signal: gone.signal, stop: () => response.removeListener('close', abort) }
}

/** A 403 still names who asked: the access log records the principal that lacked the scope. */
function refusal(request: FastifyRequest, error: unknown): Error {
  if (error instanceof InsufficientScopeError) request.facts.principal = error.principal
  // Nobody to answer (its access line says 499): not a gateway fault to log as one.
  if (error instanceof ClientLeftError) return new GatewayError('invalid_credentials', error.message)
  if (error instanceof DerivationsBusyError) return new GatewayError('credential_checks_busy', error.message, { headers: { 'retry-after': '1' } })
  return error as Error
}

