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
 * Pure bookkeeping over bytes, no I/O: chat-stream.ts writes what it returns.
 */
import type { ErrorBody } from '../errors/gateway-error.js'
import { errorEventOf, type ErrorEvent } from './error-event.js'
import { SseEventSplitter } from './sse-events.js'
import { bytesAt } from '../bytes-at.js'
import { carriesContent, dataOf, inspectEvent, type TokenUsage } from './stream-usage.js'

const DONE_MARK = Buffer.from('[DONE]')
const DATA_FIELD = Buffer.from('data:')
const BLANK_LINE = Buffer.from('\n\n')
const SPACE = 0x20

/**
 * Whether the event's data is `[DONE]`, read as an SSE client reads it (the
 * openai client: data starting with `[DONE]`): the `data:` lines joined, one
 * space after the colon dropped, whatever other fields the event has.
 */
function isDone(event: Buffer): boolean {
  // The usual event, `data:` first: its data starts as its first line's value does, however long the event
  // (trailing spaces). Read in place, as every event of a stream is asked this and a Buffer method call
  // costs ten times the compare.
  if (startsWithData(event)) return bytesAt(event, DONE_MARK, event[DATA_FIELD.length] === SPACE ? DATA_FIELD.length + 1 : DATA_FIELD.length)
  // Another field first (an `id:` line of any length) or a comment: searched once, read whole only when it names [DONE].
  if (event.indexOf(DONE_MARK) < 0) return false
  return dataOf(event.toString('latin1'))?.startsWith('[DONE]') === true
}

/** An event whose first line is a `data:` field: vLLM's chunks are one such line each. */
function startsWithData(event: Buffer): boolean {
  return bytesAt(event, DATA_FIELD, 0)
}

/** One event after the others of a chunk; no array for the usual chunk of one event. */
function appended(out: Buffer | Buffer[] | null, event: Buffer): Buffer | Buffer[] {
  if (out === null) return event
  if (!Array.isArray(out)) return [out, event]
  out.push(event)
  return out
}

export class SseRelay {
  readonly #splitter = new SseEventSplitter()
  readonly #stripInjectedUsage: boolean
  #usage: TokenUsage | null = null
  #contentSeen = false
  /** Data events seen before `[DONE]`, for the estimate when no usage comes (usage-estimate.ts). */
  #events = 0
  /** `[DONE]` came: the answer is whole, and nothing after it is the client's. */
  #done = false
  /** The backend reported an error inside the stream (error-event.ts): the first one. */
  #errorEvent: ErrorEvent | null = null

  /** `stripInjectedUsage`: the gateway asked for `include_usage` itself, so hide what that adds. */
  constructor(stripInjectedUsage: boolean) {
    this.#stripInjectedUsage = stripInjectedUsage
  }

  /** The usage the stream reported so far (the last one wins). */
  get usage(): TokenUsage | null {
    return this.#usage
  }

  /**
   * Data events the upstream sent before `data: [DONE]`: not comments
   * (keep-alives), nor the pieces of an event that outgrew the splitter's
   * bound, nor a stray line break, which carry no token.
   */
  get events(): number {
    return this.#events
  }

  /**
   * The bytes to send for one upstream chunk (null: nothing yet), whether
   * they hold the stream's first generated output, and the backend's error
   * event when they hold the stream's first.
   */
  push(chunk: Buffer): { readonly out: Buffer | null; readonly firstContent: boolean; readonly errorEvent: ErrorEvent | null } {
    let out: Buffer | Buffer[] | null = null
    let firstContent = false
    let errorEvent: ErrorEvent | null = null
    if (this.#done) return { out, firstContent, errorEvent }
    // The first piece is the rest of an event that outgrew the splitter's bound: it starts wherever the
    // network cut it, and content reading `data: [DONE]` there is no end (a diff review).
    let continuation = this.#splitter.midEvent
    const events = this.#splitter.push(chunk)
    // A lone-CR framed event goes out now, not when the backend's next bytes come (if they ever do).
    const endedAtCR = this.#splitter.takeEndedAtCR()
    if (endedAtCR !== null) events.push(endedAtCR)
    for (let at = 0; at < events.length; at++) {
      const event = events[at]!
      const piece = continuation
      continuation = false
      if (!piece && isDone(event)) {
        // The end of the answer: it goes out, and whatever followed it in the chunk does not.
        this.#done = true
        out = appended(out, event)
        // A [DONE] event that outgrew the bound itself: the blank line ending it is never coming.
        if (at === events.length - 1 && this.#splitter.midEvent) out = appended(out, BLANK_LINE)
        break
      }
      if (!piece && startsWithData(event)) {
        this.#events++
        if (this.#errorEvent === null) errorEvent = this.#errorEvent = errorEventOf(event)
      }
      const verdict = inspectEvent(event, this.#stripInjectedUsage)
      if (verdict.usage !== null) this.#usage = verdict.usage
      if (verdict.forward === null) continue
      if (!this.#contentSeen && carriesContent(verdict.forward)) firstContent = this.#contentSeen = true
      out = appended(out, verdict.forward)
    }
    return { out: Array.isArray(out) ? Buffer.concat(out) : out, firstContent, errorEvent }
  }

  /** The upstream ended cleanly: the bytes of an unfinished last event, passed as they are (see `complete`). */
  end(): Buffer | null {
    if (this.#done) return null
    const rest = this.#splitter.rest()
    if (rest.length === 0) return null
    // A bare `data: [DONE]` with no blank line after it still says the stream is whole (not the rest of an oversized event).
    if (!this.#splitter.midEvent && isDone(rest)) this.#done = true
    return rest
  }

  /**
   * Whether `data: [DONE]` came, as vLLM and OpenAI end every stream: the
   * answer is whole, and the caller ends the client's stream with it. One
   * that ended cleanly without it was cut short somewhere upstream, and a
   * client would take what it got for the whole answer: the caller closes
   * it with failure() instead.
   */
  get complete(): boolean {
    return this.#done
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
