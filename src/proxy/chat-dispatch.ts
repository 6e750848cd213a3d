/**
 * Gets one chat request a slot and an answer: waits for a slot in the
 * model's queue, sends the request to the backend the balancer chose, and,
 * when that backend cannot be reached or hangs up before answering, moves to
 * a free slot on another backend, up to the model's `retries`. Nothing has
 * reached the client at this point, so a retry is invisible to it.
 */
import type { Dispatcher } from 'undici'
import { GatewayError } from '../errors/gateway-error.js'
import { classifyUpstreamFailure, isRetryable, upstreamError, type UpstreamFailureReason } from '../errors/upstream-errors.js'
import type { Backend } from '../routing/backend.js'
import type { ModelRoute } from '../routing/model-route.js'
import type { ModelSlots, SlotLease } from '../state/store.js'
import type { HeaderMap } from './headers.js'

export interface ChatAnswer {
  readonly lease: SlotLease
  readonly backend: Backend
  readonly statusCode: number
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: Dispatcher.ResponseData['body']
  /** Attempts that failed before this one. */
  readonly retries: number
}

export interface ChatDispatch {
  readonly route: ModelRoute
  readonly slots: ModelSlots
  readonly priority: number
  readonly payload: string
  readonly headers: HeaderMap
  readonly signal: AbortSignal
  readonly onFailure: (backend: Backend, reason: UpstreamFailureReason) => void
}

export async function dispatchChat(job: ChatDispatch): Promise<ChatAnswer> {
  const { route, slots, signal } = job
  if (!route.hasUsableBackend()) throw new GatewayError('no_healthy_backend', `Model "${route.name}" has no healthy backend right now.`)
  const choose = (names: readonly string[]) => route.choose(names)
  let lease = await slots.acquire({ priority: job.priority, signal, choose })
  const tried = new Set<string>()
  for (let attempt = 0; ; attempt++) {
    const backend = route.backend(lease.backend)
    tried.add(backend.name)
    try {
      signal.throwIfAborted()
      const response = await backend.pool.request({
        path: backend.pathFor('/v1/chat/completions'),
        method: 'POST',
        headers: withBackendAuth(job.headers, backend),
        body: job.payload,
        signal,
      })
      return { lease, backend, statusCode: response.statusCode, headers: response.headers, body: response.body, retries: attempt }
    } catch (error) {
      lease.release()
      if (signal.aborted) throw error
      const reason = classifyUpstreamFailure(error)
      job.onFailure(backend, reason)
      const failure = upstreamError(reason, `backend "${backend.name}"`, error)
      const next = isRetryable(reason) && attempt < route.settings.retries ? await slots.tryAcquire(tried, choose) : null
      if (next === null) throw failure
      lease = next
    }
  }
}

function withBackendAuth(headers: HeaderMap, backend: Backend): HeaderMap {
  if (backend.apiKey === undefined) return headers
  return { ...headers, authorization: `Bearer ${backend.apiKey}` }
}
