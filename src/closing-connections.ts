/**
 * Connections whose answer in progress was decided to close them
 * (`Connection: close`: a body left unread and too long to drain, a
 * refusal that closes). Node goes on parsing what the client pipelined in
 * the same read and hands the app the next request while that answer is
 * still being made (an upstream call): it was served, a training job
 * created whose answer the client never got (a security review). RFC 9112
 * §9.6: a server that sends close processes nothing after that request.
 */
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/** Each such connection's answer that closes it. */
const closing = new WeakMap<Socket, ServerResponse>()

export function markClosing(response: ServerResponse): void {
  if (response.socket !== null) closing.set(response.socket, response)
}

/** Whether `response` is the answer its connection was marked to close with: nothing may make it keep-alive after. */
export function closesItsConnection(response: ServerResponse): boolean {
  return response.socket !== null && closing.get(response.socket) === response
}

/**
 * Whether a request read off `socket` now comes after an answer that closes
 * it. One that went out saying keep-alive after all (a path that writes its
 * own head) did not close it, and the mark goes: a request after it refused
 * (unanswered, so neither logged nor counted) would be lost without a trace.
 */
export function isClosing(socket: Socket): boolean {
  const response = closing.get(socket)
  if (response === undefined) return false
  if (response.headersSent && response.shouldKeepAlive) {
    closing.delete(socket)
    return false
  }
  return true
}

/**
 * A request `latest` pipelined behind answers still being made on its
 * connection: one that went out closing (its head said so), or one to an
 * HTTP/1.0 request not yet begun, whose keep-alive Node decides only when
 * it writes the head (a stream has no length, and HTTP/1.0 has no chunks:
 * Node closes after it), is marked closing, the HTTP/1.0 one told to close,
 * so the request behind it is not served (isClosing). Served, it reached the
 * upstream (a training job created) and its answer was dropped with the
 * connection (an HTTP review).
 */
export function closeBehindUndecidedAnswers(answers: Iterable<ServerResponse>, latest: ServerResponse): void {
  for (const response of answers) {
    if (response === latest) continue
    if (response.headersSent ? response.shouldKeepAlive : response.req.httpVersionMinor !== 0) continue
    if (!response.headersSent) response.setHeader('connection', 'close')
    markClosing(response)
  }
}
