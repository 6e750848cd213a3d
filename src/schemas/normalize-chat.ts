/**
 * The body a backend receives for a valid chat request (DESIGN.md chat path
 * step 1): the public model name becomes the served name, the request id is
 * made explicit, a lone `max_tokens` is mirrored to
 * `max_completion_tokens` for newer backends (and kept for older ones), and
 * the interface's `tool_choice` default is written out when `tools` are
 * given. Everything else, including unknown extension fields, is passed
 * untouched.
 */
import type { ChatCompletionBody } from './chat.js'

export function normalizeChat(body: ChatCompletionBody, servedName: string, requestId: string): ChatCompletionBody {
  // Object.assign then set, not `{ ...body, model }`: the spread-and-override
  // form takes V8's slow path and cost ~2 µs per request in the bench profile.
  const upstream: ChatCompletionBody = Object.assign({}, body)
  upstream.model = servedName
  upstream.request_id = requestId
  const hasMaxTokens = body.max_tokens !== undefined && body.max_tokens !== null
  const hasMaxCompletion = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null
  if (hasMaxTokens && !hasMaxCompletion) upstream.max_completion_tokens = body.max_tokens
  // The interface's default is "none"; vLLM's, once tools are given, is "auto",
  // which a server without --enable-auto-tool-choice answers with a 400 (and
  // one with it may call tools the contract does not allow).
  if (body.tool_choice === undefined && Array.isArray(body.tools) && body.tools.length > 0) upstream.tool_choice = 'none'
  return upstream
}

/**
 * A stream's token usage comes only in a final chunk the client must ask
 * for. When it did not, the gateway asks on its behalf (for metrics and
 * token limits) and reports `injected`, so that chunk can be removed again.
 */
export function withStreamUsage(body: ChatCompletionBody): { body: ChatCompletionBody; injected: boolean } {
  if (body.stream !== true || body.stream_options?.include_usage === true) return { body, injected: false }
  // continuous_usage_stats has no effect without include_usage; once the
  // gateway sets include_usage it would put usage on every chunk, so it is
  // turned off to keep the client's stream as it would have been.
  const stream_options = { ...(body.stream_options ?? {}), include_usage: true, continuous_usage_stats: false }
  const upstream: ChatCompletionBody = Object.assign({}, body)
  upstream.stream_options = stream_options
  return { body: upstream, injected: true }
}
