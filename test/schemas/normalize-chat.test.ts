import { describe, it, expect } from 'vitest'
import type { ChatCompletionBody } from '../../src/schemas/chat.js'
import { injectedStreamOptions, normalizedMembers } from '../../src/schemas/normalize-chat.js'

const USER = [{ role: 'user', content: 'hi' }]

function body(fields: Record<string, unknown> = {}): ChatCompletionBody {
  return { model: 'public', messages: USER, ...fields } as ChatCompletionBody
}

/** The body a backend is meant to get: the client's, with the normalized members set. */
function normalizeChat(client: ChatCompletionBody, servedName: string, requestId: string): ChatCompletionBody {
  return { ...client, ...normalizedMembers(client, servedName, requestId) } as ChatCompletionBody
}

describe('normalizedMembers', () => {
  // Regression (noticed in an audit): the whole body was copied twice, ~0.4 s for 131,000 top-level names.
  it('builds only the members it sets, never a copy of the body', () => {
    const many = body(Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`x${i}`, i])))
    expect(Object.keys(normalizedMembers(many, 'served', 'r')).sort()).toEqual(['model', 'request_id'])
    expect(Object.keys(normalizedMembers(body({ max_tokens: 3, tools: [{ type: 'function', function: { name: 'f' } }] }), 's', 'r')).sort()).toEqual(['max_completion_tokens', 'model', 'request_id', 'tool_choice'])
  })
})

describe('the body with the normalized members set', () => {
  it('sets the served model name and the request id', () => {
    expect(normalizeChat(body(), 'org/served', 'rid-1')).toEqual({ model: 'org/served', messages: USER, request_id: 'rid-1' })
  })

  it('sets the model when the client sent none or null', () => {
    expect(normalizeChat({ messages: USER } as ChatCompletionBody, 'served', 'r').model).toBe('served')
    expect(normalizeChat(body({ model: null }), 'served', 'r').model).toBe('served')
  })

  it("replaces the body's own request_id with the chosen one", () => {
    expect(normalizeChat(body({ request_id: 'client' }), 'served', 'chosen').request_id).toBe('chosen')
  })

  it('copies a lone max_tokens to max_completion_tokens and keeps max_tokens', () => {
    const out = normalizeChat(body({ max_tokens: 7 }), 'served', 'r')
    expect(out.max_tokens).toBe(7)
    expect(out.max_completion_tokens).toBe(7)
  })

  it('copies max_tokens over a null max_completion_tokens', () => {
    expect(normalizeChat(body({ max_tokens: 7, max_completion_tokens: null }), 'served', 'r').max_completion_tokens).toBe(7)
  })

  it('leaves max_completion_tokens alone when the client set it', () => {
    const out = normalizeChat(body({ max_tokens: 7, max_completion_tokens: 3 }), 'served', 'r')
    expect(out.max_tokens).toBe(7)
    expect(out.max_completion_tokens).toBe(3)
  })

  it('adds no max_completion_tokens when max_tokens is absent or null', () => {
    expect(normalizeChat(body(), 'served', 'r')).not.toHaveProperty('max_completion_tokens')
    const out = normalizeChat(body({ max_tokens: null }), 'served', 'r')
    expect(out).not.toHaveProperty('max_completion_tokens')
    expect(out.max_tokens).toBeNull()
  })

  it("writes out the interface's tool_choice default, none, when tools are given without one", () => {
    const tools = [{ type: 'function', function: { name: 'f' } }]
    expect(normalizeChat(body({ tools }), 'served', 'r').tool_choice).toBe('none')
    expect(normalizeChat(body({ tools, tool_choice: 'none' }), 'served', 'r').tool_choice).toBe('none')
    // No tools (absent, null or empty): vLLM's own default is already none, and nothing is added.
    for (const without of [{}, { tools: null }, { tools: [] }]) expect(normalizeChat(body(without), 'served', 'r')).not.toHaveProperty('tool_choice')
  })

  it('passes every other field, known or unknown, untouched', () => {
    const fields = {
      temperature: 0.2,
      stop: ['END'],
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'none',
      foo_ext: { a: 1, nested: [1, 'two', null] },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }], extra: true }],
    }
    const out = normalizeChat(body(fields), 'served', 'r')
    expect(out).toEqual({ ...fields, model: 'served', request_id: 'r' })
    expect(out.foo_ext).toBe(fields.foo_ext)
  })

  it('does not modify its input', () => {
    const input = body({ max_tokens: 5, request_id: 'client' })
    const snapshot = structuredClone(input)
    normalizeChat(input, 'served', 'r')
    expect(input).toEqual(snapshot)
  })
})

describe('injectedStreamOptions', () => {
  it('asks a stream for usage when the client did not', () => {
    expect(injectedStreamOptions(body({ stream: true }))).toEqual({ include_usage: true, continuous_usage_stats: false })
  })

  it('turns continuous usage off when it adds include_usage (it had no effect for the client), keeping the rest', () => {
    expect(injectedStreamOptions(body({ stream: true, stream_options: { include_usage: false, continuous_usage_stats: true, other: 1 } }))).toEqual({ include_usage: true, continuous_usage_stats: false, other: 1 })
  })

  // vLLM's StreamOptions (since March 2026) and OpenAI: include_usage defaults to false, so `{}` did not ask.
  it('asks on behalf of a stream_options without include_usage true: {} and continuous usage alone no longer ask a current vLLM', () => {
    expect(injectedStreamOptions(body({ stream: true, stream_options: {} }))).toEqual({ include_usage: true, continuous_usage_stats: false })
    expect(injectedStreamOptions(body({ stream: true, stream_options: { continuous_usage_stats: true } }))).toEqual({ include_usage: true, continuous_usage_stats: false })
  })

  it('leaves a stream that asked for usage with include_usage true, and any non-stream, alone', () => {
    expect(injectedStreamOptions(body({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }))).toBeNull()
    expect(injectedStreamOptions(body({ stream: true, stream_options: { include_usage: true } }))).toBeNull()
    expect(injectedStreamOptions(body({ stream: false }))).toBeNull()
    expect(injectedStreamOptions(body())).toBeNull()
  })
})
