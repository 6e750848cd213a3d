/**
 * The one place that writes error bodies. Gateway errors carry their own
 * status and code; fastify's own errors (body parsing, limits) are mapped to
 * the DESIGN.md shape; anything else is a 500 whose details stay in the log.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { announcesBody, answeringBeforeBody } from '../unread-body.js'
import { closesItsConnection, markClosing } from '../closing-connections.js'
import { causeOf } from './upstream-errors.js'
import { GatewayError, type ErrorCode } from './gateway-error.js'

const FASTIFY_CODES: Readonly<Record<string, ErrorCode>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'body_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_value',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
}

export function toGatewayError(error: FastifyError | Error): GatewayError {
  if (error instanceof GatewayError) return error
  const fastifyCode = (error as FastifyError).code
  const mapped = fastifyCode === undefined ? undefined : FASTIFY_CODES[fastifyCode]
  if (mapped !== undefined) return new GatewayError(mapped, messageFor(mapped, error), { cause: error })
  if (error instanceof SyntaxError) return new GatewayError('invalid_json', messageFor('invalid_json', error), { cause: error })
  const status = (error as FastifyError).statusCode
  if (status !== undefined && status >= 400 && status < 500) return new GatewayError('invalid_value', error.message, { cause: error })
  return new GatewayError('internal_error', 'The gateway failed to handle this request.', { cause: error })
}

function messageFor(code: ErrorCode, error: Error): string {
  switch (code) {
    case 'invalid_json':
      return `The body is not valid JSON: ${error.message}`
    case 'body_too_large':
      return 'The body is larger than this gateway accepts (server.body_limit_bytes).'
    case 'unsupported_media_type':
      return 'Send the body as JSON with Content-Type: application/json.'
    default:
      return error.message
  }
}

/**
 * The connection stays open unless the error says it closes or the body
 * is left unread and too long to drain (unread-body.ts). fastify marks
 * every body-parser refusal `connection: close`, a body read to its end
 * included: that cost a reconnect per bad body, and a request pipelined
 * behind one was still forwarded upstream, its answer never sent (RFC 9112
 * §9.6: nothing after a closing answer is processed). With the mark taken
 * off, Node writes no Connection header and the connection persists, as
 * HTTP/1.1's are by default. A drain's mark, set on the Node response
 * itself (connection-drain.ts), stays.
 */
export function sendError(request: FastifyRequest, reply: FastifyReply, error: GatewayError): FastifyReply {
  request.facts.errorCode = error.code
  // Read on after the answer if the connection closes, or the unread body's bytes make the close a reset that loses it.
  if (!request.raw.complete && announcesBody(request.headers) && answeringBeforeBody(request.raw, reply.raw)) {
    reply.header('connection', 'close')
  } else if (reply.hasHeader('connection') && !reply.raw.hasHeader('connection') && !closesItsConnection(reply.raw)) {
    // fastify's close mark on a body it read whole and refused: the connection goes on as the client asked.
    // Not a close decided earlier for this answer (closing-connections.ts): a request pipelined behind it was refused on that word.
    // Said, not removed: a removed header left HTTP/1.0 keep-alive and HTTP/1.1 close answers without one (an HTTP review).
    reply.header('connection', reply.raw.shouldKeepAlive ? 'keep-alive' : 'close')
  }
  if (error.headers.connection === 'close') markClosing(reply.raw)
  return reply.code(error.status).headers(error.headers).type('application/json').send(error.toBody())
}

/**
 * Besides the access line every request gets: a gateway fault at error
 * level with its stack; an upstream failure at warn with what undici said
 * (why the backend failed is not on the access line). Admission's 503s
 * (queue_timeout, no_healthy_backend, shutting_down) are routine under
 * load or in an outage, so, like its 429s, they get no line of their own:
 * one error line with a stack per refused request flooded the logs.
 */
export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = toGatewayError(error)
  const requestId = request.facts.requestId
  if (gatewayError.code === 'internal_error') request.log.error({ err: error, request_id: requestId }, 'request failed')
  else if (gatewayError.code.startsWith('upstream_')) {
    // The failed backend or upstream in fields, as on every other failure line (a log review: only the message named it).
    request.log.warn({ request_id: requestId, model: request.facts.model, backend: request.facts.backend, error_code: gatewayError.code, cause: causeOf(gatewayError.cause) }, gatewayError.message)
  }
  return sendError(request, reply, gatewayError)
}
