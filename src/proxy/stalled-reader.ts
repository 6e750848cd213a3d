/**
 * A client that reads nothing of an answer the gateway holds for it. A
 * whole answer (up to `server.answer_limit_bytes`) sits in memory until its
 * client reads it, and one that never does held it for good: a resource
 * audit left three 30 MB answers unread, RSS 98 -> 312 MiB, with nothing to
 * end them. Checked every `idleMs` while bytes are still waiting: the
 * connection is closed when none left since the last check. A slow reader
 * that makes progress keeps its connection.
 */
import type { ServerResponse } from 'node:http'

export function closeIfUnread(response: ServerResponse, idleMs: number, onClose: () => void): void {
  if (response.writableFinished || response.writableLength === 0) return
  let waiting = response.writableLength
  const check = setInterval(() => {
    const now = response.writableLength
    if (response.writableFinished || now === 0) return clearInterval(check)
    if (now < waiting) {
      waiting = now
      return
    }
    clearInterval(check)
    onClose()
    response.destroy()
  }, idleMs)
  check.unref()
  response.once('close', () => clearInterval(check))
}
