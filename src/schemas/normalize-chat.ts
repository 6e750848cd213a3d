/**
 * What a backend receives for a valid chat request that differs from the
 * client's body (DESIGN.md chat path step 1): the public model name becomes
 * the served name, the request id is made explicit, a lone `max_tokens` is
 * mirrored to `max_completion_tokens` for newer backends (and kept for older
 * ones), and the interface's `tool_choice` default is written out when
 * `tools` are given. Everything else, including unknown extension fields, is
 * passed untouched.
 *
 * Only the members that change are built, never a copy of the body: a body
 * of 131,000 top-level names (within every limit) was copied twice here and
 * then compared member by member, ~0.4 s of one request holding the loop.
 * proxy/chat-upstream-body.ts writes them into the client's bytes.
 */
import type { ChatCompletionBody } from './chat.js'

/** Top-level members to set on the client's body, by name. */
export type ChatMembers = Partial<Record<keyof ChatCompletionBody, unknown>>

export function normalizedMembers(body: ChatCompletionBody, servedName: string, requestId: string): ChatMembers {
  const members: ChatMembers = { model: servedName, request_id: requestId }
  const hasMaxTokens = body.max_tokens !== undefined && body.max_tokens !== null
  const hasMaxCompletion = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null
  if (hasMaxTokens && !hasMaxCompletion) members.max_completion_tokens = body.max_tokens
  // The interface's default is "none"; vLLM's, once tools are given, is "auto",
  // which a server without --enable-auto-tool-choice answers with a 400 (and
  // one with it may call tools the contract does not allow).
  if (body.tool_choice === undefined && Array.isArray(body.tools) && body.tools.length > 0) members.tool_choice = 'none'
  return members
}

/**
 * A stream's token usage comes only in a final chunk the client must ask
 * for. When it did not, the gateway asks on its behalf (for metrics and
 * token limits): the `stream_options` to send, or null when the body needs
 * none; the usage chunk it brings is removed again on the way back.
 * Only `include_usage: true` asks. vLLM's default for a `stream_options`
 * without it was true until March 2026 and is false since (as OpenAI's):
 * `{}` reached a current backend as "no usage", and the stream was charged
 * an estimate. Written out, it means the same to every backend.
 */
export function injectedStreamOptions(body: ChatCompletionBody): Record<string, unknown> | null {
  if (body.stream !== true) return null
  if (body.stream_options?.include_usage === true) return null
  // continuous_usage_stats has no effect without include_usage; once the
  // gateway sets include_usage it would put usage on every chunk, so it is
  // turned off to keep the client's stream as it would have been.
  return { ...(body.stream_options ?? {}), include_usage: true, continuous_usage_stats: false }
}
