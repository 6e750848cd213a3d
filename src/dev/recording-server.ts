/**
 * The plumbing the platform stand-ins share: a plain node:http server that
 * reads each body whole, records the request exactly as it arrived (raw URL,
 * raw body bytes) and hands it to the stand-in's router. Exact bytes, because
 * the gateway's tests check what it forwarded, not what it meant to forward.
 */
import { EventEmitter } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { closeForcefully, listenOn } from './server-lifecycle.js'

export interface RecordedRequest {
  method: string
  /** The request target exactly as received: not decoded, not normalised. */
  url: string
  headers: Record<string, string | string[] | undefined>
  rawBody: Buffer
}

/** Answers one recorded request; may leave `res` unanswered to simulate a hang. */
export type RecordedHandler = (request: RecordedRequest, res: ServerResponse) => void

export class RecordingServer {
  readonly received: RecordedRequest[] = []
  /**
   * 'request' (RecordedRequest) on arrival; 'answered' (RecordedRequest) when
   * a response fully ended; 'client-closed' (RecordedRequest) when the client
   * went away before the answer finished.
   */
  readonly events = new EventEmitter()
  readonly #server: Server
  readonly #handle: RecordedHandler
  #url = ''
  #closing: Promise<void> | null = null

  constructor(handle: RecordedHandler) {
    this.#handle = handle
    this.#server = createServer((req, res) => this.#receive(req, res))
  }

  /** http://HOST:PORT, once listening. */
  get url(): string {
    return this.#url
  }

  async listen(host = '127.0.0.1', port = 0): Promise<void> {
    this.#url = await listenOn(this.#server, host, port)
  }

  /** Idempotent, and destroys open sockets so a hanging request never holds a test up. */
  close(): Promise<void> {
    this.#closing ??= closeForcefully(this.#server)
    return this.#closing
  }

  #receive(req: IncomingMessage, res: ServerResponse): void {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    // A client that aborts while uploading emits 'error' and never 'end': nothing was received.
    req.on('error', () => {})
    req.on('end', () => {
      if (req.socket.destroyed) return
      const request: RecordedRequest = {
        method: req.method ?? 'GET',
        url: req.url ?? '/',
        headers: { ...req.headers },
        rawBody: Buffer.concat(parts),
      }
      this.#track(request, res)
      this.#handle(request, res)
    })
  }

  #track(request: RecordedRequest, res: ServerResponse): void {
    this.received.push(request)
    res.on('close', () => {
      if (res.writableFinished) this.events.emit('answered', request)
      else if (this.#closing === null) this.events.emit('client-closed', request)
    })
    this.events.emit('request', request)
  }
}

/** The path and query of a raw request target, split without decoding either. */
export function splitTarget(url: string): { path: string; query: URLSearchParams } {
  const mark = url.indexOf('?')
  if (mark === -1) return { path: url, query: new URLSearchParams() }
  return { path: url.slice(0, mark), query: new URLSearchParams(url.slice(mark + 1)) }
}

export type JsonParse = { ok: true; value: unknown } | { ok: false }

export function parseJsonBody(rawBody: Buffer): JsonParse {
  try {
    return { ok: true, value: JSON.parse(rawBody.toString('utf8')) as unknown }
  } catch {
    return { ok: false }
  }
}

/** A JSON object, as opposed to an array, null or a scalar. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
