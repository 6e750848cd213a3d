/**
 * Forwards a validated, admitted chat request and writes the backend's
 * answer to the client: event streams pass through as they arrive, other
 * answers are read whole (so a truncated one becomes a clean 502, not half a
 * JSON document) and sent with the backend's status. The slot and the key's
 * share are held until the answer has fully left or the client went away;
 * then the answer's token usage is counted and charged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayContext } from '../context.js'
import type { GatewayError } from '../errors/gateway-error.js'
import { answerTooLargeError, brokenAnswerError, causeOf, classifyUpstreamFailure, upstreamError } from '../errors/upstream-errors.js'
import type { ModelRoute } from '../routing/model-route.js'
import { refusalToError } from '../scheduling/key-policy.js'
import type { KeyTicket, ModelSlots } from '../state/store.js'
import type { ChatCompletionBody } from '../schemas/chat.js'
import type { BackendStats } from '../routing/balancers/balancer.js'
import { dispatchChat, type AttemptOutcome, type ChatAnswer } from './chat-dispatch.js'
import type { PassiveFailure } from '../routing/health-state.js'
import { forwardedRequestHeaders, responseHeadersFromUpstream, type HeaderMap } from './headers.js'
import type { ClientDeparture } from './client-departure.js'
import type { ErrorEvent } from './error-event.js'
import { SseRelay } from './sse-relay.js'
import { completionUsage, type TokenUsage } from './stream-usage.js'
import { estimatedStreamUsage } from './usage-estimate.js'
import { AnswerTooLargeError, type UpstreamCall } from './upstream-call.js'
import { closeIfUnread } from './stalled-reader.js'

export interface ChatForward {
  readonly route: ModelRoute
  /** The normalized body as its bytes (proxy/chat-upstream-body.ts). */
  readonly payload: string | Buffer
  /** The client's body size: a waiter holds it (and more) while it waits (scheduling/queued-bodies.ts). */
  readonly bodyBytes: number
  /** The client's messages, read only to estimate a stream's usage when it reports none. */
  readonly messages: ChatCompletionBody['messages']
  readonly requestId: string
  readonly priority: number
  /** The gateway added `include_usage` for its own accounting: hide it from the client. */
  readonly stripInjectedUsage: boolean
  readonly ticket: KeyTicket
  /** Prefix-affinity key of the prompt (null when the model does not balance by prefix). */
  readonly affinityKey: string | null
  /** Departs when the client goes away (watched since before admission). */
  readonly client: ClientDeparture
}

/**
 * How long a backend may take to end its stream once it sent `[DONE]`. Its
 * last chunk normally follows at once (often in a later packet, so aborting
 * at [DONE] would cost the pooled connection); one that never comes is the
 * backend's fault, and its connection is closed rather than kept to idle_ms.
 */
const AFTER_DONE_GRACE_MS = 1000
/** The access line's error_code for a stream in which the backend reported an error (error-event.ts). */
const ERROR_EVENT_CODE = 'upstream_error_event'

export async function forwardChat(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, job: ChatForward): Promise<FastifyReply> {
  const { client } = job
  let call: UpstreamCall | null = null
  client.addEventListener('abort', () => call?.abort(client.reason!))
  let answer: ChatAnswer
  try {
    const slots = ctx.state.slots.get(job.route.name)!
    answer = await dispatchChat({
      route: job.route,
      slots,
      choose: (names) => (names.length === 1 ? names[0]! : job.route.choose(names, { affinityKey: job.affinityKey }, backendStats(ctx, job.route, slots, names), ctx.random)),
      priority: job.priority,
      payload: job.payload,
      bodyBytes: job.bodyBytes,
      headers: upstreamRequestHeaders(request, job.requestId),
      signal: client,
      onCall: (started, at) => {
        call = started
        request.facts.backend = at.backend.name
        request.facts.retries = at.retries
        request.facts.queueWaitMs = at.queueWaitMs
      },
      now: () => ctx.clock.now(),
      onFailure: (backend, outcome) => {
        ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: backend.name, reason: outcome })
        ctx.monitor.reportFailure(job.route, backend, passiveFailureOf(outcome))
      },
      onSuccess: (backend) => ctx.monitor.reportSuccess(backend),
    })
  } catch (error) {
    job.ticket.release()
    if (client.aborted) return unlessCutOff(reply, client)
    throw refusalToError(error, ctx.metrics)
  }
  const settle = settlement(ctx, request, job, answer)
  // Added to the fresh map rather than spread into a new one: a spread that overrides keys is V8's slow path.
  const responseHeaders = responseHeadersFromUpstream(answer.headers)
  responseHeaders['x-request-id'] = job.requestId

  if (answer.statusCode === 200 && isEventStream(answer.headers['content-type'])) {
    relayStream(ctx, request, reply, job, answer, settle, responseHeaders)
    return reply
  }

  let body: Buffer
  try {
    body = await answer.call.readAll(ctx.config.server.answer_limit_bytes)
  } catch (error) {
    settle(null)
    if (client.aborted) return unlessCutOff(reply, client)
    const reason = classifyUpstreamFailure(error)
    if (error instanceof AnswerTooLargeError) {
      // The backend did nothing wrong: the answer is more than this gateway holds.
      ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: answer.backend.name, reason })
      throw answerTooLargeError(`backend "${answer.backend.name}"`, error.limitBytes, error)
    }
    reportBrokenAnswer(ctx, job.route, answer, reason)
    throw brokenAnswerError(reason, `backend "${answer.backend.name}"`, error)
  }
  if (answer.statusCode !== 200) {
    settle(null)
    return sendAnswer(reply, answer.statusCode, responseHeaders, body, job.route.settings.timeouts.idle_ms)
  }
  const usage = completionUsage(body)
  settle(usage ?? null)
  if (usage === undefined) {
    // A success that is not a completion at all is a broken backend, not an answer to pass on.
    reportBrokenAnswer(ctx, job.route, answer, 'bad_response')
    throw upstreamError('bad_response', `backend "${answer.backend.name}"`, null)
  }
  return sendAnswer(reply, answer.statusCode, responseHeaders, body, job.route.settings.timeouts.idle_ms)
}

/**
 * A backend's whole answer, as it came (DESIGN.md: status, body byte for
 * byte, headers less hop-by-hop ones). Written past fastify's `send`, which
 * gives a Buffer without a Content-Type one of its own; the only header
 * added is the framing, recomputed for the body sent.
 */
function sendAnswer(reply: FastifyReply, statusCode: number, headers: HeaderMap, body: Buffer, idleMs: number): FastifyReply {
  headers['content-length'] = String(body.length)
  reply.hijack()
  reply.raw.writeHead(statusCode, headers)
  reply.raw.end(body)
  closeIfUnread(reply.raw, idleMs, () => reply.request.log.info({ request_id: reply.request.facts.requestId, idle_ms: idleMs }, 'client read nothing of its answer for idle_ms: connection closed'))
  return reply
}

/**
 * Writes an event stream to the client's socket as the backend sends it.
 * The reply is taken over from fastify (no stream object in between): the
 * client's backpressure pauses the backend, and its leaving aborts it.
 */
function relayStream(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, job: ChatForward, answer: ChatAnswer, settle: (usage: TokenUsage | null) => void, headers: HeaderMap): void {
  const res = reply.raw
  const relay = new SseRelay(job.stripInjectedUsage)
  const model = job.route.name
  reply.hijack()
  headers['x-accel-buffering'] = 'no'
  res.writeHead(200, headers)
  // The client stopped reading: the backend is paused, and undici's idle timeout does not run while it
  // is. A client that reads nothing more for idle_ms is let go of, or one idle socket held a slot for good.
  let stalled: NodeJS.Timeout | undefined
  res.on('drain', () => {
    clearTimeout(stalled)
    stalled = undefined
    answer.call.resume()
  })
  res.on('close', () => clearTimeout(stalled))
  const letGoOfStalledClient = (): void => {
    request.log.info({ request_id: request.facts.requestId, idle_ms: job.route.settings.timeouts.idle_ms }, 'client read nothing of its stream for idle_ms: connection closed')
    answer.call.abort(new Error('The client stopped reading.'))
    res.destroy()
  }
  const usage = () => relay.usage ?? estimatedStreamUsage(job.messages, relay.events)
  // Ahead of the access log's listener (access-log.ts), so a cut stream's line carries the tokens charged.
  res.prependListener('close', () => settle(usage()))
  let lingering: NodeJS.Timeout | undefined
  answer.call.consume({
    data: (chunk) => {
      // The answer is whole and sent; bytes after [DONE] are nobody's.
      if (res.writableEnded) return true
      const { out, firstContent, errorEvent } = relay.push(chunk)
      if (errorEvent !== null) noteErrorEvent(errorEvent)
      if (firstContent) {
        request.facts.ttftMs = reply.elapsedTime
        ctx.metrics.timeToFirstToken.observe({ model }, reply.elapsedTime / 1000)
      }
      if (!relay.complete) {
        if (out === null || res.write(out)) return true
        stalled ??= setTimeout(letGoOfStalledClient, job.route.settings.timeouts.idle_ms)
        return false
      }
      // [DONE]: the client's answer ends now, whether or not the backend ends its own.
      res.end(out ?? undefined)
      lingering = setTimeout(letGoOfLingering, AFTER_DONE_GRACE_MS)
      return true
    },
    end: () => {
      clearTimeout(lingering)
      if (res.writableEnded) return
      settle(usage())
      const rest = relay.end()
      if (relay.complete) res.end(rest ?? undefined)
      else breakOff(brokenAnswerError('bad_response', `backend "${answer.backend.name}"`, undefined), 'backend ended its stream without [DONE]')
    },
    error: (error) => {
      clearTimeout(lingering)
      if (res.writableEnded) return
      settle(usage())
      const cutOff = job.client.cutOffBy
      if (answer.call.aborted && cutOff === null) return
      if (cutOff !== null) breakOff(cutOff)
      else breakOff(brokenAnswerError(classifyUpstreamFailure(error), `backend "${answer.backend.name}"`, error), 'backend failed mid-stream', error)
    },
  })
  /**
   * The backend's own error inside the stream (error-event.ts) goes to the client unchanged; the
   * access line, whose status is the 200 already sent, gets a code for it once the answer is whole
   * (set now, a client leaving before that would be logged as the gateway's doing, not a 499).
   */
  function noteErrorEvent(event: ErrorEvent): void {
    ctx.metrics.upstreamErrors.inc({ model, backend: answer.backend.name, reason: 'error_event' })
    request.log.warn({ request_id: request.facts.requestId, backend: answer.backend.name, error_type: event.type, error_status: event.code }, 'backend reported an error inside its stream')
    res.once('finish', () => (request.facts.errorCode ??= ERROR_EVENT_CODE))
  }
  /** A backend still holding its stream open well after [DONE] would hold a pooled connection until idle_ms. */
  function letGoOfLingering(): void {
    request.log.warn({ request_id: request.facts.requestId, backend: answer.backend.name }, 'backend kept its stream open after [DONE]; closed')
    answer.call.abort(new Error('The backend kept its stream open after [DONE].'))
  }
  /** Closes the client's stream with the error event and [DONE]; the backend's fault (`why` given) is counted and logged. */
  function breakOff(failure: GatewayError, why?: string, error?: unknown): void {
    if (why !== undefined) {
      reportBrokenAnswer(ctx, job.route, answer, 'mid_stream')
      request.log.warn({ request_id: request.facts.requestId, backend: answer.backend.name, error_code: failure.code, cause: causeOf(error) }, why)
    }
    request.facts.errorCode = failure.code
    res.end(relay.failure(failure.toBody()))
  }
  // The backend sent its headers but no whole event yet: the client hears of the stream now.
  if (!res.headersSent && !res.writableEnded) res.flushHeaders()
}

/**
 * An answer that broke after its head (cut off, not a completion, a stream
 * that failed): counted, and a passive failure of its backend, whichever
 * way the answer was being read.
 */
function reportBrokenAnswer(ctx: GatewayContext, route: ModelRoute, answer: ChatAnswer, reason: AttemptOutcome | 'mid_stream'): void {
  ctx.metrics.upstreamErrors.inc({ model: route.name, backend: answer.backend.name, reason })
  ctx.monitor.reportFailure(route, answer.backend, 'status')
}

/** The client left: nothing to answer. Cut off by the gateway: it hears why (503, in the error shape). */
export function unlessCutOff(reply: FastifyReply, client: ClientDeparture): FastifyReply {
  if (client.cutOffBy !== null) throw client.cutOffBy
  return reply.hijack()
}

function upstreamRequestHeaders(request: FastifyRequest, requestId: string): HeaderMap {
  const headers = forwardedRequestHeaders(request.headers)
  headers['content-type'] = 'application/json'
  headers['x-request-id'] = requestId
  // The gateway reads every answer (usage, events): a compressed one would be a 502.
  headers['accept-encoding'] = 'identity'
  return headers
}

/**
 * Ends the request's hold on shared capacity exactly once: the slot goes to
 * the next waiter, the key's concurrency share is returned, and the tokens
 * the answer reported (estimated for a stream that reported none) are
 * counted and charged.
 */
function settlement(ctx: GatewayContext, request: FastifyRequest, job: ChatForward, answer: ChatAnswer): (usage: TokenUsage | null) => void {
  let settled = false
  return (usage) => {
    if (settled) return
    settled = true
    answer.lease.release()
    job.ticket.release()
    if (usage === null) return
    const key = request.facts.principal?.id ?? ''
    ctx.metrics.tokens.inc({ model: job.route.name, key, kind: 'prompt' }, usage.prompt)
    ctx.metrics.tokens.inc({ model: job.route.name, key, kind: 'completion' }, usage.completion)
    request.facts.tokens = usage
    job.ticket.chargeTokens(usage.prompt + usage.completion).catch((error: unknown) => request.log.warn({ err: error, request_id: request.facts.requestId }, 'charging tokens failed'))
  }
}

/** What the balancer knows of each candidate: in flight here, and the backend's own queue if fresh. */
function backendStats(ctx: GatewayContext, route: ModelRoute, slots: ModelSlots, names: readonly string[]): Map<string, BackendStats> {
  return new Map(
    names.map((name) => {
      const load = ctx.monitor.freshLoad(route.backend(name), route)
      return [name, { inFlight: slots.inFlight(name), backendWaiting: load?.waiting }]
    }),
  )
}

function passiveFailureOf(outcome: AttemptOutcome): PassiveFailure {
  return outcome === 'connect' ? 'connect' : outcome === 'timeout' ? 'timeout' : 'status'
}

function isEventStream(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.toLowerCase().startsWith('text/event-stream')
}
