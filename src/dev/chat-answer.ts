/**
 * What the stand-in answers to one chat completion request, built as plain
 * data (a JSON body, or the list of SSE frames) so the server only has to
 * write it out and pace it. Shapes follow vLLM's OpenAI-compatible server.
 */

export type FinishReason = 'stop' | 'length'

export interface AnswerPlan {
  readonly id: string
  readonly created: number
  readonly model: string
  /** Token texts, each `tok${i} ` with its trailing space, so content is their concatenation. */
  readonly tokens: readonly string[]
  readonly finishReason: FinishReason
  readonly promptTokens: number
  readonly stream: boolean
  readonly includeUsage: boolean
}

export interface PlanInput {
  readonly requestId: string
  /** The parsed request body; anything that is not a JSON object is read as `{}`. */
  readonly body: unknown
  readonly configuredTokens: number
  readonly defaultModel: string
  readonly nowMs: number
}

/** One SSE event; `contentIndex` is the token index for content chunks, else null. */
export interface SseFrame {
  readonly text: string
  readonly contentIndex: number | null
}

export function planAnswer(input: PlanInput): AnswerPlan {
  const body = asRecord(input.body)
  const limit = tokenLimit(body)
  const count = limit !== null && limit < input.configuredTokens ? limit : input.configuredTokens
  return {
    id: `chatcmpl-${input.requestId}`,
    created: Math.floor(input.nowMs / 1000),
    model: typeof body.model === 'string' ? body.model : input.defaultModel,
    tokens: Array.from({ length: count }, (_, i) => `tok${i} `),
    finishReason: count < input.configuredTokens ? 'length' : 'stop',
    promptTokens: promptTokenCount(body.messages),
    stream: body.stream === true,
    includeUsage: asksForUsage(body.stream_options),
  }
}

/** Roughly four characters a token, as tokenizers average on English; never zero. */
export function promptTokenCount(messages: unknown): number {
  if (!Array.isArray(messages)) return 1
  const characters = messages.reduce<number>((sum, message) => sum + contentLength(asRecord(message).content), 0)
  return Math.max(1, Math.ceil(characters / 4))
}

export function completionBody(plan: AnswerPlan): Record<string, unknown> {
  return {
    id: plan.id,
    object: 'chat.completion',
    created: plan.created,
    model: plan.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: plan.tokens.join(''), tool_calls: [] },
        logprobs: null,
        finish_reason: plan.finishReason,
        stop_reason: null,
      },
    ],
    usage: { ...usageOf(plan), prompt_tokens_details: null },
    prompt_logprobs: null,
    kv_transfer_params: null,
  }
}

/** Role chunk, one chunk per token, finish chunk, usage chunk when asked for, `[DONE]`. */
export function streamFrames(plan: AnswerPlan): SseFrame[] {
  const frames: SseFrame[] = [
    chunkFrame(plan, { delta: { role: 'assistant', content: '' }, finish_reason: null }, null),
    ...plan.tokens.map((token, i) => chunkFrame(plan, { delta: { content: token }, finish_reason: null }, i)),
    chunkFrame(plan, { delta: {}, finish_reason: plan.finishReason, stop_reason: null }, null),
  ]
  if (plan.includeUsage) frames.push(sseFrame({ ...chunkHeader(plan), choices: [], usage: usageOf(plan) }, null))
  frames.push({ text: 'data: [DONE]\n\n', contentIndex: null })
  return frames
}

function chunkFrame(plan: AnswerPlan, choice: Record<string, unknown>, contentIndex: number | null): SseFrame {
  const { delta, ...rest } = choice
  const chunk: Record<string, unknown> = {
    ...chunkHeader(plan),
    choices: [{ index: 0, delta, logprobs: null, ...rest }],
  }
  // vLLM sets `usage: null` on every ordinary chunk once include_usage is on.
  if (plan.includeUsage) chunk.usage = null
  return sseFrame(chunk, contentIndex)
}

function chunkHeader(plan: AnswerPlan): Record<string, unknown> {
  return { id: plan.id, object: 'chat.completion.chunk', created: plan.created, model: plan.model }
}

function sseFrame(data: Record<string, unknown>, contentIndex: number | null): SseFrame {
  return { text: `data: ${JSON.stringify(data)}\n\n`, contentIndex }
}

function usageOf(plan: AnswerPlan): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const completion = plan.tokens.length
  return { prompt_tokens: plan.promptTokens, completion_tokens: completion, total_tokens: plan.promptTokens + completion }
}

/** `max_completion_tokens` wins over the older `max_tokens`, as in vLLM; null when neither is usable. */
function tokenLimit(body: Record<string, unknown>): number | null {
  for (const value of [body.max_completion_tokens, body.max_tokens]) {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value
  }
  return null
}

/** A content is a string or a list of parts; only text parts count. */
function contentLength(content: unknown): number {
  if (typeof content === 'string') return content.length
  if (!Array.isArray(content)) return 0
  return content.reduce<number>((sum, part) => {
    const text = asRecord(part).text
    return sum + (typeof text === 'string' ? text.length : 0)
  }, 0)
}

/** vLLM's rule since March 2026 (and OpenAI's): only `include_usage: true` asks for usage. */
function asksForUsage(streamOptions: unknown): boolean {
  if (streamOptions === null || typeof streamOptions !== 'object') return false
  return (streamOptions as Record<string, unknown>).include_usage === true
}

function asRecord(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {}
  return value as Record<string, unknown>
}
