/**
 * Requests Node's HTTP parser refuses before any route could see them — a
 * malformed request line or header, a Content-Length/Transfer-Encoding
 * conflict, headers over Node's limit (16 KiB unless --max-http-header-size
 * says otherwise), a request that took too long to arrive — get the
 * DESIGN.md error body too, instead of Node's bare status line. The
 * connection is closed after it: once the parser is lost, where the next
 * request would start cannot be known (request smuggling).
 */
import { STATUS_CODES, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { GatewayError } from './gateway-error.js'
import { markClosing } from '../closing-connections.js'

/** The client reset the connection or closed it in the middle of a request: there is no one to answer. */
const CLIENT_GONE = new Set(['ECONNRESET', 'EPIPE', 'HPE_INVALID_EOF_STATE'])

/** The refusal for a parser error (`clientError` of node:http). */
export function parserRefusal(error: Error & { code?: string; reason?: unknown }): GatewayError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new GatewayError('headers_too_large', 'The request line and headers are larger than this gateway accepts: send a shorter URL, or fewer or shorter headers.')
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new GatewayError('request_timeout', 'The request did not arrive in time.')
    default: {
      // llhttp's reason is a fixed phrase ("Invalid header value char"), never the offending bytes.
      const reason = typeof error.reason === 'string' && error.reason.length <= 100 ? `: ${error.reason}` : ''
      return new GatewayError('malformed_http', `The request is not valid HTTP/1.1${reason}.`)
    }
  }
}

/** The client reset the connection or closed it mid-request: nobody to answer. */
export function clientGone(error: Error & { code?: string }): boolean {
  return error.code === undefined || CLIENT_GONE.has(error.code)
}

/**
 * Writes the refusal and closes the connection. A connection the client
 * reset, or one with a response in progress (whose bytes a refusal would
 * corrupt), is just closed.
 */
export function answerParserError(error: Error & { code?: string }, socket: Duplex, responding: boolean): GatewayError | null {
  if (clientGone(error) || !socket.writable || responding) {
    socket.destroy()
    return null
  }
  const refusal = parserRefusal(error)
  writeRefusal(socket, refusal)
  return refusal
}

/**
 * A CONNECT request (node:http's 'connect' event, which no route sees):
 * this gateway is not a forward proxy. Node would close the connection
 * without a word; it gets the unknown-route answer instead.
 */
export function answerConnect(socket: Duplex, busy: boolean): GatewayError | null {
  // node:http removed its own 'error' listener before handing the socket over: a reset would throw.
  socket.on('error', () => socket.destroy())
  // An earlier request on the connection still unanswered: a 404 now would read as its answer.
  if (busy || !socket.writable) {
    socket.destroy()
    return null
  }
  const refusal = new GatewayError('not_found', 'CONNECT is not served here: this gateway is not a forward proxy.')
  writeRefusal(socket, refusal)
  return refusal
}

/**
 * An `Expect` other than 100-continue (node:http's 'checkExpectation'
 * event, which no route sees): Node's own answer is a bare 417. This one
 * says what to change; the connection closes, as the client may still send
 * the body it announced.
 */
export function answerExpectation(response: ServerResponse): GatewayError {
  const refusal = new GatewayError('expectation_failed', 'Only "Expect: 100-continue" is understood here: send the request without this Expect header.')
  const body = JSON.stringify(refusal.toBody())
  // Marked, as every answer that closes: no route hears of this one, and a request pipelined behind it was
  // served, its answer dropped (a diff review: a chat run at the backend, logged 499).
  markClosing(response)
  response.writeHead(refusal.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body)
  return refusal
}

function writeRefusal(socket: Duplex, refusal: GatewayError): void {
  const body = JSON.stringify(refusal.toBody())
  socket.end(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}\r\n` +
      // RFC 9110 §6.6.1: an origin server with a clock sends Date (Node's own answers do; these are written by hand).
      `Date: ${new Date().toUTCString()}\r\n` +
      'Content-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
    () => socket.destroy(),
  )
}
