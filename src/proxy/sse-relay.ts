/**
 * What the client gets of an upstream Server-Sent Events body, chunk by
 * chunk: whatever complete events a network chunk holds go out at once,
 * nothing waits for the whole answer. Each event is looked at for token
 * usage on the way (and the usage the gateway asked for itself is hidden).
 *
 * When the upstream fails after the stream started, an unfinished event is
 * dropped and the client gets `data: {"error": ...}` and `data: [DONE]`, so
 * its SSE parser ends cleanly instead of hanging or choking on half a JSON.
 *
 * Pure bookkeeping over bytes, no I/O: chat-forward.ts writes what it returns.
 */
import type { ErrorBody } from '../errors/gateway-error.js'
import { SseEventSplitter } from './sse-events.js'
import { carriesContent, inspectEvent, type TokenUsage } from './stream-usage.js'

const DONE = /^data: ?\[DONE\]\s*$/
/** `data: [DONE]` and its CRLF CRLF. */
const DONE_MAX_BYTES = 16

function isDone(event: Buffer): boolean {
  return event.length <= DONE_MAX_BYTES && DONE.test(event.toString('latin1'))
}

export class SseRelay {
  readonly #splitter = new SseEventSplitter()
  readonly #stripInjectedUsage: boolean
  #usage: TokenUsage | null = null
  #contentSeen = false
  /** Whole events seen, and whether the last was `[DONE]`, for the estimate when no usage comes (usage-estimate.ts). */
  #events = 0
  #endedByDone = false

  /** `stripInjectedUsage`: the gateway asked for `include_usage` itself, so hide what that adds. */
  constructor(stripInjectedUsage: boolean) {
    this.#stripInjectedUsage = stripInjectedUsage
  }

  /** The usage the stream reported so far (the last one wins). */
  get usage(): TokenUsage | null {
    return this.#usage
  }

  /** Whole events the upstream sent so far, a closing `data: [DONE]` left out. */
  get events(): number {
    return this.#endedByDone ? this.#events - 1 : this.#events
  }

  /**
   * The bytes to send for one upstream chunk (null: nothing yet), and
   * whether they hold the stream's first generated output.
   */
  push(chunk: Buffer): { readonly out: Buffer | null; readonly firstContent: boolean } {
    let out: Buffer | Buffer[] | null = null
    let firstContent = false
    const events = this.#splitter.push(chunk)
    // A lone-CR framed event goes out now, not when the backend's next bytes come (if they ever do).
    const endedAtCR = this.#splitter.takeEndedAtCR()
    if (endedAtCR !== null) events.push(endedAtCR)
    if (events.length > 0) {
      this.#events += events.length
      // A flag, not the event: a kept slice would keep its whole network buffer alive. Content events are longer than 16 bytes.
      const last = events[events.length - 1]!
      this.#endedByDone = isDone(last)
    }
    for (const event of events) {
      const verdict = inspectEvent(event, this.#stripInjectedUsage)
      if (verdict.usage !== null) this.#usage = verdict.usage
      if (verdict.forward === null) continue
      if (!this.#contentSeen && carriesContent(verdict.forward)) firstContent = this.#contentSeen = true
      if (out === null) out = verdict.forward
      else if (Array.isArray(out)) out.push(verdict.forward)
      else out = [out, verdict.forward]
    }
    return { out: Array.isArray(out) ? Buffer.concat(out) : out, firstContent }
  }

  /** The upstream ended cleanly: the bytes of an unfinished last event, passed as they are (see `complete`). */
  end(): Buffer | null {
    const rest = this.#splitter.rest()
    if (rest.length === 0) return null
    // A bare `data: [DONE]` with no blank line after it still says the stream is whole.
    if (isDone(rest)) this.#endedByDone = true
    return rest
  }

  /**
   * Whether the stream's last event was `data: [DONE]`, as vLLM and OpenAI
   * end every stream. One that ended cleanly without it was cut short
   * somewhere upstream, and a client would take what it got for the whole
   * answer: the caller closes it with failure() instead.
   */
  get complete(): boolean {
    return this.#endedByDone
  }

  /**
   * The upstream failed mid-stream: the closing error event and `[DONE]`.
   * When the client already holds the start of an event that outgrew the
   * splitter's bound, a blank line ends that event first: glued to it, the
   * error event would have been part of its (broken) data, never its own.
   */
  failure(body: ErrorBody): Buffer {
    const close = this.#splitter.midEvent ? '\n\n' : ''
    return Buffer.from(`${close}data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`)
  }
}
