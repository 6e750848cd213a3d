/**
 * Lets a draining server finish what it is doing and nothing more: once
 * draining, every response closes its connection when done, and connections
 * with no request in progress (idle keep-alives, or opened and never used)
 * are closed at once. Node's own `closeIdleConnections` misses the latter
 * and cannot see a keep-alive connection that goes idle later.
 */
import type { Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { closeBehindUndecidedAnswers, closesItsConnection } from './closing-connections.js'

export interface ConnectionDrain {
  /** Starts draining: idle connections close now, busy ones after their response. */
  drain(): void
  /** Client connections currently open. */
  open(): number
  /** Whether a response has started on this connection and not finished (nothing else may be written to it then). */
  responding(socket: Socket): boolean
  /**
   * The parser lost its place: the requests in progress on the connection
   * that were read whole are still answered, then the connection closes
   * (nothing after them is read), and this returns true; one it was reading
   * (whose bytes it refused) is given up, its response destroyed unsent.
   * With none read whole nothing changes and it returns false.
   */
  closeAfterWholeRequests(socket: Socket): boolean
  /** Whether closeAfterWholeRequests already decided this connection's end: bytes after that are not looked at. */
  closingAfterWholeRequests(socket: Socket): boolean
  /**
   * Whether the connection's latest request was answered while its body is
   * still coming (a 401 before a small body Node reads and throws away):
   * a parser error or timeout now is about bytes of a request answered
   * already, not one to answer.
   */
  answeredWhileReading(socket: Socket): boolean
  /** Whether a request on this connection is still being answered. */
  busy(socket: Socket): boolean
  /** Every response in progress, on every connection. */
  inProgress(): ServerResponse[]
  /** The responses in progress on one connection. */
  inProgressOn(socket: Socket): ServerResponse[]
}

/**
 * A pipelined request's response waits for the ones before it without a
 * socket of its own, and when the connection closes Node drops it without
 * a 'close' event (its request gets one). Everything that ends with a
 * response listens for that event (the access line, the slot and the key's
 * share, the upstream call, the generation's count of requests): without
 * it they waited for good. Node will never give such a response a socket:
 * it is destroyed and its 'close' emitted here.
 */
function closeWaitingResponses(responses: Iterable<ServerResponse>): void {
  for (const response of [...responses]) {
    // One with a socket gets its 'close' from Node; one without, already destroyed by the gateway, does not either.
    if (response.socket !== null) continue
    response.destroy()
    response.emit('close')
  }
}

/**
 * Marks the connection's last response `Connection: close`, and only that
 * one: Node takes a response so marked for the connection's last and drops
 * those queued behind it, so marking every unsent one lost the answers to
 * pipelined requests already forwarded upstream (an HTTP review: a second
 * training job was created and its answer never sent). A mark this module
 * put on an earlier response, before a later request came, is taken off.
 */
function closeAfterLast(responses: Set<ServerResponse>, marked: WeakSet<ServerResponse>): void {
  let last: ServerResponse | undefined
  // One given up (a request whose bytes the parser refused) is never sent: it cannot be the last.
  for (const response of responses) if (!response.destroyed) last = response
  for (const response of responses) {
    if (response.headersSent || response.destroyed) continue
    if (response === last) {
      response.setHeader('connection', 'close')
      marked.add(response)
    } else if (marked.has(response) && !closesItsConnection(response)) {
      // Said, not removed: a removed header leaves the answer with none (an HTTP/1.0 keep-alive client reads a close).
      // One that closes its connection for another reason keeps its close (a diff review: an HTTP/1.0 answer a
      // request was pipelined behind went out keep-alive, and that request's refusal reached the client).
      response.setHeader('connection', response.shouldKeepAlive ? 'keep-alive' : 'close')
      marked.delete(response)
    }
  }
}

export function trackConnections(server: Server): ConnectionDrain {
  /** The responses in progress on each open connection. */
  const active = new Map<Socket, Set<ServerResponse>>()
  /** Connections to close once their responses are done (closeAfterWholeRequests). */
  const closing = new Set<Socket>()
  /** Responses this module marked `Connection: close` (closeAfterLast). */
  const marked = new WeakSet<ServerResponse>()
  /** Each connection's latest response: its request is the one the parser reads. */
  const latest = new WeakMap<Socket, ServerResponse>()
  let draining = false

  server.on('connection', (socket: Socket) => {
    active.set(socket, new Set())
    socket.once('close', () => {
      const responses = active.get(socket)
      active.delete(socket)
      closing.delete(socket)
      if (responses !== undefined) closeWaitingResponses(responses)
    })
  })
  server.on('request', (request, response) => {
    const socket = request.socket
    const responses = active.get(socket)
    responses?.add(response)
    latest.set(socket, response)
    if (responses !== undefined && responses.size > 1) closeBehindUndecidedAnswers(responses, response)
    if (draining && responses !== undefined) closeAfterLast(responses, marked)
    // `on`, not `once`: a response closes only once, and once's wrapper costs on every request.
    response.on('close', () => {
      // When the client hung up, the socket closes before its response does:
      // it is gone from the map then, and nothing may keep it (a socket put
      // back once leaked every aborted request, response and upstream body).
      responses?.delete(response)
      if ((draining || closing.has(socket)) && active.has(socket) && responses?.size === 0) socket.end()
    })
  })

  return {
    open: () => active.size,
    responding: (socket) => [...(active.get(socket) ?? [])].some((response) => response.headersSent),
    closeAfterWholeRequests(socket) {
      const responses = active.get(socket)
      if (responses === undefined || ![...responses].some((response) => response.req.complete)) return false
      closing.add(socket)
      // Written now, a refusal read as the answer to the request before it, which a backend may be running
      // (a diff review); and that request's real answer was lost when the connection closed.
      const whole = new Set([...responses].filter((response) => response.req.complete))
      for (const response of responses) if (!whole.has(response)) response.destroy()
      closeAfterLast(whole, marked)
      return true
    },
    closingAfterWholeRequests: (socket) => closing.has(socket),
    answeredWhileReading(socket) {
      const response = latest.get(socket)
      return response !== undefined && response.writableFinished && !response.req.complete
    },
    busy: (socket) => (active.get(socket)?.size ?? 0) > 0,
    inProgress: () => [...active.values()].flatMap((responses) => [...responses]),
    inProgressOn: (socket) => [...(active.get(socket) ?? [])],
    drain() {
      draining = true
      for (const [socket, responses] of active) {
        // A connection lingering after its last answer (lingering-close.ts) is left its 5 s at most: destroyed
        // now, a client still sending got the reset the linger is there to spare it (a code review).
        if (responses.size === 0) socket.end()
        // The last response not yet begun (a request waiting in a queue) is the connection's last: say so.
        else closeAfterLast(responses, marked)
      }
    },
  }
}
