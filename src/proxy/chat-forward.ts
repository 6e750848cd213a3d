/**
 * Forwards a validated chat request and writes the backend's answer to the
 * client: event streams pass through as they arrive, other answers are read
 * whole (so a truncated one becomes a clean 502, not half a JSON document)
 * and sent with the backend's status. The backend's in-flight count is held
 * until the answer has fully left or the client went away.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayContext } from '../context.js'
import { classifyUpstreamFailure, upstreamError } from '../errors/upstream-errors.js'
import type { Backend } from '../routing/backend.js'
import type { ModelRoute } from '../routing/model-route.js'
import { dispatchChat, type DispatchObserver } from './chat-dispatch.js'
import { forwardedRequestHeaders, responseHeadersFromUpstream } from './headers.js'
import { relaySse } from './sse-relay.js'

export interface ChatForward {
  readonly route: ModelRoute
  readonly upstreamBody: unknown
  readonly requestId: string
}

export async function forwardChat(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, job: ChatForward): Promise<FastifyReply> {
  const client = new AbortController()
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) client.abort()
  })
  const inflight = trackInflight(ctx, job.route)
  const headers = {
    ...forwardedRequestHeaders(request.headers),
    'content-type': 'application/json',
    'x-request-id': job.requestId,
  }
  let answer
  try {
    answer = await dispatchChat({ route: job.route, payload: JSON.stringify(job.upstreamBody), headers, signal: client.signal, observer: inflight.observer })
  } catch (error) {
    inflight.release()
    throw error
  }
  request.facts.backend = answer.backend.name
  request.facts.retries = answer.retries
  const responseHeaders = { ...responseHeadersFromUpstream(answer.headers), 'x-request-id': job.requestId }

  if (answer.statusCode === 200 && isEventStream(answer.headers['content-type'])) {
    const stream = relaySse(answer.body, {
      clientGone: () => client.signal.aborted,
      onUpstreamError: (error) => {
        const failure = upstreamError(classifyUpstreamFailure(error), `backend "${answer.backend.name}"`, error)
        ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: answer.backend.name, reason: 'mid_stream' })
        request.log.warn({ err: error, backend: answer.backend.name }, 'backend failed mid-stream')
        request.facts.errorCode = failure.code
        return failure.toBody()
      },
    })
    stream.once('close', inflight.release)
    return reply.code(200).headers({ ...responseHeaders, 'x-accel-buffering': 'no' }).send(stream)
  }

  try {
    const body = Buffer.from(await answer.body.arrayBuffer())
    return reply.code(answer.statusCode).headers(responseHeaders).send(body)
  } catch (error) {
    if (client.signal.aborted) return reply
    const reason = classifyUpstreamFailure(error)
    ctx.metrics.upstreamErrors.inc({ model: job.route.name, backend: answer.backend.name, reason })
    throw upstreamError(reason, `backend "${answer.backend.name}"`, error)
  } finally {
    inflight.release()
  }
}

function isEventStream(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.toLowerCase().startsWith('text/event-stream')
}

/** Counts the request against the backend it is being sent to, exactly once. */
function trackInflight(ctx: GatewayContext, route: ModelRoute): { observer: DispatchObserver; release: () => void } {
  let current: Backend | null = null
  const leave = () => {
    if (current === null) return
    current.inFlight--
    ctx.metrics.inflight.dec({ model: route.name, backend: current.name })
    current = null
  }
  return {
    release: leave,
    observer: {
      onAttempt(backend) {
        current = backend
        backend.inFlight++
        ctx.metrics.inflight.inc({ model: route.name, backend: backend.name })
      },
      onFailure(backend, reason) {
        ctx.metrics.upstreamErrors.inc({ model: route.name, backend: backend.name, reason })
        leave()
      },
    },
  }
}
