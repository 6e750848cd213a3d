/**
 * The gateway's public node:http server: every request goes to `handle`
 * (the serving generation). What is refused before any route can run (bytes
 * Node's parser rejects, a CONNECT, an Expect other than 100-continue) is answered in the DESIGN.md shape,
 * counted and logged here; "100 Continue" waits for the credentials
 * (auth/expect-continue.ts). Listening is the caller's.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { answeredByParserRefusal } from './access-log.js'
import { holdContinue } from './auth/expect-continue.js'
import { trackConnections, type ConnectionDrain } from './connection-drain.js'
import type { GatewayError } from './errors/gateway-error.js'
import { answerConnect, answerExpectation, answerParserError, clientGone } from './errors/parser-refusal.js'
import type { Metrics } from './metrics/registry.js'

export interface PublicListener {
  readonly server: Server
  readonly connections: ConnectionDrain
}

/**
 * How long a client's connection is kept with no request in progress:
 * Node's default, said here because a proxy pooling connections to the
 * gateway must close idle ones sooner (deploy/nginx/nginx.conf), or a
 * request written just as the gateway closes one fails.
 */
export const CLIENT_KEEP_ALIVE_MS = 5000

export function createPublicListener(handle: (request: IncomingMessage, response: ServerResponse) => void, metrics: Metrics, logger: Logger, maxConnections = 0): PublicListener {
  // Host is checked by the app (app.ts), so that its refusal has the DESIGN.md body too.
  const server = createServer({ requireHostHeader: false, keepAliveTimeout: CLIENT_KEEP_ALIVE_MS })
  // Every header line reaches the app: past Node's default of 2,000 lines it dropped the rest from
  // `headers` and `rawHeaders` while its parser still framed the body by them, so a Content-Length,
  // a second Host or a second Authorization after 2,000 filler lines went unseen (an HTTP review: a
  // 401'd connection read 20 GiB). Node's 16 KiB header limit still bounds them.
  server.maxHeadersCount = 0
  capConnections(server, maxConnections, metrics, logger)
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    holdContinue(response)
    server.emit('request', request, response)
  })
  // The tracker hears each request before the app: while draining it marks the response's
  // connection for closing, which it cannot once the app has answered (a request arriving
  // as a drain began is answered 503 at once; setHeader then threw ERR_HTTP_HEADERS_SENT
  // out of Node's parser callback and ended the process, a code review found).
  const connections = trackConnections(server)
  server.on('request', handle)
  const recordRefusal = (refusal: GatewayError | null, fields: Record<string, unknown>, message: string): void => {
    if (refusal === null) return
    metrics.requestsTotal.inc({ route: 'unknown', model: '', status: String(refusal.status) })
    logger.info({ route: 'unknown', ...fields, status: refusal.status, error_code: refusal.code }, message)
  }
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    // The parser failed before, and the connection ends once its whole requests are answered: Node raises
    // this again for every later read, and each once logged a line (a diff review: 21 for 1 MB of junk).
    if (connections.closingAfterWholeRequests(socket)) {
      socket.pause()
      return
    }
    // The body of a request answered already (a 401 before it was read) broke off or ran past
    // requestTimeout: a second answer would read as one to a request never sent, and count it
    // twice (a resources review: a 408 after the 401 of a body trickled a byte a second).
    if (connections.answeredWhileReading(socket)) {
      logger.debug({ route: 'unknown', error_code: error.code ?? null }, 'the unread body of an answered request did not arrive whole: connection closed')
      socket.destroy()
      return
    }
    // A request whose head was read and whose body the parser refused has the refusal's record, or the line
    // below: not a second one as its route's 499 when its response closes (an HTTP review saw both). Only that
    // one, not read whole: one before it, perhaps forwarded, keeps its own (a diff review).
    const inProgress = connections.inProgressOn(socket)
    const cutShort = inProgress.filter((response) => !response.req.complete)
    // Bad bytes after a request read whole: that request may be at a backend already. It
    // is answered (a refusal now would read as its answer), then the connection closes.
    if (!clientGone(error) && socket.writable && inProgress.length > cutShort.length) {
      for (const response of cutShort) answeredByParserRefusal(response)
      connections.closeAfterWholeRequests(socket)
      logger.info({ route: 'unknown', error_code: 'malformed_http' }, 'bytes after a request refused by the HTTP parser: the connection closes once it is answered')
      return
    }
    const refusal = answerParserError(error, socket, connections.responding(socket))
    if (refusal !== null) for (const response of cutShort) answeredByParserRefusal(response)
    recordRefusal(refusal, {}, 'request refused by the HTTP parser')
  })
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    recordRefusal(answerExpectation(response), {}, 'unsupported Expect header refused')
  })
  server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    recordRefusal(answerConnect(socket, connections.busy(socket)), { method: 'CONNECT' }, 'CONNECT refused')
  })
  return { server, connections }
}

/**
 * Past `max` open connections Node closes a new one as it accepts it ('drop'),
 * before a byte is read: there is no request to answer yet, and a flood of
 * idle connections is not left to reach the process's file descriptor limit.
 * 0 leaves Node's default (no cap): newer Node reads a 0 as "drop them all".
 * Logged at the 1st, 10th, 100th... drop, not each: a flood would flood the log too.
 */
function capConnections(server: Server, max: number, metrics: Metrics, logger: Logger): void {
  if (max === 0) return
  server.maxConnections = max
  let dropped = 0
  let nextLogAt = 1
  server.on('drop', () => {
    metrics.connectionsDropped.inc()
    if (++dropped < nextLogAt) return
    nextLogAt *= 10
    logger.warn({ max_connections: max, dropped }, 'connection closed as it was accepted: server.max_connections are open')
  })
}
