import { describe, it, expect } from 'vitest'
import type { ChatCompletionBody } from '../../src/schemas/chat.js'
import { normalizeChat, withStreamUsage } from '../../src/schemas/normalize-chat.js'

const USER = [{ role: 'user', content: 'hi' }]

function body(fields: Record<string, unknown> = {}): ChatCompletionBody {
  return { model: 'public', messages: USER, ...fields } as ChatCompletionBody
}

describe('normalizeChat', () => {
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

describe('withStreamUsage', () => {
  it('asks a stream for usage when the client did not, and says so', () => {
    const { body: out, injected } = withStreamUsage(body({ stream: true }))
    expect(injected).toBe(true)
    expect(out.stream_options).toEqual({ include_usage: true, continuous_usage_stats: false })
  })

  it('turns continuous usage off when it adds include_usage (it had no effect for the client)', () => {
    const { body: out, injected } = withStreamUsage(body({ stream: true, stream_options: { continuous_usage_stats: true } }))
    expect(injected).toBe(true)
    expect(out.stream_options).toEqual({ include_usage: true, continuous_usage_stats: false })
  })

  it('leaves a stream that asked for usage, and any non-stream, unchanged', () => {
    const asked = body({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } })
    expect(withStreamUsage(asked)).toEqual({ body: asked, injected: false })
    const whole = body({ stream: false })
    expect(withStreamUsage(whole)).toEqual({ body: whole, injected: false })
  })
})
