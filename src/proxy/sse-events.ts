/**
 * Splits a byte stream of Server-Sent Events into whole events (each with
 * its terminating blank line), so an event is inspected and forwarded in one
 * piece however the network cut it. Bytes are never altered.
 */

const LF_LF = Buffer.from('\n\n')
const CRLF_CRLF = Buffer.from('\r\n\r\n')

export class SseEventSplitter {
  #pending: Buffer = Buffer.alloc(0)

  /** The whole events completed by this chunk, in order. */
  push(chunk: Buffer): Buffer[] {
    let data = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk])
    const events: Buffer[] = []
    for (;;) {
      const end = eventEnd(data)
      if (end < 0) break
      events.push(data.subarray(0, end))
      data = data.subarray(end)
    }
    this.#pending = data
    return events
  }

  /** Bytes of an unfinished event (non-empty only when the stream ended mid-event). */
  rest(): Buffer {
    return this.#pending
  }
}

/** Index just past the first event terminator, or -1. */
function eventEnd(data: Buffer): number {
  const lf = data.indexOf(LF_LF)
  const crlf = data.indexOf(CRLF_CRLF)
  if (lf < 0 && crlf < 0) return -1
  if (crlf < 0 || (lf >= 0 && lf < crlf)) return lf + LF_LF.length
  return crlf + CRLF_CRLF.length
}
