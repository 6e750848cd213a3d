/**
 * Maps what can go wrong talking to a backend or upstream (undici and socket
 * errors) to the gateway's typed errors, in one place: unreachable → 502,
 * broken answer → 502, too slow → 504.
 */
import { GatewayError } from './gateway-error.js'

/** Why an attempt failed; used as the `reason` label of upstream error metrics. */
export type UpstreamFailureReason = 'connect' | 'timeout' | 'reset' | 'bad_response'

const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT'])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'])

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * undici's words when it drops a connection over what came back, not over
 * a hang-up: an interim 100 nobody asked for (RFC 9110 says a client must
 * skip 1xx answers; undici refuses that one), an upgrade, bytes with no
 * request. Classed as a reset, they were answered "closed the connection
 * before answering" and retried (a platform review).
 */
const REFUSED_ANSWER_MESSAGES = new Set(['bad response', 'bad upgrade'])

export function classifyUpstreamFailure(error: unknown): UpstreamFailureReason {
  const code = errorCode(error)
  if (code !== undefined && CONNECT_CODES.has(code)) return 'connect'
  if (code !== undefined && TIMEOUT_CODES.has(code)) return 'timeout'
  if (code === 'UND_ERR_SOCKET' && REFUSED_ANSWER_MESSAGES.has((error as Error).message)) return 'bad_response'
  if (code !== undefined && RESET_CODES.has(code)) return 'reset'
  return 'bad_response'
}

/**
 * Whether another backend may be tried: the request never reached this one
 * (connect failure) or it hung up before answering anything.
 */
export function isRetryable(reason: UpstreamFailureReason): boolean {
  return reason === 'connect' || reason === 'reset'
}

/**
 * On the gateway's 504s, and on every 502 raised once the answer had begun:
 * the openai and Anthropic clients read it and do not repeat the request.
 * They retry any 5xx twice by default, so a call to a backend slower than
 * `first_byte_ms` took three times that, an answer over the gateway's limit
 * or a broken completion was generated three times (a client review), and a
 * training job might be submitted again; the gateway does not retry these
 * itself for the same reason.
 */
const NO_CLIENT_RETRY = { 'x-should-retry': 'false' } as const

export function upstreamError(reason: UpstreamFailureReason, target: string, cause: unknown): GatewayError {
  switch (reason) {
    case 'connect':
      return new GatewayError('upstream_unreachable', `Upstream ${target} is unreachable.`, { cause })
    case 'timeout':
      return new GatewayError('upstream_timeout', `Upstream ${target} did not answer in time.`, { cause, headers: { ...NO_CLIENT_RETRY } })
    case 'reset':
      return new GatewayError('upstream_bad_response', `Upstream ${target} closed the connection before answering.`, { cause })
    case 'bad_response':
      return brokenResponse(target, cause, {})
  }
}

/** A failure after the answer had begun (its headers were in): it was broken off, not refused. */
export function brokenAnswerError(reason: UpstreamFailureReason, target: string, cause: unknown): GatewayError {
  if (reason === 'timeout') return new GatewayError('upstream_timeout', `Upstream ${target} went silent in the middle of its answer.`, { cause, headers: { ...NO_CLIENT_RETRY } })
  return new GatewayError('upstream_bad_response', `Upstream ${target} broke off its answer.`, { cause, headers: { ...NO_CLIENT_RETRY } })
}

/** An answer that came whole (or with its status) and is not one to pass on: the upstream did the work. */
export function unusableAnswerError(target: string, cause: unknown): GatewayError {
  return brokenResponse(target, cause, { ...NO_CLIENT_RETRY })
}

function brokenResponse(target: string, cause: unknown, headers: Record<string, string>): GatewayError {
  return new GatewayError('upstream_bad_response', `Upstream ${target} sent a broken response.`, { cause, headers })
}

/**
 * An answer over `server.answer_limit_bytes`: the target did nothing wrong,
 * the gateway will not hold that much. `remedy`: what the client can do
 * (a chat client can ask for a stream; a platform route has none, and was
 * told to).
 */
export function answerTooLargeError(target: string, limitBytes: number, cause: unknown, remedy: string): GatewayError {
  const message = `Upstream ${target} sent an answer larger than ${limitBytes} bytes, the most this gateway holds (server.answer_limit_bytes); ${remedy}.`
  return new GatewayError('upstream_bad_response', message, { cause, headers: { ...NO_CLIENT_RETRY } })
}

/**
 * What an upstream failure's warn line says of its cause: undici's message,
 * not the error object, whose stack (a dozen lines of undici internals for
 * a body timeout) says nothing about the upstream.
 */
export function causeOf(error: unknown): string | null {
  return error instanceof Error ? error.message : null
}
