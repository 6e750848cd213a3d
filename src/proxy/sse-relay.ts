/**
 * Passes an upstream Server-Sent Events body to the client as it arrives,
 * event by event: whatever complete events a network chunk holds go out at
 * once, nothing waits for the whole answer, and the client's pace is
 * respected (the stream is pulled, not pushed). Each event is looked at for
 * token usage on the way.
 *
 * When the upstream fails after the stream started, an unfinished event is
 * dropped and the client gets `data: {"error": ...}` and `data: [DONE]`, so
 * its SSE parser ends cleanly instead of hanging or choking on half a JSON.
 */
import { Readable } from 'node:stream'
import type { ErrorBody } from '../errors/gateway-error.js'
import { SseEventSplitter } from './sse-events.js'
import { carriesContent, inspectEvent, type TokenUsage } from './stream-usage.js'

export interface SseRelayHooks {
  /** Called once with the error that ended the upstream body early. Returns the error event's body. */
  readonly onUpstreamError: (error: unknown) => ErrorBody
  /** True when the failure is the client going away: nothing more is written then. */
  readonly clientGone: () => boolean
  /** The gateway asked for `include_usage` itself: hide what that adds. */
  readonly stripInjectedUsage: boolean
  /** Called once at the end with the stream's usage, if it reported any. */
  readonly onUsage: (usage: TokenUsage | null) => void
  /** Called once when the first event with generated output is handed to the client. */
  readonly onFirstContent: () => void
}

export function relaySse(upstream: AsyncIterable<Buffer>, hooks: SseRelayHooks): Readable {
  async function* relay(): AsyncGenerator<Buffer> {
    const splitter = new SseEventSplitter()
    let usage: TokenUsage | null = null
    let contentSeen = false
    try {
      for await (const chunk of upstream) {
        const out: Buffer[] = []
        for (const event of splitter.push(chunk)) {
          const verdict = inspectEvent(event, hooks.stripInjectedUsage)
          if (verdict.usage !== null) usage = verdict.usage
          if (verdict.forward === null) continue
          out.push(verdict.forward)
          if (!contentSeen && carriesContent(verdict.forward)) {
            contentSeen = true
            hooks.onFirstContent()
          }
        }
        if (out.length > 0) yield out.length === 1 ? out[0]! : Buffer.concat(out)
      }
      // The backend ended cleanly inside an event: pass its bytes as they are.
      if (splitter.rest().length > 0) yield splitter.rest()
    } catch (error) {
      if (hooks.clientGone()) return
      const body = hooks.onUpstreamError(error)
      yield Buffer.from(`data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`)
    } finally {
      hooks.onUsage(usage)
    }
  }
  return Readable.from(relay(), { objectMode: false })
}
