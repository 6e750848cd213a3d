/**
 * nginx's lingering close, for an answer sent before its request's body
 * was read (a 413 over the body limit, a 401 before an upload): Node closed
 * such a connection as soon as the answer was written, with the body's
 * unread bytes still in the kernel's buffer, and the kernel then sends a
 * reset. A client that sends its whole body before reading (undici, fetch,
 * Python's http.client) got EPIPE or ECONNRESET instead of the answer, and
 * often lost the answer too (a review: 1 to 20 % of 2 MiB bodies over a
 * 1 MiB limit, more on a loaded host). Now the gateway's half of the
 * connection closes (FIN after the answer), what the client still sends is
 * read and dropped, and the socket goes when the client closes its half,
 * after LINGER_MS, or past LINGER_BYTES.
 */
import type { Socket } from 'node:net'

/** nginx's lingering_timeout is 5 s. */
const LINGER_MS = 5000
/**
 * A client uploading gigabytes is not read for LINGER_MS: a few limits' worth at most. Node's parser
 * reads the socket itself, so the count is looked at every CHECK_MS (at 100 ms, a review saw 115-148
 * MiB read on loopback; a 'data' listener would take the socket off the parser).
 */
const LINGER_BYTES = 32 * 1024 * 1024
const CHECK_MS = 20

interface Lingering {
  readonly readBefore: number
  readonly deadline: number
}

/** Every socket lingering in this process, looked at by one timer (one per socket cost 11 % of a core for 3,000). */
const lingering = new Map<Socket, Lingering>()
let sweep: NodeJS.Timeout | null = null

/** Makes Node's close after the last answer on `socket` a lingering one (its HTTP server calls `destroySoon` then). */
export function lingerOnClose(socket: Socket): void {
  socket.destroySoon = lingeringDestroySoon
}

/** Whether `socket` is lingering: its answers are done and its client's bytes are being read and dropped. */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket)
}

function lingeringDestroySoon(this: Socket): void {
  linger(this)
}

function linger(socket: Socket): void {
  if (socket.destroyed || lingering.has(socket)) return
  lingering.set(socket, { readBefore: socket.bytesRead, deadline: Date.now() + LINGER_MS })
  // The request's body keeps being read and dropped by Node's parser (its request was dumped or is drained).
  socket.once('end', () => socket.destroy())
  socket.once('close', () => lingering.delete(socket))
  sweep ??= setInterval(endLingering, CHECK_MS)
  if (socket.writable) socket.end()
}

function endLingering(): void {
  const now = Date.now()
  for (const [socket, { readBefore, deadline }] of lingering) {
    if (now >= deadline || socket.bytesRead - readBefore > LINGER_BYTES) {
      lingering.delete(socket)
      socket.destroy()
    }
  }
  if (lingering.size === 0 && sweep !== null) {
    clearInterval(sweep)
    sweep = null
  }
}
