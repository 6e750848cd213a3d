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

/** Each such connection's answers that close it (more than one: a drain's, a refusal's, an unread body's). */
const closing = new WeakMap<Socket, Set<ServerResponse>>()

/** Keyed by the request's socket: a pipelined answer waiting its turn has none of its own yet. */
export function markClosing(response: ServerResponse): void {
  const socket = response.req.socket
  const marked = closing.get(socket)
  if (marked === undefined) closing.set(socket, new Set([response]))
  else marked.add(response)
}

/** Whether `response` is an answer its connection was marked to close with: nothing may make it keep-alive after. */
export function closesItsConnection(response: ServerResponse): boolean {
  return closing.get(response.req.socket)?.has(response) === true
}

/**
 * Whether a head written closes the connection. Node 20 leaves
 * `shouldKeepAlive` true after a closing head, its own (an HTTP/1.0 stream
 * without a length) or one told `Connection: close`; only its `_last` says
 * so (a diff review: read as keep-alive, a request behind a closing answer
 * already begun was served, its answer dropped).
 */
export function wentOutClosing(response: ServerResponse): boolean {
  return (response as ServerResponse & { _last?: boolean })._last === true
}

/**
 * Whether a request read off `socket` now comes after an answer that closes
 * it. One that went out saying keep-alive after all (a path that writes its
 * own head) did not close it, and its mark goes: a request after it refused
 * (unanswered, so neither logged nor counted) would be lost without a trace.
 */
export function isClosing(socket: Socket): boolean {
  const marked = closing.get(socket)
  if (marked === undefined) return false
  for (const response of marked) {
    if (!response.headersSent || wentOutClosing(response)) return true
    marked.delete(response)
  }
  return false
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
    if (response.headersSent ? !wentOutClosing(response) : response.req.httpVersionMinor !== 0) continue
    if (!response.headersSent) response.setHeader('connection', 'close')
    markClosing(response)
  }
}
