/**
 * A stand-in for a vLLM OpenAI-compatible server, for tests and `npm run demo`.
 * Plain node:http rather than fastify, so failure modes can act on the socket
 * exactly (destroy before headers, mid-stream, or never answer).
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { completionBody, planAnswer, streamFrames, type AnswerPlan, type SseFrame } from './chat-answer.js'
import {
  errorBody,
  metricsText,
  modelsBody,
  NOT_FOUND_BODY,
  sendJson,
  UNAUTHORIZED_BODY,
} from './stand-in-replies.js'
import { closeForcefully, listenOn } from './server-lifecycle.js'

export interface StandInOptions {
  /** Completion tokens per answer (default 8). */
  tokens?: number
  /** Delay before each streamed content chunk (default 0). */
  interTokenDelayMs?: number
  /** Failure to simulate on chat completions (default 'none'). */
  fail?: 'none' | 'status500' | 'hang' | 'close_mid_stream' | 'close_before_headers'
  /** When set, /v1/* requires `Authorization: Bearer <apiKey>`, like vLLM's --api-key. */
  apiKey?: string
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
  /** Served model name reported by /v1/models (default 'stand-in-model'). */
  modelName?: string
  /** `vllm:num_requests_waiting` to report in /metrics (default 0), to simulate a backend with its own queue. */
  reportWaiting?: number
  /** Hold every chat request (emitting 'held') until `releaseHeld()` lets it be answered. */
  hold?: boolean
}

export interface ReceivedRequest {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
  /** The parsed JSON body, or the raw text when it is not JSON. */
  body: unknown
}

export interface VllmStandIn {
  /** http://HOST:PORT */
  readonly url: string
  /** Every /v1/chat/completions request, in arrival order. */
  readonly received: ReceivedRequest[]
  /** Read at each request, so tests may change behaviour between requests. */
  options: StandInOptions
  /**
   * 'request' (ReceivedRequest) on arrival; 'chunk' (index) after each SSE
   * content chunk is written; 'client-closed' (ReceivedRequest) when the
   * client went away before the answer finished; 'answered'
   * (ReceivedRequest) when a chat response fully ended; 'held' (ReceivedRequest) when
   * a request is held (option `hold`).
   */
  readonly events: EventEmitter
  /** Chat requests currently being answered. */
  inFlight(): number
  /** Answers up to `count` held requests, oldest first; returns how many were released. */
  releaseHeld(count?: number): number
  /** Requests held and still connected. */
  heldCount(): number
  close(): Promise<void>
}

export async function startVllmStandIn(options: StandInOptions = {}): Promise<VllmStandIn> {
  const standIn = new StandInServer(options)
  await standIn.listen()
  return standIn
}

const DEFAULT_TOKENS = 8
const DEFAULT_MODEL = 'stand-in-model'
const CHAT_PATH = '/v1/chat/completions'

/** One chat request being answered. */
interface Exchange {
  readonly received: ReceivedRequest
  readonly req: IncomingMessage
  readonly res: ServerResponse
  /** Why the body is not JSON, or null when it is. */
  readonly jsonError: string | null
  /** Set when the stand-in itself cut the connection, so that is not reported as the client going away. */
  selfDestroyed: boolean
}

class StandInServer implements VllmStandIn {
  readonly received: ReceivedRequest[] = []
  readonly events = new EventEmitter()
  options: StandInOptions
  readonly #server: Server
  #url = ''
  #inFlight = 0
  #closing: Promise<void> | null = null
  readonly #held: Exchange[] = []

  constructor(options: StandInOptions) {
    this.options = options
    this.#server = createServer((req, res) => this.#route(req, res))
  }

  get url(): string {
    return this.#url
  }

  inFlight(): number {
    return this.#inFlight
  }

  releaseHeld(count = 1): number {
    let released = 0
    while (released < count) {
      const exchange = this.#held.shift()
      if (exchange === undefined) break
      if (exchange.res.destroyed) continue
      released += 1
      this.#answerPlanned(exchange)
    }
    return released
  }

  heldCount(): number {
    return this.#held.filter((e) => !e.res.destroyed).length
  }

  async listen(): Promise<void> {
    this.#url = await listenOn(this.#server, this.options.host ?? '127.0.0.1', this.options.port ?? 0)
  }

  /** Idempotent, and destroys open sockets so a hanging request never holds a test up. */
  close(): Promise<void> {
    this.#closing ??= closeForcefully(this.#server)
    return this.#closing
  }

  #route(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://stand-in').pathname
    const method = req.method ?? 'GET'
    if (method === 'POST' && path === CHAT_PATH) return this.#receiveChat(req, res)
    if (path.startsWith('/v1') && !this.#authorized(req)) return sendJson(res, 401, UNAUTHORIZED_BODY)
    if (method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, modelsBody(this.#modelName(), Math.floor(Date.now() / 1000)))
    }
    if (method === 'GET' && path === '/health') {
      res.writeHead(this.options.fail === 'status500' ? 500 : 200, { 'content-length': 0 })
      return void res.end()
    }
    if (method === 'GET' && path === '/metrics') {
      const text = metricsText(this.#modelName(), this.#inFlight, this.options.reportWaiting ?? 0)
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
      return void res.end(text)
    }
    sendJson(res, 404, NOT_FOUND_BODY)
  }

  #receiveChat(req: IncomingMessage, res: ServerResponse): void {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    // A client that aborts while uploading emits 'error' and never 'end': nothing was received.
    req.on('error', () => {})
    req.on('end', () => {
      // Gone already: its response's 'close' has fired, so it cannot be tracked.
      if (req.socket.destroyed) return
      const text = Buffer.concat(parts).toString('utf8')
      const parsed = parseJson(text)
      const received: ReceivedRequest = {
        method: req.method ?? 'POST',
        url: req.url ?? CHAT_PATH,
        headers: { ...req.headers },
        body: parsed.ok ? parsed.value : text,
      }
      const exchange: Exchange = { received, req, res, jsonError: parsed.ok ? null : parsed.message, selfDestroyed: false }
      this.#track(exchange)
      this.#answerChat(exchange)
    })
  }

  /** Counts the exchange in flight until its response closes, and reports how it ended. */
  #track(exchange: Exchange): void {
    this.received.push(exchange.received)
    this.#inFlight += 1
    exchange.res.on('close', () => {
      this.#inFlight -= 1
      if (exchange.res.writableFinished) this.events.emit('answered', exchange.received)
      else if (!exchange.selfDestroyed && this.#closing === null) this.events.emit('client-closed', exchange.received)
    })
    this.events.emit('request', exchange.received)
  }

  #answerChat(exchange: Exchange): void {
    const { req, res, received } = exchange
    const fail = this.options.fail ?? 'none'
    if (fail === 'close_before_headers') return cut(exchange)
    if (!this.#authorized(req)) return sendJson(res, 401, UNAUTHORIZED_BODY)
    if (exchange.jsonError !== null) return sendJson(res, 400, errorBody(exchange.jsonError, 'BadRequestError', 400))
    const requestId = requestIdOf(received)
    res.setHeader('x-request-id', requestId)
    if (fail === 'status500') return sendJson(res, 500, errorBody('stand-in failure', 'InternalServerError', 500))
    // 'hang' answers nothing; the client, or close(), ends the exchange.
    if (fail === 'hang') return
    if (this.options.hold === true) {
      this.#held.push(exchange)
      this.events.emit('held', received)
      return
    }
    this.#answerPlanned(exchange)
  }

  #answerPlanned(exchange: Exchange): void {
    const { res, received } = exchange
    const fail = this.options.fail ?? 'none'
    const requestId = String(res.getHeader('x-request-id'))
    const plan = planAnswer({
      requestId,
      body: received.body,
      configuredTokens: this.options.tokens ?? DEFAULT_TOKENS,
      defaultModel: this.#modelName(),
      nowMs: Date.now(),
    })
    if (plan.stream) return this.#stream(exchange, plan, fail === 'close_mid_stream')
    answerWhole(exchange, plan, fail === 'close_mid_stream')
  }

  /** Writes the frames, waiting interTokenDelayMs before each content chunk; stops when the response closes. */
  #stream(exchange: Exchange, plan: AnswerPlan, cutMidStream: boolean): void {
    const { res } = exchange
    const frames = streamFrames(plan)
    // frames[0] is the role chunk and frames[i + 1] token i: cut after the
    // second content chunk, or after the last one when there are fewer.
    const cutAfter = cutMidStream ? Math.min(2, plan.tokens.length) : null
    let next = 0
    let timer: NodeJS.Timeout | undefined
    res.on('close', () => clearTimeout(timer))
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const step = (): void => {
      const frame = frames[next]
      if (res.destroyed) return
      if (frame === undefined) return void res.end()
      const cutHere = next === cutAfter
      next += 1
      res.write(frame.text, cutHere ? () => cut(exchange) : undefined)
      if (frame.contentIndex !== null) this.events.emit('chunk', frame.contentIndex)
      if (cutHere) return
      if (isContent(frames[next])) timer = setTimeout(step, this.options.interTokenDelayMs ?? 0)
      else step()
    }
    step()
  }

  #authorized(req: IncomingMessage): boolean {
    const key = this.options.apiKey
    return key === undefined || req.headers.authorization === `Bearer ${key}`
  }

  #modelName(): string {
    return this.options.modelName ?? DEFAULT_MODEL
  }
}

/** Non-streaming answer; when cutting, the headers promise the whole body and only half arrives. */
function answerWhole(exchange: Exchange, plan: AnswerPlan, cutHalfway: boolean): void {
  if (!cutHalfway) return sendJson(exchange.res, 200, completionBody(plan))
  const text = Buffer.from(JSON.stringify(completionBody(plan)))
  exchange.res.writeHead(200, { 'content-type': 'application/json', 'content-length': text.length })
  exchange.res.write(text.subarray(0, Math.floor(text.length / 2)), () => cut(exchange))
}

function isContent(frame: SseFrame | undefined): boolean {
  return frame !== undefined && frame.contentIndex !== null
}

function cut(exchange: Exchange): void {
  exchange.selfDestroyed = true
  exchange.req.socket.destroy()
}

/** The `x-request-id` header, else the body's `request_id`, else a fresh UUID. */
function requestIdOf(received: ReceivedRequest): string {
  const header = received.headers['x-request-id']
  const fromHeader = Array.isArray(header) ? header[0] : header
  if (fromHeader !== undefined && fromHeader !== '') return fromHeader
  const body = received.body
  if (body !== null && typeof body === 'object' && 'request_id' in body && typeof body.request_id === 'string') {
    return body.request_id
  }
  return randomUUID()
}

type Parsed = { ok: true; value: unknown } | { ok: false; message: string }

function parseJson(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch (error) {
    return { ok: false, message: `invalid JSON body: ${error instanceof Error ? error.message : String(error)}` }
  }
}
