/**
 * Forwards a validated platform request to its upstream and passes the
 * answer back unchanged: status, headers less hop-by-hop ones, and the body
 * streamed as it arrives (an object's value can be large).
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { errors } from 'undici'
import type { GatewayContext } from '../context.js'
import { classifyUpstreamFailure, upstreamError } from '../errors/upstream-errors.js'
import type { Upstream } from '../routing/upstream.js'
import { forwardedRequestHeaders, responseHeadersFromUpstream, type HeaderMap } from './headers.js'
import { upstreamAuthorization } from './upstream-auth.js'

export interface UpstreamCall {
  readonly method: 'GET' | 'POST'
  /** Path and query, already safe to send. */
  readonly path: string
  readonly body: Buffer | null
}

export async function forwardToUpstream(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, upstream: Upstream, call: UpstreamCall): Promise<FastifyReply> {
  const client = new AbortController()
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) client.abort()
  })
  const headers: HeaderMap = { ...forwardedRequestHeaders(request.headers), 'x-request-id': request.facts.requestId }
  if (call.body !== null) headers['content-type'] = 'application/json'
  const authorization = upstreamAuthorization(upstream.settings.auth, request.headers.authorization)
  if (authorization !== undefined) headers.authorization = authorization

  // On time, unlike undici's own headers timeout (a ~0.5 s tick): ends the call with the error that one raises.
  const firstByte = setTimeout(() => client.abort(new errors.HeadersTimeoutError()), upstream.settings.timeouts.first_byte_ms)
  let response
  try {
    response = await upstream.pool.request({ method: call.method, path: upstream.pathFor(call.path), headers, body: call.body, signal: client.signal })
  } catch (error) {
    if (client.signal.aborted && !(client.signal.reason instanceof errors.HeadersTimeoutError)) return reply
    const reason = classifyUpstreamFailure(error)
    ctx.metrics.upstreamErrors.inc({ model: '', backend: upstream.name, reason })
    throw upstreamError(reason, `"${upstream.name}"`, error)
  } finally {
    clearTimeout(firstByte)
  }
  request.facts.backend = upstream.name
  response.body.once('error', (error: Error) => {
    if (!client.signal.aborted) request.log.warn({ err: error, request_id: request.facts.requestId, upstream: upstream.name }, 'upstream failed mid-body')
  })
  return reply.code(response.statusCode).headers(responseHeadersFromUpstream(response.headers)).send(response.body)
}
