/**
 * One HTTP exchange with a backend through undici's `dispatch` handler API.
 *
 * Why not `pool.request`: it builds a Readable for every answer body, an
 * AbortSignal listener and a chain of promises per chunk, and those showed
 * up in the hot path's CPU profile (bench/proxy-overhead.mjs). Here the
 * body's chunks go straight to whoever consumes them — a buffer for a JSON
 * answer, the client's socket for a stream — with pause/resume carrying the
 * client's backpressure to the backend, and `abort` for a client that left.
 */
import { errors, type Dispatcher } from 'undici'

/** The first-byte timeout's message when the headers came and the body's first byte did not. */
const BODY_LATE = 'Headers came, but no body byte within first_byte_ms'
/** Its message when body bytes came but nothing the client could be sent (a stream's first whole event). */
const FIRST_EVENT_LATE = 'Body bytes came, but nothing to send the client within first_byte_ms'

export type UpstreamHeaders = Record<string, string | string[] | undefined>

export interface UpstreamHead {
  readonly statusCode: number
  readonly headers: UpstreamHeaders
}

/** Where an answer body goes. `data` returns false to pause the backend until `resume()`. */
export interface BodySink {
  data(chunk: Buffer): boolean
  end(): void
  error(error: Error): void
}

type BodyEvent = { readonly kind: 'end' } | { readonly kind: 'error'; readonly error: Error }

/** An answer whose status is not an HTTP status code; classified as a broken response. */
export class InvalidStatusError extends Error {
  constructor(statusCode: number) {
    super(`the answer's status ${statusCode} is not an HTTP status code`)
    this.name = 'InvalidStatusError'
  }
}

/** An answer longer than the caller would hold in memory. */
export class AnswerTooLargeError extends Error {
  readonly limitBytes: number
  constructor(limitBytes: number) {
    super(`the answer is larger than ${limitBytes} bytes`)
    this.name = 'AnswerTooLargeError'
    this.limitBytes = limitBytes
  }
}

export class UpstreamCall implements Dispatcher.DispatchHandler {
  /** Settles when the answer's status and headers are in, or the exchange failed before them. */
  readonly head: Promise<UpstreamHead>
  #resolveHead!: (head: UpstreamHead) => void
  #rejectHead!: (error: Error) => void
  #headSettled = false
  #controller: Dispatcher.DispatchController | null = null
  #abortReason: Error | null = null
  #sink: BodySink | null = null
  /** Chunks (and the end) that arrived before a sink was attached. */
  #early: Buffer[] = []
  #finished: BodyEvent | null = null
  readonly #firstByteMs: number | undefined
  #firstByteTimer: NodeJS.Timeout | undefined
  readonly #idleMs: number | undefined
  #idleTimer: NodeJS.Timeout | undefined
  /** A byte of the answer's body came (or its end). */
  #bodyStarted = false
  /** The client got the answer's first bytes (firstBytesSent): with idleMs, the first-byte wait ends only then. */
  #firstBytesSent = false
  /** The consumer paused the body: its silence is not the upstream's. */
  #paused = false
  /** Waiting for bodyStart(): settled by the body's first byte, its end, or a failure before either. */
  #bodyWaiter: { resolve: () => void; reject: (error: Error) => void } | null = null

  /**
   * `firstByteMs`: how long the answer's status and headers may take once the
   * request is on its way. undici's own headers timeout runs on a timer that
   * ticks every ~0.5 s (it fired up to a second late); this one is on time,
   * and undici's stays behind it as a backstop.
   *
   * `idleMs` (chat backends): the first byte of the answer's body is waited
   * for as long as `firstByteMs` too, and after it each silence may last
   * `idleMs`, on this call's own timers. The `firstByteMs` deadline runs on
   * until the consumer says the client got its first bytes
   * (`firstBytesSent`): a backend trickling a byte per second of a stream's
   * first event held the client, which had received nothing, and a slot
   * for as long as it liked (a stream review). The caller turns undici's body
   * timeout off in `options` (`bodyTimeout: 0`, written in its literal: a
   * spread copy here cost ~0.6 µs a request). vLLM sends a stream's headers
   * as it accepts the request and its first event after queueing and
   * prefill: that wait is the first byte's, not a silence inside the answer.
   */
  constructor(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, firstByteMs?: number, idleMs?: number) {
    this.head = new Promise<UpstreamHead>((resolve, reject) => {
      this.#resolveHead = resolve
      this.#rejectHead = reject
    })
    this.#firstByteMs = firstByteMs
    this.#idleMs = idleMs
    dispatcher.dispatch(options, this)
  }

  /** Stops the exchange (the client went away); a pending `head` rejects with `reason`. */
  abort(reason: Error): void {
    if (this.#abortReason !== null) return
    this.#abortReason = reason
    if (this.#controller !== null) {
      this.#controller.abort(reason)
      return
    }
    // Still queued for a connection: undici hands over the controller only
    // when a connection frees, so the caller hears now and the request is
    // aborted the moment it would have started.
    this.#failHead(reason)
  }

  get aborted(): boolean {
    return this.#abortReason !== null
  }

  /**
   * Resolves once the answer's body began (its first byte, or its end when
   * empty); rejects when the exchange failed before that. Nothing of the
   * answer has reached the client until then, so a failure here may still
   * be retried on another backend.
   */
  bodyStart(): Promise<void> {
    if (this.#bodyStarted || this.#finished?.kind === 'end') return Promise.resolve()
    if (this.#finished?.kind === 'error') return Promise.reject(this.#finished.error)
    return new Promise<void>((resolve, reject) => (this.#bodyWaiter = { resolve, reject }))
  }

  /** The client got the answer's first bytes (or is about to be sent the whole answer): the first-byte wait is over. */
  firstBytesSent(): void {
    this.#firstBytesSent = true
    if (this.#bodyStarted) clearTimeout(this.#firstByteTimer)
  }

  resume(): void {
    this.#paused = false
    // A silence timed while paused starts over (undici's own body timeout does the same).
    this.#idleTimer?.refresh()
    this.#controller?.resume()
  }

  /** Sends the body (chunks already received first) to `sink`. */
  consume(sink: BodySink): void {
    this.#sink = sink
    const early = this.#early
    this.#early = []
    for (const chunk of early) if (!sink.data(chunk)) this.#pause()
    if (this.#finished?.kind === 'end') sink.end()
    else if (this.#finished?.kind === 'error') sink.error(this.#finished.error)
  }

  /**
   * The whole body in one buffer; past `limitBytes` the exchange is aborted and this rejects with
   * AnswerTooLargeError, at once when its `declaredLength` (Content-Length) already says so: read
   * up to the limit first, such a body cost 64 MiB and its time for a 502 (a flow review).
   */
  readAll(limitBytes = Infinity, declaredLength?: string | string[]): Promise<Buffer> {
    if (typeof declaredLength === 'string' && Number(declaredLength) > limitBytes) {
      const tooLarge = new AnswerTooLargeError(limitBytes)
      this.abort(tooLarge)
      return Promise.reject(tooLarge)
    }
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      let size = 0
      this.consume({
        data: (chunk) => {
          size += chunk.length
          if (size <= limitBytes) return chunks.push(chunk) > 0
          // Rejected here, not through `error`: a body already wholly in ends normally after this.
          chunks.length = 0
          const tooLarge = new AnswerTooLargeError(limitBytes)
          reject(tooLarge)
          this.abort(tooLarge)
          return false
        },
        end: () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)),
        error: reject,
      })
    })
  }

  /**
   * Lets go of an answer that will not be used (a 502/503 before a retry).
   * Never waits for its body: one already in leaves the connection to be
   * reused, one still coming is aborted. Reading it to its end once made a
   * retry wait as long as the body took, forever for one that never ended.
   */
  drop(): void {
    this.#early = []
    if (this.#finished?.kind !== 'end') this.abort(new Error('The answer was dropped for a retry.'))
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller
    if (this.#abortReason !== null) controller.abort(this.#abortReason)
    else if (this.#firstByteMs !== undefined) this.#firstByteTimer = setTimeout(UpstreamCall.#firstByteLate, this.#firstByteMs, this)
  }

  /**
   * Ends the exchange with the error undici's own headers timeout raises, so it is classified the
   * same (504); its message, which the warn line quotes, says whether the headers had come.
   */
  static #firstByteLate(call: UpstreamCall): void {
    call.#firstByteTimer = undefined
    if (!call.#headSettled) call.#controller?.abort(new errors.HeadersTimeoutError())
    else if (call.#idleMs !== undefined && !call.#bodyStarted) call.#controller?.abort(new errors.HeadersTimeoutError(BODY_LATE))
    else if (call.#idleMs !== undefined && !call.#firstBytesSent) call.#controller?.abort(new errors.HeadersTimeoutError(FIRST_EVENT_LATE))
  }

  /** The upstream went silent inside its answer for idleMs: undici's own body timeout error, classified the same. */
  static #idleLate(call: UpstreamCall): void {
    if (call.#paused || call.#finished !== null) return
    call.#controller?.abort(new errors.BodyTimeoutError())
  }

  #pause(): void {
    this.#paused = true
    this.#controller?.pause()
  }

  /** The first byte of the body (or its end) came: the silences' wait begins (and the first byte's ends, once sent). */
  #startBody(): void {
    this.#bodyStarted = true
    if (this.#firstBytesSent) clearTimeout(this.#firstByteTimer)
    if (this.#idleMs !== undefined) this.#idleTimer = setTimeout(UpstreamCall.#idleLate, this.#idleMs, this)
    this.#settleBodyWaiter(null)
  }

  #settleBodyWaiter(error: Error | null): void {
    const waiter = this.#bodyWaiter
    if (waiter === null) return
    this.#bodyWaiter = null
    if (error === null) waiter.resolve()
    else waiter.reject(error)
  }

  #stopTimers(): void {
    clearTimeout(this.#firstByteTimer)
    clearTimeout(this.#idleTimer)
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[]>): void {
    // An informational answer (103 Early Hints) comes before the real one:
    // undici reports both here, and taking the first for the head once sent
    // the client a bare 103 and dropped the answer.
    if (statusCode < 200) return
    if (statusCode > 599) {
      // Not an HTTP status (RFC 9110 §15): a broken answer, not one to pass on.
      this.#controller?.abort(new InvalidStatusError(statusCode))
      return
    }
    // With idleMs the first-byte timer runs on to the body's first byte.
    if (this.#idleMs === undefined) clearTimeout(this.#firstByteTimer)
    this.#headSettled = true
    this.#resolveHead({ statusCode, headers })
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#bodyStarted) this.#startBody()
    else this.#idleTimer?.refresh()
    if (this.#sink === null) this.#early.push(chunk)
    else if (!this.#sink.data(chunk)) this.#pause()
  }

  onResponseEnd(): void {
    this.#stopTimers()
    this.#finished = { kind: 'end' }
    this.#settleBodyWaiter(null)
    this.#sink?.end()
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#stopTimers()
    if (this.#failHead(error)) return
    if (this.#finished !== null) return
    this.#finished = { kind: 'error', error }
    this.#settleBodyWaiter(error)
    this.#sink?.error(error)
  }

  /** Rejects `head` if it is still pending; false when it had settled already. */
  #failHead(error: Error): boolean {
    if (this.#headSettled) return false
    this.#headSettled = true
    // The body will never come: a later error of the same call is not news.
    this.#finished = { kind: 'error', error }
    this.#rejectHead(error)
    return true
  }
}
