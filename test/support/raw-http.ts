/**
 * HTTP exchanges with exact bytes, for the security tests. Global fetch and
 * undici normalise request targets (dot segments) and headers; node:http
 * keeps the target as written; a raw socket sends anything at all (bare CR,
 * conflicting framing headers, absolute-form targets, no Host).
 */
import { Agent, request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { expect } from 'vitest'

export interface RawResponse {
  readonly status: number
  /** Lower-cased names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  readonly text: string
}

export interface RawExchange {
  /** Every complete response read from the connection, in order. */
  readonly responses: RawResponse[]
  /** Everything the server wrote, as latin1 text (for reports). */
  readonly wire: string
  /** False when the connection was still open at the deadline. */
  readonly closed: boolean
}

/**
 * Writes `bytes` on a fresh TCP connection and reads
 * until the server closes the connection or `timeoutMs` passes (then the
 * socket is destroyed). Bounded: never waits longer than `timeoutMs`.
 */
export function rawExchange(baseUrl: string, bytes: Buffer | string, timeoutMs = 3000): Promise<RawExchange> {
  const url = new URL(baseUrl)
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname)
    const parts: Buffer[] = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      socket.destroy()
    }, timeoutMs)
    socket.on('data', (chunk: Buffer) => parts.push(chunk))
    socket.on('close', () => {
      clearTimeout(timer)
      const all = Buffer.concat(parts)
      resolve({ responses: parseResponses(all), wire: all.toString('latin1'), closed: !timedOut })
    })
    // A reset after the server answered still leaves the answer in `parts`.
    socket.on('error', () => undefined)
    socket.write(bytes)
  })
}

/** Splits a byte stream into HTTP/1.1 responses (Content-Length, chunked, or until close). */
export function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = []
  let offset = 0
  while (offset < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', offset)
    if (headEnd < 0) break
    const lines = data.subarray(offset, headEnd).toString('latin1').split('\r\n')
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN)
    if (Number.isNaN(status)) break
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      if (colon <= 0) continue
      const name = line.slice(0, colon).trim().toLowerCase()
      const value = line.slice(colon + 1).trim()
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
    }
    let bodyStart = headEnd + 4
    let body: Buffer
    if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
      const chunks: Buffer[] = []
      for (;;) {
        const lineEnd = data.indexOf('\r\n', bodyStart)
        if (lineEnd < 0) break
        const size = parseInt(data.subarray(bodyStart, lineEnd).toString('latin1'), 16)
        bodyStart = lineEnd + 2
        if (!Number.isFinite(size) || size === 0) {
          bodyStart = Math.min(data.length, bodyStart + 2)
          break
        }
        chunks.push(data.subarray(bodyStart, bodyStart + size))
        bodyStart += size + 2
      }
      body = Buffer.concat(chunks)
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length'])
      body = data.subarray(bodyStart, bodyStart + length)
      bodyStart += length
    } else {
      body = data.subarray(bodyStart)
      bodyStart = data.length
    }
    responses.push({ status, headers, body, text: body.toString('utf8') })
    offset = bodyStart
  }
  return responses
}

export interface ExactRequest {
  readonly method: string
  /** The request target, sent exactly as written. */
  readonly path: string
  /** Sent as given: node:http adds nothing but Host and framing. */
  readonly headers?: Readonly<Record<string, string | string[]>>
  readonly body?: Buffer | string | null
  readonly timeoutMs?: number
  readonly agent?: Agent
}

/** One request through node:http (exact target, exact headers), bounded by an AbortSignal timeout. */
export function exactRequest(baseUrl: string, options: ExactRequest): Promise<RawResponse> {
  const url = new URL(baseUrl)
  const body = options.body ?? null
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: options.method,
        path: options.path,
        headers: { ...options.headers, ...(body === null ? {} : { 'content-length': String(Buffer.byteLength(body)) }) },
        agent: options.agent ?? false,
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      },
      (res) => {
        const parts: Buffer[] = []
        res.on('data', (part: Buffer) => parts.push(part))
        res.on('error', reject)
        res.on('end', () => {
          const all = Buffer.concat(parts)
          const headers: Record<string, string> = {}
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value
          }
          resolve({ status: res.statusCode ?? 0, headers, body: all, text: all.toString('utf8') })
        })
      },
    )
    req.on('error', reject)
    req.end(body ?? undefined)
  })
}

export interface ErrorFields {
  readonly message: string
  readonly type: string
  readonly param: string | null
  readonly code: string | null
}

/** DESIGN.md's error body: exactly `{error: {message, type, param, code}}`, typed as stated. */
export function expectErrorBody(response: RawResponse): ErrorFields {
  expect(response.headers['content-type'], `content-type of a ${response.status}`).toMatch(/^application\/json/)
  const parsed = JSON.parse(response.text) as { error: ErrorFields }
  expect(Object.keys(parsed)).toEqual(['error'])
  expect(Object.keys(parsed.error).sort()).toEqual(['code', 'message', 'param', 'type'])
  expect(typeof parsed.error.message).toBe('string')
  expect(parsed.error.message.length).toBeGreaterThan(0)
  expect(typeof parsed.error.type).toBe('string')
  expect(parsed.error.param === null || typeof parsed.error.param === 'string').toBe(true)
  expect(parsed.error.code === null || typeof parsed.error.code === 'string').toBe(true)
  return parsed.error
}

/** The error body's shape as a boolean, for property checks that report their own message. */
export function isErrorBody(response: RawResponse): boolean {
  if (!/^application\/json/.test(response.headers['content-type'] ?? '')) return false
  let parsed: unknown
  try {
    parsed = JSON.parse(response.text)
  } catch {
    return false
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return false
  const outer = parsed as Record<string, unknown>
  if (Object.keys(outer).join() !== 'error') return false
  const error = outer.error as Record<string, unknown> | null
  if (error === null || typeof error !== 'object' || Array.isArray(error)) return false
  if (Object.keys(error).sort().join() !== 'code,message,param,type') return false
  return (
    typeof error.message === 'string' &&
    error.message !== '' &&
    typeof error.type === 'string' &&
    (error.param === null || typeof error.param === 'string') &&
    (error.code === null || typeof error.code === 'string')
  )
}
