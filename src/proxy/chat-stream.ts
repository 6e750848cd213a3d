/**
 * A chat answer that is an event stream, written to the client's socket as
 * the backend sends it (chat-forward.ts decides which answers are): events
 * go out as they complete (the head with the first of them), the client's
 * backpressure pauses the backend, a failure before any event is the
 * request's answer (502/504), one after ends the stream with an error event
 * and [DONE], and the backend's own error events are noted (error-event.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayContext } from '../context.js'
import type { GatewayError } from '../errors/gateway-error.js'
import { brokenAnswerError, causeOf, classifyUpstreamFailure, upstreamError, type UpstreamFailureReason } from '../errors/upstream-errors.js'
import type { ModelRoute } from '../routing/model-route.js'
import type { AttemptOutcome, ChatAnswer } from './chat-dispatch.js'
import type { ChatForward } from './chat-forward.js'
import type { ErrorEvent } from './error-event.js'
import type { HeaderMap } from './headers.js'
import { SseRelay } from './sse-relay.js'
import { closeIfUnread } from './stalled-reader.js'
import type { TokenUsage } from './stream-usage.js'
import { estimatedStreamUsage } from './usage-estimate.js'

/**
 * How long a backend may take to end its stream once it sent `[DONE]`. Its
 * last chunk normally follows at once (often in a later packet, so aborting
 * at [DONE] would cost the pooled connection); one that never comes is the
 * backend's fault, and its connection is closed rather than kept to idle_ms.
 */
const AFTER_DONE_GRACE_MS = 1000
/** The access line's error_code for a stream in which the backend reported an error (error-event.ts). */
const ERROR_EVENT_CODE = 'upstream_error_event'

/** Whether an answer is an event stream (its Content-Type, any case, parameters allowed). */
export function isEventStream(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.toLowerCase().startsWith('text/event-stream')
}

/**
 * Writes an event stream to the client's socket as the backend sends it.
 * The reply is taken over from fastify (no stream object in between): the
 * client's backpressure pauses the backend, and its leaving aborts it.
 */
export function relayStream(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, job: ChatForward, answer: ChatAnswer, settle: (usage: TokenUsage | null) => void, headers: HeaderMap): void {
  const res = reply.raw
  const relay = new SseRelay(job.stripInjectedUsage)
  const model = job.route.name
  reply.hijack()
  headers['x-accel-buffering'] = 'no'
  // The head goes with the first bytes the client gets: until then a failure is still the
  // request's answer (504 when the first event is late), not an event inside a 200.
  let opened = false
  const open = (): void => {
    if (opened) return
    opened = true
    answer.call.firstBytesSent()
    res.writeHead(200, headers)
  }
  // The client stopped reading: the backend is paused, and its idle timeout does not run out while it is
  // (upstream-call.ts). A client that reads nothing more for idle_ms is let go of, or one idle socket held a slot for good.
  let stalled: NodeJS.Timeout | undefined
  res.on('drain', () => {
    clearTimeout(stalled)
    stalled = undefined
    answer.call.resume()
  })
  res.on('close', () => clearTimeout(stalled))
  const noteStalledClient = (): void => {
    request.log.info({ request_id: request.facts.requestId, idle_ms: job.route.settings.timeouts.idle_ms }, 'client read nothing of its stream for idle_ms: connection closed')
  }
  const letGoOfStalledClient = (): void => {
    noteStalledClient()
    answer.call.abort(new Error('The client stopped reading.'))
    res.destroy()
  }
  // The stream's last bytes may wait behind a client reading nothing: its slot is freed at the
  // response's close, so a client that stays connected without reading is let go of as above.
  const end = (last: Buffer | null): void => {
    res.end(last ?? undefined)
    closeIfUnread(res, job.route.settings.timeouts.idle_ms, noteStalledClient)
  }
  // What the answer is charged: its reported usage, else an estimate; nothing when none of it reached the
  // client (a 502/504, or a client gone before the first event), as for a failure before the headers.
  const usage = () => (opened ? (relay.usage ?? estimatedStreamUsage(job.messages, relay.events)) : null)
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
      if (out !== null) open()
      if (!relay.complete) {
        if (out === null || res.write(out)) return true
        stalled ??= setTimeout(letGoOfStalledClient, job.route.settings.timeouts.idle_ms)
        return false
      }
      // [DONE]: the client's answer ends now, whether or not the backend ends its own.
      ctx.monitor.reportSuccess(answer.backend)
      end(out)
      lingering = setTimeout(letGoOfLingering, AFTER_DONE_GRACE_MS)
      return true
    },
    end: () => {
      clearTimeout(lingering)
      if (res.writableEnded) return
      const rest = relay.end()
      // An unfinished last event is dropped with the failure: it opens nothing.
      if (rest !== null && relay.complete) open()
      settle(usage())
      if (relay.complete) {
        ctx.monitor.reportSuccess(answer.backend)
        end(rest)
      }
      else breakOff('bad_response', undefined, 'backend ended its stream without [DONE]')
    },
    error: (error) => {
      clearTimeout(lingering)
      if (res.writableEnded) return
      settle(usage())
      const cutOff = job.client.cutOffBy
      if (answer.call.aborted && cutOff === null) return
      if (cutOff !== null) endWith(cutOff)
      else breakOff(classifyUpstreamFailure(error), error, 'backend failed mid-stream')
    },
  })
  /**
   * The backend's own error inside the stream (error-event.ts) goes to the client unchanged; the
   * access line, whose status is the 200 already sent, gets a code for it once the answer is whole
   * (set now, a client leaving before that would be logged as the gateway's doing, not a 499).
   */
  function noteErrorEvent(event: ErrorEvent): void {
    ctx.metrics.upstreamErrors.inc({ model, backend: answer.backend.name, reason: 'error_event' })
    request.log.warn({ request_id: request.facts.requestId, model: job.route.name, backend: answer.backend.name, error_type: event.type, error_status: event.code }, 'backend reported an error inside its stream')
    res.once('finish', () => (request.facts.errorCode ??= ERROR_EVENT_CODE))
  }
  /** A backend still holding its stream open well after [DONE] would hold a pooled connection until idle_ms. */
  function letGoOfLingering(): void {
    request.log.warn({ request_id: request.facts.requestId, model: job.route.name, backend: answer.backend.name }, 'backend kept its stream open after [DONE]; closed')
    answer.call.abort(new Error('The backend kept its stream open after [DONE].'))
  }
  /**
   * The backend's fault, counted and logged. Before any event reached the client it is the
   * request's answer, as a failure before the headers is (504 for a first event too late);
   * after, it ends the stream (mid_stream).
   */
  function breakOff(reason: UpstreamFailureReason, error: unknown, why: string): void {
    const target = `backend "${answer.backend.name}"`
    const failure = opened ? brokenAnswerError(reason, target, error) : upstreamError(reason, target, error)
    reportBrokenAnswer(ctx, job.route, answer, opened ? 'mid_stream' : reason)
    request.log.warn({ request_id: request.facts.requestId, model: job.route.name, backend: answer.backend.name, error_code: failure.code, cause: causeOf(error) }, opened ? why : `${why}, before its first event`)
    endWith(failure)
  }
  /** Ends the client's answer with `failure`: the error event and [DONE] in a stream begun, else the error itself. */
  function endWith(failure: GatewayError): void {
    request.facts.errorCode = failure.code
    if (opened) {
      end(relay.failure(failure.toBody()))
      return
    }
    opened = true
    // The Content-Type every other error answer gets from fastify (error-handler.ts).
    res.writeHead(failure.status, { ...failure.headers, 'content-type': 'application/json; charset=utf-8', 'x-request-id': job.requestId })
    res.end(JSON.stringify(failure.toBody()))
  }
}

/**
 * An answer that broke after its head (cut off, not a completion, a stream
 * that failed): counted, and a passive failure of its backend, whichever
 * way the answer was being read.
 */
export function reportBrokenAnswer(ctx: GatewayContext, route: ModelRoute, answer: ChatAnswer, reason: AttemptOutcome | 'mid_stream'): void {
  ctx.metrics.upstreamErrors.inc({ model: route.name, backend: answer.backend.name, reason })
  ctx.monitor.reportFailure(route, answer.backend, 'status', reason)
}
