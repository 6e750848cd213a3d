/**
 * Connections whose answer in progress was decided to close them
 * (`Connection: close`: a body left unread and too long to drain, a
 * refusal that closes). Node goes on parsing what the client pipelined in
 * the same read and hands the app the next request while that answer is
 * still being made (an upstream call): it was served, a training job
 * created whose answer the client never got (a security review). RFC 9112
 * §9.6: a server that sends close processes nothing after that request.
 */
import type { Socket } from 'node:net'

const closing = new WeakSet<Socket>()

export function markClosing(socket: Socket): void {
  closing.add(socket)
}

export function isClosing(socket: Socket): boolean {
  return closing.has(socket)
}
