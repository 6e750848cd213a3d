/**
 * Splits a byte stream of Server-Sent Events into whole events (each with
 * its terminating blank line), so an event is inspected and forwarded in one
 * piece however the network cut it. Bytes are never altered.
 *
 * Lines end in CRLF, LF or a lone CR (the SSE spec allows all three); an
 * event ends at an empty line. Each byte is scanned once, however many
 * chunks an event spans (no re-concatenation per chunk). An event that grows
 * past `maxEventBytes` without ending is handed on in pieces: the client
 * gets its bytes instead of the gateway holding them without bound.
 */

const LF = 0x0a
const CR = 0x0d

/** Above any real chat event (usage chunks are tiny); bounds what one stream may hold back. */
export const MAX_EVENT_BYTES = 256 * 1024

export class SseEventSplitter {
  readonly #maxEventBytes: number
  /** Bytes of the unfinished event, in arrival order. */
  #parts: Buffer[] = []
  #partsLength = 0
  /** No character since the last line break: the next line break ends the event. */
  #lineEmpty = true
  /** The held bytes end in a CR whose meaning (CR or CRLF) the next byte decides. */
  #heldCR = false
  /** Part of the current event was handed on already (it outgrew the bound). */
  #handedOnPart = false
  /** An event was handed on at its last CR (takeEndedAtCR): an LF next completes that CRLF, it is no empty line. */
  #crEnded = false

  constructor(maxEventBytes = MAX_EVENT_BYTES) {
    this.#maxEventBytes = maxEventBytes
  }

  /** The whole events completed by this chunk, in order. */
  push(chunk: Buffer): Buffer[] {
    const events: Buffer[] = []
    let from = 0
    let at = 0
    if (this.#crEnded && chunk.length > 0) {
      this.#crEnded = false
      // The rest of that event's CRLF: a piece of its own, so the next event starts clean and no byte is lost.
      if (chunk[0] === LF) {
        events.push(chunk.subarray(0, 1))
        from = at = 1
      }
    }
    if (this.#heldCR && chunk.length > 0) {
      this.#heldCR = false
      at = chunk[0] === LF ? 1 : 0
      if (this.#lineBreak()) {
        events.push(this.#take(chunk, from, at))
        from = at
      }
    }
    // A stream framed with LF alone has no CR: one search per chunk tells.
    let cr = chunk.indexOf(CR, at)
    while (at < chunk.length) {
      if (cr >= 0 && cr < at) cr = chunk.indexOf(CR, at)
      const lf = chunk.indexOf(LF, at)
      const brk = cr < 0 ? lf : lf < 0 ? cr : Math.min(lf, cr)
      if (brk < 0) {
        this.#lineEmpty = false
        break
      }
      if (brk > at) this.#lineEmpty = false
      if (chunk[brk] === CR && brk + 1 === chunk.length) {
        this.#heldCR = true
        break
      }
      at = chunk[brk] === CR && chunk[brk + 1] === LF ? brk + 2 : brk + 1
      if (this.#lineBreak()) {
        events.push(this.#take(chunk, from, at))
        from = at
      }
    }
    if (from < chunk.length) this.#hold(chunk.subarray(from), events)
    return events
  }

  /**
   * The held event when it is whole but for the LF that may follow its last
   * CR, and framed with lone CRs (null otherwise). push() keeps it until the
   * next byte tells CR from CRLF; with lone-CR framing that byte is the next
   * event's, a token's time away, and never comes when the backend fails
   * first. Whether an LF follows does not change the event (the SSE spec ends
   * the blank line at the CR), so it can go now; push() then gives such an
   * LF as a one-byte piece of its own. An event with an LF in it is CRLF or
   * LF framed: its last LF comes with the next bytes at once, and it stays
   * held so that it goes out (and is inspected) with its whole terminator.
   */
  takeEndedAtCR(): Buffer | null {
    if (!this.#heldCR || !this.#lineEmpty || this.#partsLength === 0) return null
    // Scanned again only here: an event that ends exactly at the end of a network chunk, in a CR.
    for (const part of this.#parts) if (part.indexOf(LF) >= 0) return null
    this.#heldCR = false
    this.#crEnded = true
    this.#handedOnPart = false
    const event = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#partsLength)
    this.#parts = []
    this.#partsLength = 0
    return event
  }

  /** Whether the receiver holds the start of an event whose end has not come (it outgrew the bound). */
  get midEvent(): boolean {
    return this.#handedOnPart
  }

  /** Bytes of an unfinished event (non-empty only when the stream ended mid-event). */
  rest(): Buffer {
    return this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts)
  }

  /** A line break was read; true when it ended the event (the line was empty). */
  #lineBreak(): boolean {
    if (this.#lineEmpty) return true
    this.#lineEmpty = true
    return false
  }

  #take(chunk: Buffer, from: number, to: number): Buffer {
    this.#handedOnPart = false
    const tail = chunk.subarray(from, to)
    if (this.#parts.length === 0) return tail
    this.#parts.push(tail)
    const event = Buffer.concat(this.#parts, this.#partsLength + tail.length)
    this.#parts = []
    this.#partsLength = 0
    return event
  }

  #hold(bytes: Buffer, events: Buffer[]): void {
    this.#parts.push(bytes)
    this.#partsLength += bytes.length
    if (this.#partsLength <= this.#maxEventBytes || this.#heldCR) return
    // Oversized: pass on what there is; the event's end comes as a later piece.
    events.push(this.#parts.length === 1 ? bytes : Buffer.concat(this.#parts, this.#partsLength))
    this.#handedOnPart = true
    this.#parts = []
    this.#partsLength = 0
  }
}
