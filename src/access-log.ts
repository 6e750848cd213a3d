/**
 * One log line and one set of metric updates per request, when its response
 * closes: finished normally, cut off by the client (logged as status 499,
 * nginx's "client closed request"), or cut off by the gateway because its
 * upstream broke off the answer (logged with the status the client got and
 * the error code). Bodies, query strings and credentials are never logged.
 */
import type { ServerResponse } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { Metrics } from './metrics/registry.js'
import type { RequestFacts } from './request-facts.js'
import { targetPath } from './target-path.js'

export const CLIENT_CLOSED_REQUEST = 499
/** Longer paths are cut (a client can send kilobytes of path; the line stays readable). */
export const LOGGED_PATH_LIMIT = 256

/** Responses whose request the HTTP parser's refusal answered (public-listener.ts): that refusal is its line and count. */
const refusedByParser = new WeakSet<ServerResponse>()

export function answeredByParserRefusal(response: ServerResponse): void {
  refusedByParser.add(response)
}

export function recordOnClose(metrics: Metrics, request: FastifyRequest, reply: FastifyReply): void {
  // Read now: Node asks the socket for its peer on first use, and a socket the gateway has
  // destroyed by the time the line is written (an upstream that broke off) has none to give.
  const clientAddress = request.socket.remoteAddress ?? null
  // `on`, not `once`: a response closes only once, and once's wrapper costs on every request.
  reply.raw.on('close', () => {
    const facts = request.facts
    if (facts.unanswered || refusedByParser.has(reply.raw)) return
    // An unfinished answer with an error code was ended by the gateway, not the client.
    const status = reply.raw.writableFinished || facts.errorCode !== null ? reply.statusCode : CLIENT_CLOSED_REQUEST
    const seconds = reply.elapsedTime / 1000
    metrics.requestsTotal.inc({ route: facts.route, model: facts.model, status: String(status) })
    metrics.requestDuration.observe({ route: facts.route, model: facts.model }, seconds)
    // At warn or above the line is not written: its record is not built either. The app's logger is pino (app.ts).
    if (!(request.log as Logger).isLevelEnabled('info')) return
    request.log.info(
      {
        request_id: facts.requestId,
        principal: facts.principal?.id ?? null,
        route: facts.route,
        method: request.method,
        path: loggedPath(request.url),
        client_address: clientAddress,
        model: facts.model === '' ? null : facts.model,
        backend: facts.backend,
        status,
        duration_ms: round(reply.elapsedTime),
        queue_wait_ms: queueWaitMs(facts, reply.elapsedTime),
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

/**
 * The path as the client sent it, without what may carry a secret (target-path.ts: a query, a
 * fragment, an absolute-form target's authority); the route's own ids are all in the path.
 */
export function loggedPath(url: string): string {
  const path = targetPath(url)
  return path.length <= LOGGED_PATH_LIMIT ? path : `${path.slice(0, LOGGED_PATH_LIMIT)}…`
}

/** The wait for a slot; for a request that never got one (turned away, timed out, its client gone), up to its end. */
function queueWaitMs(facts: RequestFacts, elapsedMs: number): number | null {
  if (facts.queueWaitMs !== null) return round(facts.queueWaitMs)
  return facts.queuedAtMs === null ? null : round(elapsedMs - facts.queuedAtMs)
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}
