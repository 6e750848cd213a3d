/**
 * A client that reads nothing of an answer the gateway holds for it.
 *
 * - A whole chat answer (up to `server.answer_limit_bytes`) sits in memory
 *   until its client reads it: a resource audit left three 30 MB answers
 *   unread, RSS 98 -> 312 MiB, with nothing to end them.
 * - A platform answer piped from its upstream (an object's value) pauses the
 *   upstream instead, and undici's body timeout does not run on a paused
 *   exchange: the upstream connection was held for as long as the client
 *   stayed connected.
 *
 * Checked every quarter of `idleMs`: the connection is closed once bytes
 * have waited `idleMs` with none leaving (fewer waiting, or a 'drain', which
 * is how a pipe's writer learns the client caught up). A slow reader that
 * makes progress keeps its connection; a slow upstream with nothing waiting
 * for the client is not the client's doing. Checked only every `idleMs`, a
 * piped answer's first bytes were seen a whole check late, and a stalled
 * client was let go after twice `idleMs` (a flow review: 10 minutes at
 * the default 5).
 */
import type { ServerResponse } from 'node:http'

const NOTHING_TO_STOP = (): void => undefined

/**
 * Bytes libuv still has to hand to the kernel for the response's socket.
 * A large write counts whole in `writableLength` until the kernel has
 * taken all of it, so a reader taking a large whole answer slowly showed
 * the guard no progress and was cut off part-way (a diff review: 3.9 of
 * 4 MiB at 530 KB/s, a truncated 200); libuv's own count falls with each
 * partial write. Node's handle says it (`writeQueueSize`), undocumented.
 */
function queuedInLibuv(response: ServerResponse): number {
  const handle = (response.socket as { _handle?: { writeQueueSize?: unknown } } | null)?._handle
  return typeof handle?.writeQueueSize === 'number' ? handle.writeQueueSize : 0
}

/** The guard, stopped when the response closes. */
export function closeIfUnread(response: ServerResponse, idleMs: number, onClose: () => void): void {
  const stop = watchUnread(response, idleMs, onClose)
  if (stop !== NOTHING_TO_STOP) response.once('close', stop)
}

/**
 * The guard without a 'close' listener of its own: the caller stops it when
 * the response closes, from a listener it has anyway (Node warns of a leak
 * past ten listeners of one event, and a platform answer's response had
 * eleven 'close' listeners with this one). Returns the function that stops it.
 */
export function watchUnread(response: ServerResponse, idleMs: number, onClose: () => void): () => void {
  if (response.writableFinished) return NOTHING_TO_STOP
  // A whole answer already handed to the socket: nothing will wait (and no timer per request).
  if (response.writableEnded && response.writableLength === 0) return NOTHING_TO_STOP
  let waiting = response.writableLength
  let queued = queuedInLibuv(response)
  /** When the bytes waiting were last seen leaving, or began to wait; null while nothing waits. */
  let stuckSince: number | null = waiting > 0 ? Date.now() : null
  let drained = false
  const onDrain = (): void => {
    drained = true
  }
  const check = setInterval(() => {
    if (response.writableFinished) return stop()
    // A pipelined answer waiting its turn has no socket yet: its bytes wait for the answers
    // before it, not for its reader (a code review saw one dropped while its client read).
    if (response.socket === null) {
      waiting = 0
      stuckSince = null
      return
    }
    const now = response.writableLength
    const queuedNow = queuedInLibuv(response)
    const moved = drained || now < waiting || queuedNow < queued
    waiting = now
    queued = queuedNow
    drained = false
    if (now === 0) {
      stuckSince = null
      return
    }
    // Seen moving (or beginning to wait) at this check: the clock starts here, not at the next check that
    // sees it still, which let a reader that stopped just after a check go only at 1½ idleMs (a diff review).
    if (moved || stuckSince === null) {
      stuckSince = Date.now()
      return
    }
    if (Date.now() - stuckSince < idleMs) return
    stop()
    onClose()
    response.destroy()
  }, Math.max(1, Math.ceil(idleMs / 4)))
  check.unref()
  const stop = (): void => {
    clearInterval(check)
    response.removeListener('drain', onDrain)
  }
  response.on('drain', onDrain)
  return stop
}
