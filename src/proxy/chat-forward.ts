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
import { answerTooLargeError, brokenAnswerError, causeOf, classifyUpstreamFailure, unusableAnswerError } from '../errors/upstream-errors.js'
import type { ModelRoute } from '../routing/model-route.js'
import { refusalToError } from '../scheduling/key-policy.js'
import type { KeyTicket, ModelSlots } from '../state/store.js'
import type { ChatCompletionBody } from '../schemas/chat.js'
import type { BackendStats } from '../routing/balancers/balancer.js'
import { dispatchChat, type AttemptOutcome, type ChatAnswer } from './chat-dispatch.js'
import type { PassiveFailure } from '../routing/health-state.js'
import { forwardedRequestHeaders, responseHeadersFromUpstream, type HeaderMap } from './headers.js'
import type { ClientDeparture } from './client-departure.js'
import { isEventStream, relayStream, reportBrokenAnswer } from './chat-stream.js'
import { readCompletion, type TokenUsage } from './stream-usage.js'
import { estimatedCompletionUsage } from './usage-estimate.js'
import { AnswerTooLargeError, type UpstreamCall } from './upstream-call.js'
import { closeIfUnread } from './stalled-reader.js'
import { noteRefusedCredentials } from './refused-credentials.js'
import { searchedAnswerBody, UNSEARCHABLE_ANSWER, withoutEchoedSecretsInHeaders } from './credential-echo.js'
import { codingList, isIdentityCoding } from './content-coding.js'

export interface ChatForward {
  readonly route: ModelRoute
  /** The normalized body as its bytes (proxy/chat-upstream-body.ts). */
  readonly payload: string | Buffer
  /** The client's body size: a waiter holds it (and more) while it waits (scheduling/queued-bodies.ts). */
  readonly bodyBytes: number
  /** The client's messages, read only to estimate an answer's usage when it reports none. */
  readonly messages: ChatCompletionBody['messages']
  readonly requestId: string
  readonly priority: number
  /** The client asked for a stream (`stream: true`). */
  readonly stream: boolean
  /** The gateway added `include_usage` for its own accounting: hide it from the client. */
  readonly stripInjectedUsage: boolean
  readonly ticket: KeyTicket
  /** Prefix-affinity key of the prompt (null when the model does not balance by prefix). */
  readonly affinityKey: string | null
  /** Departs when the client goes away (watched since before admission). */
  readonly client: ClientDeparture
}

export async function forwardChat(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, job: ChatForward): Promise<FastifyReply> {
  const { client } = job
  let call: UpstreamCall | null = null
  client.addEventListener('abort', () => call?.abort(client.reason!))
  let answer: ChatAnswer
  // A request that never gets a slot (turned away, timed out, its client gone) logs its wait up to its end.
  request.facts.queuedAtMs = reply.elapsedTime
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
      onFailure: (backend, outcome, backendFault) => {
        ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: backend.name, reason: outcome })
        if (backendFault) ctx.monitor.reportFailure(job.route, backend, passiveFailureOf(outcome), outcome)
      },
      onRetry: (backend, outcome, error) => {
        request.log.warn({ request_id: job.requestId, model: job.route.name, backend: backend.name, reason: outcome, cause: causeOf(error) }, 'backend attempt failed; trying another backend')
      },
    })
  } catch (error) {
    job.ticket.release()
    if (client.aborted) return unlessCutOff(reply, client)
    throw refusalToError(error, ctx.metrics)
  }
  if (answer.statusCode === 401) noteRefusedCredentials(ctx.metrics, request.log, { model: job.route.name, backend: answer.backend.name, target: answer.backend }, job.requestId, ctx.clock.now())
  const settle = settlement(ctx, request, job, answer)
  // Added to the fresh map rather than spread into a new one: a spread that overrides keys is V8's slow path.
  const responseHeaders = responseHeadersFromUpstream(answer.headers)
  responseHeaders['x-request-id'] = job.requestId
  // Any answer's headers may quote the api_key the backend was sent (a debug echo): never the client's to see.
  withoutEchoedSecretsInHeaders(responseHeaders, answer.backend.echoableSecrets)

  // Asked for identity and compressed anyway: neither a completion nor a stream the gateway can read
  // (the relay spliced compressed bytes, and the client got a gzip label over a plain error event).
  if (answer.statusCode === 200 && !isIdentityCoding(codingList(answer.headers['content-encoding']))) throw unusableAnswer(ctx, job, answer, settle)
  if (answer.statusCode === 200 && isEventStream(answer.headers['content-type'])) {
    if (job.stream) {
      relayStream(ctx, request, reply, job, answer, settle, responseHeaders)
      return reply
    }
    // A stream to a request that asked for a completion: the openai client failed parsing it as JSON
    // (a chat review). A backend that does not do what it was asked, like one sending no completion.
    throw unusableAnswer(ctx, job, answer, settle)
  }
  // Read whole and sent whole: its first byte (or its status) was the wait, and a long body is idle_ms's.
  answer.call.firstBytesSent()

  let body: Buffer
  try {
    body = await answer.call.readAll(ctx.config.server.answer_limit_bytes, answer.headers['content-length'])
  } catch (error) {
    settle(null)
    if (client.aborted) return unlessCutOff(reply, client)
    const reason = classifyUpstreamFailure(error)
    if (error instanceof AnswerTooLargeError) {
      // The backend did nothing wrong: the answer is more than this gateway holds.
      ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: answer.backend.name, reason })
      throw answerTooLargeError(`backend "${answer.backend.name}"`, error.limitBytes, error, 'ask for a stream instead')
    }
    reportBrokenAnswer(ctx, job.route, answer, reason)
    throw brokenAnswerError(reason, `backend "${answer.backend.name}"`, error)
  }
  if (answer.statusCode !== 200) {
    settle(null)
    // Whole: a 4xx is the client's answer from a working backend (a 5xx was counted against it).
    if (answer.statusCode < 500) ctx.monitor.reportSuccess(answer.backend)
    // An error answer may quote the api_key the backend refused: never the client's to see.
    const searched = searchedAnswerBody(body, responseHeaders, answer.backend.echoableSecrets, ctx.config.server.answer_limit_bytes)
    if (searched === null) request.log.warn({ request_id: job.requestId, model: job.route.name, backend: answer.backend.name, content_encoding: answer.headers['content-encoding'] }, UNSEARCHABLE_ANSWER)
    return sendAnswer(reply, answer.statusCode, responseHeaders, searched ?? EMPTY_BODY, job.route.settings.timeouts.idle_ms)
  }
  const completion = readCompletion(body)
  // A success that is not a completion at all is a broken backend, not an answer to pass on.
  if (completion === undefined) throw unusableAnswer(ctx, job, answer, settle)
  settle(completion.usage ?? estimatedCompletionUsage(job.messages, completion.choices))
  ctx.monitor.reportSuccess(answer.backend)
  return sendAnswer(reply, answer.statusCode, responseHeaders, body, job.route.settings.timeouts.idle_ms)
}

const EMPTY_BODY = Buffer.alloc(0)

/** A 200 that is no answer to what was asked: dropped (if still coming), charged nothing, counted against the backend; a 502 for the client. */
function unusableAnswer(ctx: GatewayContext, job: ChatForward, answer: ChatAnswer, settle: (usage: TokenUsage | null) => void): GatewayError {
  answer.call.drop()
  settle(null)
  reportBrokenAnswer(ctx, job.route, answer, 'bad_response')
  return unusableAnswerError(`backend "${answer.backend.name}"`, null)
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

/** What the balancer knows of each candidate: its requests in flight (every replica's in Redis mode), and the backend's own queue if fresh. */
function backendStats(ctx: GatewayContext, route: ModelRoute, slots: ModelSlots, names: readonly string[]): Map<string, BackendStats> {
  return new Map(
    names.map((name) => {
      const load = ctx.monitor.freshLoad(route.backend(name), route)
      return [name, { inFlight: slots.load(name), backendWaiting: load?.waiting }]
    }),
  )
}

function passiveFailureOf(outcome: AttemptOutcome): PassiveFailure {
  return outcome === 'connect' ? 'connect' : outcome === 'timeout' ? 'timeout' : 'status'
}
