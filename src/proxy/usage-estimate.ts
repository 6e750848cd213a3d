/**
 * The usage charged for a stream that ended without reporting one: cut off
 * by its client or by a failure before the usage chunk, or from a backend
 * that ignores `include_usage`. Charging nothing would let a client read
 * nearly a whole answer, leave before the usage chunk and spend none of its
 * token budget.
 *
 * With no tokenizer at hand it is an estimate:
 * - a prompt token per 4 characters of the messages' text (string contents
 *   and `text` parts; the usual rule of thumb; the chat template's own
 *   tokens and tool definitions are not counted);
 * - a completion token per data event after the first (vLLM sends a role-only
 *   event first, then one per token by default; several tokens to an event
 *   under `stream_interval` or speculative decoding make it low).
 */
import type { ChatCompletionBody } from '../schemas/chat.js'
import type { TokenUsage } from './stream-usage.js'

export function estimatedStreamUsage(messages: ChatCompletionBody['messages'], events: number): TokenUsage {
  return { prompt: Math.ceil(promptCharacters(messages) / 4), completion: Math.max(0, events - 1) }
}

/** Characters of text in the messages: string contents and the `text` of content parts. */
export function promptCharacters(messages: ChatCompletionBody['messages']): number {
  let characters = 0
  for (const { content } of messages) {
    if (typeof content === 'string') characters += content.length
    else if (Array.isArray(content)) for (const part of content) characters += textOf(part).length
  }
  return characters
}

function textOf(part: object): string {
  const { type, text } = part as { type?: unknown; text?: unknown }
  return type === 'text' && typeof text === 'string' ? text : ''
}
