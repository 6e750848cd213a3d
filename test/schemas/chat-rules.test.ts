import { describe, it, expect } from 'vitest'
import type { ChatCompletionBody } from '../../src/schemas/chat.js'
import { findRuleViolation, type ModelFacts } from '../../src/schemas/chat-rules.js'

const PLAIN: ModelFacts = { name: 'plain', priority_scheduling: false }
const SCHEDULED: ModelFacts = { name: 'scheduled', priority_scheduling: true }
const USER = { role: 'user', content: 'hi' }
const TOOL_CALL = { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }

function body(fields: Record<string, unknown> = {}): ChatCompletionBody {
  return { messages: [USER], ...fields } as ChatCompletionBody
}

function paramOf(fields: Record<string, unknown>, model: ModelFacts = PLAIN): string | null {
  return findRuleViolation(body(fields), model)?.param ?? null
}

describe('findRuleViolation', () => {
  it('accepts a plain request', () => {
    expect(findRuleViolation(body(), PLAIN)).toBeNull()
  })

  describe('message content', () => {
    it.each([
      ['missing on a user message', [{ role: 'user' }], 'messages.0.content'],
      ['missing on the third message', [USER, { role: 'assistant', content: 'a' }, { role: 'user' }], 'messages.2.content'],
      ['missing on an assistant message without tool_calls', [USER, { role: 'assistant' }], 'messages.1.content'],
      ['missing on an assistant message with empty tool_calls', [USER, { role: 'assistant', tool_calls: [] }], 'messages.1.content'],
      ['missing on an assistant message whose tool_calls is not a list', [USER, { role: 'assistant', tool_calls: {} }], 'messages.1.content'],
      ['missing on a user message with tool_calls', [{ role: 'user', tool_calls: [TOOL_CALL] }], 'messages.0.content'],
      ['missing on an assistant message whose function_call is not an object', [USER, { role: 'assistant', function_call: 'f' }], 'messages.1.content'],
      ['missing on a user message with function_call', [{ role: 'user', function_call: { name: 'f', arguments: '{}' } }], 'messages.0.content'],
      ['missing on a tool message', [USER, { role: 'tool', tool_call_id: 'c1' }], 'messages.1.content'],
    ])('is required when %s', (_name, messages, param) => {
      const violation = findRuleViolation(body({ messages }), PLAIN)
      expect(violation).toMatchObject({ param, kind: 'missing' })
      expect(violation?.message).toMatch(/required/)
    })

    it.each([
      ['a user message', [{ role: 'user', content: null }], 'messages.0.content'],
      ['an assistant message without tool_calls', [USER, { role: 'assistant', content: null }], 'messages.1.content'],
    ])('may not be null on %s: an invalid value, not a missing one', (_name, messages, param) => {
      const violation = findRuleViolation(body({ messages }), PLAIN)
      expect(violation).toMatchObject({ param, kind: 'invalid' })
      expect(violation?.message).toMatch(/may not be null/)
    })

    it.each([
      ['missing', { role: 'assistant', tool_calls: [TOOL_CALL] }],
      ['null', { role: 'assistant', content: null, tool_calls: [TOOL_CALL] }],
      // Session 23 review: the legacy function-calling turn, echoed back by OpenAI clients, was refused.
      ['null, with the legacy function_call', { role: 'assistant', content: null, function_call: { name: 'f', arguments: '{}' } }],
      ['missing, with the legacy function_call', { role: 'assistant', function_call: { name: 'f', arguments: '{}' } }],
    ])('may be %s on an assistant message carrying a call', (_name, message) => {
      expect(findRuleViolation(body({ messages: [USER, message] }), PLAIN)).toBeNull()
    })

    it.each([
      ['an empty string', ''],
      ['a content-part list', [{ type: 'text', text: 'x' }]],
    ])('accepts %s', (_name, content) => {
      expect(findRuleViolation(body({ messages: [{ role: 'user', content }] }), PLAIN)).toBeNull()
    })
  })

  describe('priority', () => {
    it.each([1, -1, 100])('refuses priority %d on a model without priority scheduling, naming the model', (priority) => {
      const violation = findRuleViolation(body({ priority }), PLAIN)
      expect(violation?.param).toBe('priority')
      expect(violation?.message).toContain('"plain"')
    })

    it('accepts priority 0 or none on a model without priority scheduling', () => {
      expect(paramOf({ priority: 0 })).toBeNull()
      expect(paramOf({})).toBeNull()
    })

    it.each([-5, 0, 7])('accepts priority %d on a model with priority scheduling', (priority) => {
      expect(paramOf({ priority }, SCHEDULED)).toBeNull()
    })
  })

  describe('continue_final_message', () => {
    it('refuses it with add_generation_prompt left at its default (true)', () => {
      const violation = findRuleViolation(body({ continue_final_message: true }), PLAIN)
      expect(violation?.param).toBe('continue_final_message')
      expect(violation?.message).toContain('add_generation_prompt')
    })

    it('refuses it with add_generation_prompt true', () => {
      expect(paramOf({ continue_final_message: true, add_generation_prompt: true })).toBe('continue_final_message')
    })

    it('accepts it with add_generation_prompt false', () => {
      expect(paramOf({ continue_final_message: true, add_generation_prompt: false })).toBeNull()
    })

    it('accepts continue_final_message false with add_generation_prompt at any value', () => {
      expect(paramOf({ continue_final_message: false })).toBeNull()
      expect(paramOf({ continue_final_message: false, add_generation_prompt: true })).toBeNull()
    })
  })

  describe('stream_options', () => {
    it.each([
      ['stream absent', {}],
      ['stream false', { stream: false }],
      ['stream null', { stream: null }],
    ])('is refused with %s', (_name, fields) => {
      expect(paramOf({ ...fields, stream_options: { include_usage: true } })).toBe('stream_options')
    })

    it('is refused even when empty', () => {
      expect(paramOf({ stream_options: {} })).toBe('stream_options')
    })

    it('is accepted with stream true', () => {
      expect(paramOf({ stream: true, stream_options: { include_usage: true } })).toBeNull()
    })
  })

  describe('top_logprobs', () => {
    it.each([
      ['logprobs absent', {}],
      ['logprobs false', { logprobs: false }],
      ['logprobs null', { logprobs: null }],
    ])('greater than 0, or -1 (all), is refused with %s', (_name, fields) => {
      expect(paramOf({ ...fields, top_logprobs: 2 })).toBe('top_logprobs')
      expect(paramOf({ ...fields, top_logprobs: -1 })).toBe('top_logprobs')
    })

    it('greater than 0 is accepted with logprobs true', () => {
      expect(paramOf({ top_logprobs: 2, logprobs: true })).toBeNull()
    })

    it('0 or null needs no logprobs', () => {
      expect(paramOf({ top_logprobs: 0 })).toBeNull()
      expect(paramOf({ top_logprobs: null })).toBeNull()
    })
  })

  describe('prompt_logprobs', () => {
    it('greater than 0, or -1 (all), is refused with stream true', () => {
      expect(paramOf({ prompt_logprobs: 1, stream: true })).toBe('prompt_logprobs')
      expect(paramOf({ prompt_logprobs: -1, stream: true })).toBe('prompt_logprobs')
    })

    it('0 asks for none, so vLLM accepts it with stream true', () => {
      expect(paramOf({ prompt_logprobs: 0, stream: true })).toBeNull()
    })

    it('is accepted without stream, and null is accepted with stream', () => {
      expect(paramOf({ prompt_logprobs: 1 })).toBeNull()
      expect(paramOf({ prompt_logprobs: 1, stream: false })).toBeNull()
      expect(paramOf({ prompt_logprobs: null, stream: true })).toBeNull()
    })
  })

  describe('cache_salt', () => {
    it('an empty string is refused as an invalid value, not a conflict', () => {
      expect(findRuleViolation(body({ cache_salt: '' }), PLAIN)).toMatchObject({ param: 'cache_salt', kind: 'invalid' })
    })

    it('a non-empty string or null is accepted', () => {
      expect(paramOf({ cache_salt: 's' })).toBeNull()
      expect(paramOf({ cache_salt: null })).toBeNull()
    })
  })

  it('returns a single violation when several rules are broken', () => {
    const violation = findRuleViolation(body({ priority: 1, cache_salt: '', top_logprobs: 3 }), PLAIN)
    expect(violation).not.toBeNull()
    expect(['priority', 'cache_salt', 'top_logprobs']).toContain(violation?.param)
    expect(violation?.message.length).toBeGreaterThan(0)
  })
})
