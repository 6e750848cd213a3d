/**
 * The chat request's rules restated from DESIGN.md ("Errors", "Chat path")
 * and README.md, for property tests: whether a chat body must be forwarded,
 * and the body a backend must then receive.
 */
import { ChatCompletionRequest } from '../../src/schemas/chat.js'
import { combine, either, invalid, isRecord, schemaOracle, valid, type Verdict } from './request-oracle.js'

export interface ChatModel {
  readonly servedName: string
  readonly priorityScheduling: boolean
}

export interface ChatSetup {
  readonly models: Readonly<Record<string, ChatModel>>
  readonly defaultModel: string
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const chatSchema = schemaOracle(ChatCompletionRequest)


/** The verdict on a parsed chat body, with the X-Request-Id header (undefined when not sent). */
export function chatVerdict(body: unknown, header: string | undefined, setup: ChatSetup): Verdict {
  const schema = chatSchema.check(body)
  if (schema.kind === 'invalid') return schema
  const b = body as Record<string, unknown>
  const name = typeof b.model === 'string' ? b.model : setup.defaultModel
  const model = Object.hasOwn(setup.models, name) ? setup.models[name] : undefined
  if (model === undefined) return invalid(`unknown model ${name}`)
  const content = contentVerdict(b.messages as Record<string, unknown>[])
  if (content.kind === 'invalid') return content
  const rule = ruleBroken(b, model)
  if (rule !== null) return invalid(rule)
  const cautions: Verdict[] = [schema, content]
  if (header !== undefined && header !== '') {
    if (!REQUEST_ID.test(header)) return invalid('X-Request-Id header outside the alphabet')
    // The header wins; whether an unused, malformed body request_id is refused is not stated.
    if (typeof b.request_id === 'string' && !REQUEST_ID.test(b.request_id)) cautions.push(either('unused malformed body request_id'))
  } else if (typeof b.request_id === 'string' && !REQUEST_ID.test(b.request_id)) {
    return invalid('request_id outside the alphabet')
  }
  return combine(...cautions)
}

const lacksContent = (message: Record<string, unknown>) => message.content === undefined || message.content === null
const mayLackContent = (message: Record<string, unknown>) => message.role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0

/** A message needs content unless it is an assistant message with tool_calls (README). */
function contentVerdict(messages: readonly Record<string, unknown>[]): Verdict {
  return messages.filter(lacksContent).every(mayLackContent) ? valid : invalid('a message without content')
}

function ruleBroken(b: Record<string, unknown>, model: ChatModel): string | null {
  if (b.priority !== undefined && b.priority !== 0 && !model.priorityScheduling) return 'priority without priority scheduling'
  if (b.continue_final_message === true && b.add_generation_prompt !== false) return 'continue_final_message with add_generation_prompt'
  if (b.stream_options !== undefined && b.stream_options !== null && b.stream !== true) return 'stream_options without stream'
  if (typeof b.top_logprobs === 'number' && b.top_logprobs !== 0 && b.logprobs !== true) return 'top_logprobs without logprobs'
  if (typeof b.prompt_logprobs === 'number' && b.prompt_logprobs !== 0 && b.stream === true) return 'prompt_logprobs with stream'
  if (b.cache_salt === '') return 'empty cache_salt'
  return null
}

/** The request id a forwarded request must carry, or null when the gateway makes one up. */
export function expectedRequestId(body: Record<string, unknown>, header: string | undefined): string | null {
  if (header !== undefined && header !== '') return header
  return typeof body.request_id === 'string' ? body.request_id : null
}

/**
 * What the backend must receive (DESIGN.md chat path step 1, README step 3
 * and 7): served model name, explicit request id, `max_tokens` mirrored to
 * `max_completion_tokens`, `tool_choice` "none" written out beside `tools`,
 * usage asked for on streams; all else untouched.
 * JSON has no -0 or Infinity, so the comparison is after a JSON round trip.
 */
export function expectedChatUpstream(body: Record<string, unknown>, setup: ChatSetup, requestId: string): unknown {
  const name = typeof body.model === 'string' ? body.model : setup.defaultModel
  const out: Record<string, unknown> = { ...body, model: setup.models[name]!.servedName, request_id: requestId }
  const present = (value: unknown) => value !== undefined && value !== null
  if (present(body.max_tokens) && !present(body.max_completion_tokens)) out.max_completion_tokens = body.max_tokens
  // interface.md: tool_choice defaults to "none" (vLLM's own default with tools is "auto").
  if (!Object.hasOwn(body, 'tool_choice') && Array.isArray(body.tools) && body.tools.length > 0) out.tool_choice = 'none'
  // vLLM since March 2026, and OpenAI: only include_usage true asks for usage.
  const asked = isRecord(body.stream_options) && body.stream_options.include_usage === true
  if (body.stream === true && !asked) out.stream_options = { ...(isRecord(body.stream_options) ? body.stream_options : {}), include_usage: true, continuous_usage_stats: false }
  return JSON.parse(JSON.stringify(out)) as unknown
}
