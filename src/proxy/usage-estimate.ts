/**
 * The usage charged for an answer that did not report one: a stream cut off
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

/**
 * The same for a whole completion without `usage` (a backend that leaves it
 * out): it was charged nothing, where a stream from the same backend was
 * estimated (a limits review). A completion token per 4 characters of what
 * the choices generated (content, reasoning, tool call arguments).
 */
export function estimatedCompletionUsage(messages: ChatCompletionBody['messages'], choices: readonly unknown[]): TokenUsage {
  return { prompt: Math.ceil(promptCharacters(messages) / 4), completion: Math.ceil(generatedCharacters(choices) / 4) }
}

function generatedCharacters(choices: readonly unknown[]): number {
  let characters = 0
  for (const choice of choices) {
    const message = (choice as { message?: unknown } | null)?.message
    if (typeof message !== 'object' || message === null) continue
    // Newer vLLM names the reasoning `reasoning`, older `reasoning_content`; one or the other.
    const { content, reasoning, reasoning_content: legacyReasoning, tool_calls: calls } = message as { content?: unknown; reasoning?: unknown; reasoning_content?: unknown; tool_calls?: unknown }
    if (typeof content === 'string') characters += content.length
    if (typeof reasoning === 'string') characters += reasoning.length
    else if (typeof legacyReasoning === 'string') characters += legacyReasoning.length
    if (Array.isArray(calls)) for (const call of calls) characters += argumentsOf(call).length
  }
  return characters
}

function argumentsOf(call: unknown): string {
  const args = (call as { function?: { arguments?: unknown } } | null)?.function?.arguments
  return typeof args === 'string' ? args : ''
}

/** Characters of text in the messages: string contents, string parts and the `text` of text parts. */
export function promptCharacters(messages: ChatCompletionBody['messages']): number {
  let characters = 0
  for (const { content } of messages) {
    if (typeof content === 'string') characters += content.length
    else if (Array.isArray(content)) for (const part of content) characters += textOf(part).length
  }
  return characters
}

function textOf(part: string | object): string {
  if (typeof part === 'string') return part
  const { type, text } = part as { type?: unknown; text?: unknown }
  return type === 'text' && typeof text === 'string' ? text : ''
}
