/**
 * The body a backend receives for a valid chat request (DESIGN.md chat path
 * step 1): the public model name becomes the served name, the request id is
 * made explicit, and a lone `max_tokens` is mirrored to
 * `max_completion_tokens` for newer backends (and kept for older ones).
 * Everything else, including unknown extension fields, is passed untouched.
 */
import type { ChatCompletionBody } from './chat.js'

export function normalizeChat(body: ChatCompletionBody, servedName: string, requestId: string): ChatCompletionBody {
  const upstream: ChatCompletionBody = { ...body, model: servedName, request_id: requestId }
  const hasMaxTokens = body.max_tokens !== undefined && body.max_tokens !== null
  const hasMaxCompletion = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null
  if (hasMaxTokens && !hasMaxCompletion) upstream.max_completion_tokens = body.max_tokens
  return upstream
}
