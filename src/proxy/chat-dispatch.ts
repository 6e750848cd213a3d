/**
 * Gets one chat request a slot and an answer: waits for a slot in the
 * model's queue, sends the request to the backend the balancer chose, and,
 * when that backend cannot be reached, hangs up before answering, or answers
 * 502/503, moves to a free slot on another usable backend, up to the model's
 * `retries` (one that refused the connection is down: with no free slot
 * elsewhere the request waits in the queue again rather than failing).
 * Nothing has reached the client at this point, so a retry is invisible to
 * it; the request body is the same string each time. A backend's 4xx (and
 * other 5xx) answers are the client's answer, not retried.
 */
import { classifyUpstreamFailure, isRetryable, unusableAnswerError, upstreamError, type UpstreamFailureReason } from '../errors/upstream-errors.js'
import type { Backend } from '../routing/backend.js'
import type { ModelRoute } from '../routing/model-route.js'
import { noHealthyBackend } from '../routing/no-healthy-backend.js'
import type { ModelSlots, SlotLease, SlotRequest } from '../state/store.js'
import type { HeaderMap } from './headers.js'
import type { ClientDeparture } from './client-departure.js'
import { InvalidStatusError, UpstreamCall, type UpstreamHeaders } from './upstream-call.js'

export interface ChatAnswer {
  readonly lease: SlotLease
  readonly backend: Backend
  readonly statusCode: number
  readonly headers: UpstreamHeaders
  /** The exchange, for its body (not yet read) and for abort. */
  readonly call: UpstreamCall
}

/** What an attempt told about the backend, for passive health and metrics. */
export type AttemptOutcome = UpstreamFailureReason | 'status_5xx'

/** Backend answers that mean "try another": it is overloaded or its proxy failed. */
const RETRYABLE_STATUS = new Set([502, 503])

/**
 * The 5xx answers that count against a backend's health: it (or a proxy in
 * front of it) could not serve at all. vLLM's own 500 is about the request
 * it answers (a chat template or a tool parser that raised); a dead engine
 * fails `/health` too. Counted, one request's 500 repeated by the openai
 * client's two retries ejected a model's only backend: 503 for everyone
 * until the next check (a client review, session 24). Envoy keeps the same
 * line with its separate gateway-failure detection.
 */
export function isBackendFaultStatus(status: number): boolean {
  return status === 502 || status === 503 || status === 504
}

export interface ChatDispatch {
  readonly now: () => number
  readonly route: ModelRoute
  readonly slots: ModelSlots
  /** The balancer: one backend among those with a free slot. */
  readonly choose: (names: readonly string[]) => string
  readonly priority: number
  /** The body as sent to every backend tried (retries resend the same bytes). */
  readonly payload: string | Buffer
  /** The client's body size, held in the body budget while the request waits (what body_limit_bytes bounds). */
  readonly bodyBytes: number
  readonly headers: HeaderMap
  /** Aborted when the client goes away: leaves the queue. */
  readonly signal: ClientDeparture
  /**
   * Called with each exchange started, so the caller can abort it when the
   * client leaves and say where the request is (its access line names the
   * backend, the attempts before this one and the queue wait so far: in all,
   * a request put back after a refused connection waits again; also when the
   * request ends before an answer).
   */
  readonly onCall: (call: UpstreamCall, at: { readonly backend: Backend; readonly retries: number; readonly queueWaitMs: number }) => void
  /**
   * A failed attempt. A success is the caller's to report, once the answer
   * is whole: reported at the head, it cleared the failure count of a backend
   * whose every answer broke after its head (each broken answer counted one,
   * each next head reset it), and the backend was never taken out.
   * `backendFault`: whether it counts against the backend's health (every
   * failure but a 5xx answer outside `isBackendFaultStatus`).
   */
  readonly onFailure: (backend: Backend, outcome: AttemptOutcome, backendFault: boolean) => void
  /** A failed attempt is followed by another (its only trace but the metric; a last failure is the request's error). */
  readonly onRetry: (backend: Backend, outcome: AttemptOutcome, error: unknown) => void
}

export async function dispatchChat(job: ChatDispatch): Promise<ChatAnswer> {
  const { route, slots, signal, choose } = job
  if (!route.hasUsableBackend(job.now())) throw noHealthyBackend(route.name)
  const slotRequest: SlotRequest = { priority: job.priority, signal, choose, bodyBytes: job.bodyBytes }
  const retryOn = async (tried: ReadonlySet<string>, attempt: number, backendDown = false): Promise<SlotLease | null> => {
    if (attempt >= route.settings.retries) return null
    const free = await slots.tryAcquire(tried, choose)
    if (free !== null || !backendDown || !route.hasUsableBackend(job.now())) return free
    // The backend refused the connection (and is ejected for it): a slot it was handed as a waiter is
    // no answer, so the request waits for one on a backend that is up, as it did before.
    const requeued = await slots.acquire(slotRequest)
    queueWaitMs += requeued.waitedMs
    return requeued
  }
  let lease = await slots.acquire(slotRequest)
  let queueWaitMs = lease.waitedMs
  const tried = new Set<string>()
  for (let attempt = 0; ; attempt++) {
    const backend = route.backend(lease.backend)
    tried.add(backend.name)
    let call: UpstreamCall
    let response: Awaited<UpstreamCall['head']>
    try {
      signal.throwIfAborted()
      // bodyTimeout 0: the call times the first event and the silences itself (upstream-call.ts).
      const options = { path: backend.pathFor('/v1/chat/completions'), method: 'POST', headers: withBackendAuth(job.headers, backend), body: job.payload, bodyTimeout: 0 } as const
      call = new UpstreamCall(backend.pool, options, backend.firstByteMs, backend.idleMs)
      job.onCall(call, { backend, retries: attempt, queueWaitMs })
      response = await call.head
      // Nothing reaches the client before the body's first byte (a stream's first event comes after
      // vLLM's queue and prefill): a backend that fails until then is retried as one failing before its headers.
      if (response.statusCode === 200) await call.bodyStart()
    } catch (error) {
      if (signal.aborted) {
        lease.release()
        throw error
      }
      const reason = classifyUpstreamFailure(error)
      // Before the slot is freed: a backend a refused connection ejects is not handed to the next waiter.
      job.onFailure(backend, reason, true)
      lease.release()
      const next = isRetryable(reason) ? await retryOn(tried, attempt, reason === 'connect') : null
      // A status beyond 599 is an answer the backend worked for: the client is told not to repeat it.
      if (next === null && error instanceof InvalidStatusError) throw unusableAnswerError(`backend "${backend.name}"`, error)
      if (next === null) throw upstreamError(reason, `backend "${backend.name}"`, error)
      job.onRetry(backend, reason, error)
      lease = next
      continue
    }
    if (response.statusCode >= 500) job.onFailure(backend, 'status_5xx', isBackendFaultStatus(response.statusCode))
    let next: SlotLease | null
    try {
      next = RETRYABLE_STATUS.has(response.statusCode) ? await retryOn(tried, attempt) : null
    } catch (error) {
      // The retry's admission failed: this answer is not the client's either, and its slot is free.
      call.drop()
      lease.release()
      throw error
    }
    if (next === null) return { lease, backend, statusCode: response.statusCode, headers: response.headers, call }
    job.onRetry(backend, 'status_5xx', null)
    call.drop()
    lease.release()
    lease = next
  }
}

function withBackendAuth(headers: HeaderMap, backend: Backend): HeaderMap {
  if (backend.apiKey === undefined) return headers
  return { ...headers, authorization: `Bearer ${backend.apiKey}` }
}
