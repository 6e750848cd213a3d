/**
 * What becomes of a request body no handler reads (a 401 or 404 answered
 * first, a GET route, a refused Content-Encoding): Node reads it to its end
 * and throws it away to keep the connection, past any body limit. That is
 * left to Node only for a body announced small; a long or chunked one
 * closes the connection instead.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { lingerOnClose } from './lingering-close.js'
import { markClosing } from './closing-connections.js'

/** The most of an unread body Node is left to read and throw away to keep the connection (about Go's net/http's 256 KiB). */
const DISCARDED_BODY_MAX_BYTES = 64 * 1024

/** Whether an unread body of a request with these headers may be left for Node to drain. */
export function isDiscardable(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) <= DISCARDED_BODY_MAX_BYTES
}

/**
 * Whether the request announced a body at all. Node has not marked a
 * request complete when the app sees it, even one without a body, so
 * `complete` alone put every GET's connection on the lingering close (a
 * code review: a Connection: close GET held its socket 5 s).
 */
export function announcesBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0
}

/**
 * An answer goes before the request's announced body was read: the
 * connection's close, whoever decides it (this answer, or Node because the
 * client asked), lingers (lingering-close.ts); whether the answer must say
 * `Connection: close` (a body too long to drain) is returned.
 */
export function answeringBeforeBody(request: IncomingMessage, response: ServerResponse): boolean {
  lingerOnClose(request.socket)
  if (isDiscardable(request.headers)) return false
  markClosing(response)
  return true
}
