/**
 * One log line and one set of metric updates per request, when its response
 * closes: finished normally, cut off by the client (logged as status 499,
 * nginx's "client closed request"), or cut off by the gateway because its
 * upstream broke off the answer (logged with the status the client got and
 * the error code). Bodies and credentials are never logged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Metrics } from './metrics/registry.js'

export const CLIENT_CLOSED_REQUEST = 499

export function recordOnClose(metrics: Metrics, request: FastifyRequest, reply: FastifyReply): void {
  // `on`, not `once`: a response closes only once, and once's wrapper costs on every request.
  reply.raw.on('close', () => {
    const facts = request.facts
    // An unfinished answer with an error code was ended by the gateway, not the client.
    const status = reply.raw.writableFinished || facts.errorCode !== null ? reply.statusCode : CLIENT_CLOSED_REQUEST
    const seconds = reply.elapsedTime / 1000
    metrics.requestsTotal.inc({ route: facts.route, model: facts.model, status: String(status) })
    metrics.requestDuration.observe({ route: facts.route, model: facts.model }, seconds)
    request.log.info(
      {
        request_id: facts.requestId,
        principal: facts.principal?.id ?? null,
        route: facts.route,
        method: request.method,
        model: facts.model === '' ? null : facts.model,
        backend: facts.backend,
        status,
        duration_ms: round(reply.elapsedTime),
        queue_wait_ms: facts.queueWaitMs === null ? null : round(facts.queueWaitMs),
        ttft_ms: facts.ttftMs === null ? null : round(facts.ttftMs),
        retries: facts.retries,
        prompt_tokens: facts.tokens?.prompt ?? null,
        completion_tokens: facts.tokens?.completion ?? null,
        error_code: facts.errorCode,
      },
      'request completed',
    )
  })
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}
