/**
 * Rules of the chat request that span several fields or depend on the
 * configured model: the interface's own (priority, continue_final_message)
 * and vLLM's cross-field checks (DESIGN.md "Errors"). Pure: returns the first
 * broken rule, or null.
 */
import type { ChatCompletionBody } from './chat.js'

export interface RuleViolation {
  readonly param: string
  readonly message: string
  /** A required member missing, or present with a value this message may not have, rather than two members in conflict. */
  readonly kind?: 'missing' | 'invalid'
}

export interface ModelFacts {
  readonly name: string
  readonly priority_scheduling: boolean
}

type Rule = (body: ChatCompletionBody, model: ModelFacts) => RuleViolation | null

const rules: readonly Rule[] = [
  function messageContent(body) {
    // Every message needs content, except an assistant message carrying a call: tool_calls, or the
    // legacy function_call (the `function` message variant answers it; OpenAI clients echo the call back with null content).
    const index = body.messages.findIndex((m) => {
      if (m.content !== undefined && m.content !== null) return false
      const { tool_calls: toolCalls, function_call: functionCall } = m as Record<string, unknown>
      const carriesCall = (Array.isArray(toolCalls) && toolCalls.length > 0) || (typeof functionCall === 'object' && functionCall !== null && !Array.isArray(functionCall))
      return !(m.role === 'assistant' && carriesCall)
    })
    if (index < 0) return null
    const param = `messages.${index}.content`
    if (body.messages[index]!.content === null) return { param, message: 'may not be null (it may be null or omitted only on an assistant message with tool_calls or function_call)', kind: 'invalid' }
    return { param, message: 'is required (it may be omitted only on an assistant message with tool_calls or function_call)', kind: 'missing' }
  },
  function priorityNeedsScheduling(body, model) {
    if (body.priority === undefined || body.priority === 0 || model.priority_scheduling) return null
    return { param: 'priority', message: `must be 0: model "${model.name}" does not use priority scheduling` }
  },
  function continueFinalMessage(body) {
    if (body.continue_final_message !== true || body.add_generation_prompt === false) return null
    return {
      param: 'continue_final_message',
      message: 'cannot be true while add_generation_prompt is true (its default); set add_generation_prompt to false',
    }
  },
  function streamOptionsNeedStream(body) {
    if (body.stream_options === undefined || body.stream === true) return null
    return { param: 'stream_options', message: 'is only allowed when stream is true' }
  },
  // vLLM's check_logprobs: −1 ("all") asks for logprobs as much as a positive count does; 0 asks for none.
  function topLogprobsNeedLogprobs(body) {
    if (!asksForLogprobs(body.top_logprobs) || body.logprobs === true) return null
    return { param: 'top_logprobs', message: 'other than 0 needs logprobs set to true' }
  },
  function promptLogprobsNotStreamed(body) {
    if (!asksForLogprobs(body.prompt_logprobs) || body.stream !== true) return null
    return { param: 'prompt_logprobs', message: 'other than 0 is not available when stream is true' }
  },
  function cacheSaltNotEmpty(body) {
    if (body.cache_salt !== '') return null
    return { param: 'cache_salt', message: 'must be a non-empty string when given', kind: 'invalid' }
  },
]

function asksForLogprobs(count: number | null | undefined): boolean {
  return count !== undefined && count !== null && count !== 0
}

export function findRuleViolation(body: ChatCompletionBody, model: ModelFacts): RuleViolation | null {
  for (const rule of rules) {
    const violation = rule(body, model)
    if (violation) return violation
  }
  return null
}
