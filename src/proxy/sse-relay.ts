/**
 * Passes an upstream Server-Sent Events body to the client chunk by chunk as
 * it arrives: nothing is buffered beyond the chunk in hand, and the client's
 * pace is respected (the stream is pulled, not pushed). When the upstream
 * fails after the stream started, the client gets a last
 * `data: {"error": ...}` event and `data: [DONE]`, so its SSE parser ends
 * cleanly instead of hanging on a half-open response.
 */
import { Readable } from 'node:stream'
import type { ErrorBody } from '../errors/gateway-error.js'

export interface SseRelayHooks {
  /** Called once with the error that ended the upstream body early. Returns the error event's body. */
  readonly onUpstreamError: (error: unknown) => ErrorBody
  /** True when the failure is the client going away: nothing more is written then. */
  readonly clientGone: () => boolean
}

const EVENT_END = Buffer.from('\n\n')

export function relaySse(upstream: AsyncIterable<Buffer>, hooks: SseRelayHooks): Readable {
  async function* relay(): AsyncGenerator<Buffer> {
    let last: Buffer = EVENT_END
    try {
      for await (const chunk of upstream) {
        if (chunk.length > 0) last = chunk
        yield chunk
      }
    } catch (error) {
      if (hooks.clientGone()) return
      const body = hooks.onUpstreamError(error)
      // If the upstream died inside an event, finish that event first so the
      // error event is parsed on its own.
      const separator = endsWithEventEnd(last) ? '' : '\n\n'
      yield Buffer.from(`${separator}data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`)
    }
  }
  return Readable.from(relay(), { objectMode: false })
}

function endsWithEventEnd(chunk: Buffer): boolean {
  const tail = chunk.subarray(-2).toString('latin1')
  return tail === '\n\n' || chunk.subarray(-4).toString('latin1') === '\r\n\r\n'
}
