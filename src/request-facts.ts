/**
 * What the gateway learns about a request while handling it, kept on the
 * request so the access log line and the metrics at completion can read it.
 * Values are configured names or fixed words, never raw input, so they are
 * safe as metric labels.
 */
import type { Principal } from './auth/principal.js'

export type RouteFamily = 'chat' | 'models' | 'training' | 'checkpoints' | 'objects' | 'service' | 'unknown'

export interface RequestFacts {
  route: RouteFamily
  /** The effective request id (chat: header, else body, else generated). */
  requestId: string
  principal: Principal | null
  /** Configured model name, '' when none applies. */
  model: string
  backend: string | null
  retries: number
  errorCode: string | null
  /** Token usage the answer reported, when it did. */
  tokens: { readonly prompt: number; readonly completion: number } | null
  /** Streams: ms from receiving the request to the first content chunk sent. */
  ttftMs: number | null
  /** Ms the request waited for a slot. */
  queueWaitMs: number | null
  /** Ms from receipt to joining the slot queue (chat): until a slot comes, the wait runs to the request's end. */
  queuedAtMs: number | null
  /** Read off a connection already closing: no answer went out, so it is neither counted nor logged as one. */
  unanswered: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    facts: RequestFacts
  }
  interface FastifyContextConfig {
    /** Route family, the `route` label of request metrics. */
    family?: RouteFamily
  }
}

export function newRequestFacts(route: RouteFamily, requestId: string): RequestFacts {
  return { route, requestId, principal: null, model: '', backend: null, retries: 0, errorCode: null, tokens: null, ttftMs: null, queueWaitMs: null, queuedAtMs: null, unanswered: false }
}
