/**
 * Forwards a validated platform request to its upstream and passes the
 * answer back unchanged: status, headers less hop-by-hop ones (its
 * Content-Length kept), and the body streamed as it arrives (an object's
 * value can be large), at the pace its client reads it. The one header
 * the gateway sets itself is `X-Request-Id`: every answer names the
 * gateway's id, as on the chat route.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { errors, type Dispatcher } from 'undici'
import type { GatewayContext } from '../context.js'
import { GatewayError } from '../errors/gateway-error.js'
import { answerTooLargeError, brokenAnswerError, causeOf, classifyUpstreamFailure, unusableAnswerError, upstreamError } from '../errors/upstream-errors.js'
import type { Upstream } from '../routing/upstream.js'
import { forwardedRequestHeaders, responseHeadersFromUpstream, type HeaderMap } from './headers.js'
import { markCutOffable } from './in-flight-requests.js'
import { closeIfUnread, watchUnread } from './stalled-reader.js'
import { responseClosed } from './client-departure.js'
import type { KeyTicket } from '../state/store.js'
import { upstreamAuthorization } from './upstream-auth.js'
import { noteRefusedCredentials } from './refused-credentials.js'
import { searchedAnswerBody, UNSEARCHABLE_ANSWER, withoutEchoedSecretsInHeaders } from './credential-echo.js'
import { decodableAcceptEncoding } from './content-coding.js'
import { AnswerTooLargeError } from './upstream-call.js'

export interface PlatformRequest {
  /** HEAD stays HEAD: the upstream sends no body, so none is fetched only to be dropped. */
  readonly method: 'GET' | 'HEAD' | 'POST'
  /** Path and query, already safe to send. */
  readonly path: string
  readonly body: Buffer | null
}

/**
 * `ticket`: the key's share, given back when the response closes. One
 * 'close' listener does all this module's work at the close (the key's
 * share, the upstream call, the stall guard): with fastify's and the
 * stream pipe's, a platform response carried eleven, and Node logged a
 * leak warning for every request.
 */
export async function forwardToUpstream(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, upstream: Upstream, call: PlatformRequest, ticket: KeyTicket): Promise<FastifyReply> {
  // The client left during admission (a round trip in redis mode): its 'close' is past, nothing to answer.
  if (responseClosed(reply.raw)) {
    ticket.release()
    return reply.hijack()
  }
  const upstreamAbort = new AbortController()
  let stopStallGuard = (): void => undefined
  // A shutdown's cut-off aborts with its own error: the client is told (503), or its access line says so.
  markCutOffable(reply.raw, { cutOff: (reason) => upstreamAbort.abort(reason) })
  reply.raw.on('close', () => {
    ticket.release()
    stopStallGuard()
    if (!reply.raw.writableFinished) upstreamAbort.abort()
  })
  // Before the call: a 502/504 access line names the upstream that failed, as the chat route's does.
  request.facts.backend = upstream.name
  const response = await callUpstream(ctx, request, upstream, call, upstreamAbort)
  if (response === null) return reply
  if (response.statusCode < 200 || response.statusCode > 599) throw badStatus(ctx, upstream, response)
  // With forward_client the credentials refused are the client's own: its answer, not the operator's problem.
  if (response.statusCode === 401 && !upstream.forwardsClient) noteRefusedCredentials(ctx.metrics, request.log, { model: '', backend: upstream.name, target: upstream }, request.facts.requestId, ctx.clock.now())
  // An error answer or a redirect may quote the credential the gateway sent: read whole (such bodies are small) and cut out.
  if (bodyMayQuoteCredential(response.statusCode, call) && upstream.echoableSecrets.length > 0) return sendSearchedAnswer(ctx, request, reply, upstream, response, upstreamAbort.signal)
  if (response.statusCode === 204 || response.statusCode === 304) return sendBodiless(request, reply, upstream, response)
  watchBody(ctx, request, upstream, response.body, upstreamAbort.signal)
  // A success's body is the client's data, never searched; its headers (a debug echo) are the operator's business.
  const headers = clientHeaders(response, upstream)
  // The body goes through unchanged, so its length does too (a HEAD answer's is told nowhere else).
  const length = response.headers['content-length']
  if (length !== undefined) headers['content-length'] = length
  headers['x-request-id'] = request.facts.requestId
  // The head leaves when fastify starts the body, not with its first byte: a
  // body failing before that byte is then broken off like any other, where
  // fastify would answer a 500 (its error handler cannot tell it from a bug).
  // An empty Buffer, not flushHeaders(): Node writes the head flushHeaders sends as UTF-8, and an
  // upstream's header byte past ASCII (latin1 `é` in a filename) reached the client as two bytes.
  reply.raw.once('pipe', () => reply.raw.write(NOTHING))
  // A client reading nothing pauses the upstream, where undici's body timeout does not run. Its own
  // bound, not the upstream's first_byte_ms: the kernel shows a reader's progress only every few MiB
  // (a reader at 200 KB/s drained the socket every ~20 s), and a 3 s first_byte_ms cut steady
  // downloads off part-way (a platform review).
  stopStallGuard = watchUnread(reply.raw, upstream.settings.timeouts.client_idle_ms, noteUnreadAnswer(request, upstream))
  return reply.code(response.statusCode).headers(headers).send(response.body)
}

/** The log line of a client let go of for reading nothing of its answer for `client_idle_ms`. */
function noteUnreadAnswer(request: FastifyRequest, upstream: Upstream): () => void {
  const idleMs = upstream.settings.timeouts.client_idle_ms
  return () => request.log.info({ request_id: request.facts.requestId, model: '', backend: upstream.name, idle_ms: idleMs }, 'client read nothing of its answer for client_idle_ms: connection closed')
}

const NOTHING = Buffer.alloc(0)

/**
 * A 204 or a 304: no body follows, whatever Content-Length says (a 304's is
 * the selected representation's size, RFC 9110 §8.6, and goes on; a 204
 * must not carry one). Piped like a body, undici read the missing bytes as
 * a body cut short: the client got nothing, and the access line said 304.
 */
function sendBodiless(request: FastifyRequest, reply: FastifyReply, upstream: Upstream, response: Dispatcher.ResponseData): FastifyReply {
  // Read to its (empty) end, which leaves the upstream connection reusable; destroying it closed the connection.
  response.body.dump().catch(() => undefined)
  const headers = clientHeaders(response, upstream)
  const length = response.headers['content-length']
  if (length !== undefined && response.statusCode === 304) headers['content-length'] = length
  return writeAnswer(request, reply, response.statusCode, headers, undefined)
}

/** The upstream's answer headers as the client gets them: hop-by-hop ones and any quote of the gateway's credential left out. */
function clientHeaders(response: Dispatcher.ResponseData, upstream: Upstream): HeaderMap {
  const headers = responseHeadersFromUpstream(response.headers)
  withoutEchoedSecretsInHeaders(headers, upstream.echoableSecrets)
  return headers
}

/** An answer written whole past fastify's `send` (which would add a Content-Type the upstream never sent), naming the request. */
function writeAnswer(request: FastifyRequest, reply: FastifyReply, statusCode: number, headers: HeaderMap, body: Buffer | undefined): FastifyReply {
  headers['x-request-id'] = request.facts.requestId
  // The close decided for a body left unread (app.ts) is fastify's header, which the hijack leaves behind.
  if (reply.getHeader('connection') === 'close') headers.connection = 'close'
  reply.hijack()
  reply.raw.writeHead(statusCode, headers)
  reply.raw.end(body)
  return reply
}

/**
 * Whether an answer's body is the upstream's own words (an error, a
 * redirect's "Moved to …" page) rather than the client's data: such a body
 * is searched for the credential. A HEAD answer and a 304 have no body.
 */
function bodyMayQuoteCredential(statusCode: number, call: PlatformRequest): boolean {
  return statusCode >= 300 && statusCode !== 304 && call.method !== 'HEAD'
}

/**
 * An upstream's error or redirect answer, whole, with the gateway's own credential cut
 * out of its body and headers (credential-echo.ts). A compressed body is
 * searched decoded, and sent decoded only when something was cut; one that
 * cannot be decoded (a coding the client was not offered, broken, or
 * decoding past answer_limit_bytes) cannot be searched, so its status goes
 * on with an empty body. Written past fastify's `send`, which gave a
 * Buffer a Content-Type the upstream never sent.
 */
async function sendSearchedAnswer(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, upstream: Upstream, response: Dispatcher.ResponseData, clientGone: AbortSignal): Promise<FastifyReply> {
  let body: Buffer
  try {
    body = await readWhole(response.body, ctx.config.server.answer_limit_bytes)
  } catch (error) {
    // The client left (nothing to answer), or a shutdown cut the request off (it is told why).
    if (clientGone.reason instanceof GatewayError) throw clientGone.reason
    if (clientGone.aborted) return reply
    if (error instanceof AnswerTooLargeError) throw answerTooLargeError(`"${upstream.name}"`, error.limitBytes, error, `this ${response.statusCode} answer is read whole to search it for the gateway's credential, so its operator would have to raise that limit`)
    const reason = classifyUpstreamFailure(error)
    ctx.metrics.upstreamErrors.inc({ model: '', backend: upstream.name, reason: 'mid_stream' })
    throw brokenAnswerError(reason, `"${upstream.name}"`, error)
  }
  const headers = clientHeaders(response, upstream)
  const searched = searchedAnswerBody(body, headers, upstream.echoableSecrets, ctx.config.server.answer_limit_bytes)
  if (searched === null) request.log.warn({ request_id: request.facts.requestId, model: '', backend: upstream.name, content_encoding: response.headers['content-encoding'] }, UNSEARCHABLE_ANSWER)
  const sent = searched ?? NOTHING
  headers['content-length'] = String(sent.length)
  writeAnswer(request, reply, response.statusCode, headers, sent)
  // Held in memory until the client reads it: one reading nothing is let go of as for a piped answer (a
  // platform review: twenty clients reading nothing of a 422 quoting their 7 MiB input held 540 MB for good).
  closeIfUnread(reply.raw, upstream.settings.timeouts.client_idle_ms, noteUnreadAnswer(request, upstream))
  return reply
}

/** A body read to its end, or AnswerTooLargeError past `limitBytes` (the body is then destroyed). */
async function readWhole(body: Dispatcher.ResponseData['body'], limitBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limitBytes) {
      body.destroy()
      throw new AnswerTooLargeError(limitBytes)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size)
}

/** The upstream's answer up to its headers; null when the client left first (nothing to answer). */
async function callUpstream(ctx: GatewayContext, request: FastifyRequest, upstream: Upstream, call: PlatformRequest, upstreamAbort: AbortController): Promise<Dispatcher.ResponseData | null> {
  const headers: HeaderMap = { ...forwardedRequestHeaders(request.headers), 'x-request-id': request.facts.requestId }
  if (call.body !== null) headers['content-type'] = 'application/json'
  // Error answers are searched for the gateway's credential: only codings it can decode (content-coding.ts).
  const accepted = headers['accept-encoding']
  if (typeof accepted === 'string' && upstream.echoableSecrets.length > 0) headers['accept-encoding'] = decodableAcceptEncoding(accepted)
  const authorization = upstreamAuthorization(upstream.settings.auth, request.headers.authorization)
  if (authorization !== undefined) headers.authorization = authorization

  // On time, unlike undici's own headers timeout (a ~0.5 s tick): ends the call with the error that one raises.
  const firstByte = setTimeout(() => upstreamAbort.abort(new errors.HeadersTimeoutError()), upstream.settings.timeouts.first_byte_ms)
  try {
    return await upstream.pool.request({ method: call.method, path: upstream.pathFor(call.path), headers, body: call.body, signal: upstreamAbort.signal })
  } catch (error) {
    if (upstreamAbort.signal.reason instanceof GatewayError) throw upstreamAbort.signal.reason
    if (upstreamAbort.signal.aborted && !(upstreamAbort.signal.reason instanceof errors.HeadersTimeoutError)) return null
    const reason = classifyUpstreamFailure(error)
    ctx.metrics.upstreamErrors.inc({ model: '', backend: upstream.name, reason })
    throw upstreamError(reason, `"${upstream.name}"`, error)
  } finally {
    clearTimeout(firstByte)
  }
}

/**
 * fastify (and node:http) cannot send a status outside 200–599 (an upstream
 * may write `HTTP/1.1 600`): a broken answer, not one to pass on. Its body is
 * dropped unread; destroying it raises undici's RequestAbortedError, which no
 * one is left to hear.
 */
function badStatus(ctx: GatewayContext, upstream: Upstream, response: Dispatcher.ResponseData): GatewayError {
  response.body.on('error', () => undefined)
  response.body.destroy()
  ctx.metrics.upstreamErrors.inc({ model: '', backend: upstream.name, reason: 'bad_response' })
  return unusableAnswerError(`"${upstream.name}"`, new Error(`status ${response.statusCode}`))
}

/**
 * An upstream failing after its headers were sent on: the client's status
 * stands, and fastify cuts the connection before the body's end, which is
 * how the client learns of it. The error code recorded here keeps the access
 * line at that status instead of 499 (access-log.ts). A failure caused by the
 * client leaving (the abort) is not the upstream's.
 */
function watchBody(ctx: GatewayContext, request: FastifyRequest, upstream: Upstream, body: Dispatcher.ResponseData['body'], clientGone: AbortSignal): void {
  body.once('error', (error: Error) => {
    if (clientGone.reason instanceof GatewayError) request.facts.errorCode = clientGone.reason.code
    if (clientGone.aborted) return
    const failure = brokenAnswerError(classifyUpstreamFailure(error), `"${upstream.name}"`, error)
    request.facts.errorCode = failure.code
    ctx.metrics.upstreamErrors.inc({ model: '', backend: upstream.name, reason: 'mid_stream' })
    request.log.warn({ request_id: request.facts.requestId, model: '', backend: upstream.name, error_code: failure.code, cause: causeOf(error) }, 'upstream failed mid-body')
  })
}
