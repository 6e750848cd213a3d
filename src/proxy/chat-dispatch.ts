/**
 * Sends one chat request to a backend of its model, trying another backend
 * when one cannot be reached or hangs up before answering, up to the model's
 * `retries`. Nothing has reached the client at this point, so a retry is
 * invisible to it.
 */
import type { Dispatcher } from 'undici'
import { GatewayError } from '../errors/gateway-error.js'
import { classifyUpstreamFailure, isRetryable, upstreamError, type UpstreamFailureReason } from '../errors/upstream-errors.js'
import type { Backend } from '../routing/backend.js'
import type { ModelRoute } from '../routing/model-route.js'
import type { HeaderMap } from './headers.js'

export interface ChatAnswer {
  readonly backend: Backend
  readonly statusCode: number
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: Dispatcher.ResponseData['body']
  /** Attempts that failed before this one. */
  readonly retries: number
}

export interface DispatchObserver {
  onAttempt(backend: Backend): void
  onFailure(backend: Backend, reason: UpstreamFailureReason): void
}

export interface ChatDispatch {
  readonly route: ModelRoute
  readonly payload: string
  readonly headers: HeaderMap
  readonly signal: AbortSignal
  readonly observer: DispatchObserver
}

export async function dispatchChat({ route, payload, headers, signal, observer }: ChatDispatch): Promise<ChatAnswer> {
  const tried = new Set<Backend>()
  let lastError: GatewayError | null = null
  for (let attempt = 0; attempt <= route.settings.retries; attempt++) {
    const backend = route.pick(tried)
    if (backend === null) break
    tried.add(backend)
    observer.onAttempt(backend)
    try {
      const response = await backend.pool.request({
        path: backend.pathFor('/v1/chat/completions'),
        method: 'POST',
        headers: withBackendAuth(headers, backend),
        body: payload,
        signal,
      })
      return { backend, statusCode: response.statusCode, headers: response.headers, body: response.body, retries: attempt }
    } catch (error) {
      if (signal.aborted) throw error
      const reason = classifyUpstreamFailure(error)
      observer.onFailure(backend, reason)
      lastError = upstreamError(reason, `backend "${backend.name}"`, error)
      if (!isRetryable(reason)) throw lastError
    }
  }
  throw lastError ?? new GatewayError('no_healthy_backend', `Model "${route.name}" has no healthy backend right now.`)
}

function withBackendAuth(headers: HeaderMap, backend: Backend): HeaderMap {
  if (backend.apiKey === undefined) return headers
  return { ...headers, authorization: `Bearer ${backend.apiKey}` }
}
