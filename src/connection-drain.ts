/**
 * Lets a draining server finish what it is doing and nothing more: once
 * draining, every response closes its connection when done, and connections
 * with no request in progress (idle keep-alives, or opened and never used)
 * are closed at once. Node's own `closeIdleConnections` misses the latter
 * and cannot see a keep-alive connection that goes idle later.
 */
import type { Server } from 'node:http'
import type { Socket } from 'node:net'

export interface ConnectionDrain {
  /** Starts draining: idle connections close now, busy ones after their response. */
  drain(): void
  /** Client connections currently open. */
  open(): number
}

export function trackConnections(server: Server): ConnectionDrain {
  const active = new Map<Socket, number>()
  let draining = false

  server.on('connection', (socket: Socket) => {
    active.set(socket, 0)
    socket.once('close', () => active.delete(socket))
  })
  server.on('request', (request, response) => {
    const socket = request.socket
    active.set(socket, (active.get(socket) ?? 0) + 1)
    if (draining) response.setHeader('connection', 'close')
    response.once('close', () => {
      // When the client hung up, the socket closes before its response does:
      // it is gone from the map then, and must not be put back (that leaked
      // every aborted request, response and upstream body with it).
      const count = active.get(socket)
      if (count === undefined) return
      active.set(socket, count - 1)
      if (draining && count === 1) socket.end()
    })
  })

  return {
    open: () => active.size,
    drain() {
      draining = true
      for (const [socket, requests] of active) if (requests === 0) socket.end()
    },
  }
}
