/**
 * Chat request validation through real HTTP: every rule of interface.md and
 * DESIGN.md "Errors" answers 400 in the error shape naming the field, and no
 * invalid request reaches the backend; valid edge values do reach it, in the
 * normalized form of DESIGN.md "Chat path" step 1.
 */
import { gzipSync } from 'node:zlib'
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { startVllmStandIn, type ReceivedRequest, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'

const key = makeKey('validation', ['chat'])
const SERVED_M = 'org/served-m'
const USER = [{ role: 'user', content: 'hi' }]
const BASE = { model: 'm', messages: USER }
const ERROR_KEYS = ['code', 'message', 'param', 'type']
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

let standIn: VllmStandIn
let gateway: TestGateway

beforeAll(async () => {
  standIn = await startVllmStandIn()
  gateway = await startTestGateway({
    auth: { keys: [key.entry] },
    models: [
      { name: 'm', served_name: SERVED_M, backends: [{ url: standIn.url }] },
      { name: 'prio', priority_scheduling: true, backends: [{ url: standIn.url }] },
    ],
  })
})

afterAll(async () => {
  await gateway?.shutdown()
  await standIn?.close()
})

interface Send {
  /** Sent as is instead of JSON.stringify(body). */
  readonly raw?: string | Uint8Array
  readonly headers?: Record<string, string>
  readonly contentType?: string
  readonly baseUrl?: string
}

function post(body: unknown, send: Send = {}): Promise<Response> {
  return fetch(`${send.baseUrl ?? gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key.token}`,
      'content-type': send.contentType ?? 'application/json',
      ...send.headers,
    },
    body: send.raw ?? JSON.stringify(body),
  })
}

interface ErrorObject {
  message: string
  type: string
  param: string | null
  code: string | null
}

/** Sends, and checks the answer is a `status` error in the DESIGN shape that never reached the backend. */
async function expectRefused(body: unknown, param: string | null, send: Send = {}, status = 400): Promise<ErrorObject> {
  const before = standIn.received.length
  const res = await post(body, send)
  const payload = (await res.json()) as { error: ErrorObject }
  expect(res.status, JSON.stringify(payload)).toBe(status)
  expect(res.headers.get('content-type')).toMatch(/^application\/json/)
  expect(Object.keys(payload)).toEqual(['error'])
  expect(Object.keys(payload.error).sort()).toEqual(ERROR_KEYS)
  expect(payload.error.type).toBe('invalid_request_error')
  expect(payload.error.param).toBe(param)
  expect(typeof payload.error.message).toBe('string')
  expect(payload.error.message.trim()).not.toBe('')
  expect(payload.error.code === null || typeof payload.error.code === 'string').toBe(true)
  expect(standIn.received.length).toBe(before)
  return payload.error
}

/** Sends, checks the answer is 200 and exactly one request reached the backend; returns it. */
async function expectForwarded(body: unknown, send: Send = {}): Promise<{ res: Response; received: ReceivedRequest }> {
  const before = standIn.received.length
  const res = await post(body, send)
  const text = await res.text()
  expect(res.status, text).toBe(200)
  expect(standIn.received.length).toBe(before + 1)
  return { res, received: standIn.received[before]! }
}

function bodyOf(received: ReceivedRequest): Record<string, unknown> {
  expect(received.body).toBeTypeOf('object')
  return received.body as Record<string, unknown>
}

type Case = readonly [name: string, body: Record<string, unknown>, param: string]

const on = (fields: Record<string, unknown>): Record<string, unknown> => ({ ...BASE, ...fields })
const messages = (...list: unknown[]): Record<string, unknown> => ({ model: 'm', messages: list })

/** One wrong value per field of the interface table (and per nested member where it has some). */
const WRONG_TYPES: readonly Case[] = [
  ['messages not an array', on({ messages: 'hi' }), 'messages'],
  ['messages empty', on({ messages: [] }), 'messages'],
  ['messages missing', { model: 'm' }, 'messages'],
  ['a message that is not an object', messages('hi'), 'messages.0'],
  ['a message without role', messages({ content: 'x' }), 'messages.0.role'],
  ['a message with a numeric role', messages({ role: 1, content: 'x' }), 'messages.0.role'],
  ['a message with an empty role', messages({ role: '', content: 'x' }), 'messages.0.role'],
  ['a message with numeric content', messages({ role: 'user', content: 5 }), 'messages.0.content'],
  ['a message with object content', messages({ role: 'user', content: { text: 'x' } }), 'messages.0.content'],
  ['a content part without type', messages({ role: 'user', content: [{ text: 'x' }] }), 'messages.0.content.0.type'],
  ['a numeric content part', messages({ role: 'user', content: ['x', 5] }), 'messages.0.content.1'],
  ['a content part with a numeric type', messages({ role: 'user', content: [{ type: 1, image_url: 'u' }] }), 'messages.0.content.0.type'],
  ['a message with a numeric name', messages({ role: 'user', content: 'x', name: 5 }), 'messages.0.name'],
  ['the second message broken', messages(USER[0], { role: 'user', content: 1 }), 'messages.1.content'],
  ['model', on({ model: 5 }), 'model'],
  ['frequency_penalty', on({ frequency_penalty: 'x' }), 'frequency_penalty'],
  ['logit_bias', on({ logit_bias: [] }), 'logit_bias'],
  ['logprobs', on({ logprobs: 'yes' }), 'logprobs'],
  ['top_logprobs', on({ top_logprobs: 1.5, logprobs: true }), 'top_logprobs'],
  ['max_tokens', on({ max_tokens: '7' }), 'max_tokens'],
  ['max_completion_tokens', on({ max_completion_tokens: 1.5 }), 'max_completion_tokens'],
  ['n', on({ n: 1.5 }), 'n'],
  ['presence_penalty', on({ presence_penalty: true }), 'presence_penalty'],
  ['response_format', on({ response_format: 'json' }), 'response_format'],
  ['response_format.json_schema', on({ response_format: { json_schema: 'x' } }), 'response_format.json_schema'],
  ['response_format.json_schema.name', on({ response_format: { json_schema: { name: 5 } } }), 'response_format.json_schema.name'],
  ['response_format.json_schema.description', on({ response_format: { json_schema: { description: 5 } } }), 'response_format.json_schema.description'],
  ['response_format.json_schema.schema', on({ response_format: { json_schema: { schema: 'x' } } }), 'response_format.json_schema.schema'],
  ['response_format.json_schema.strict', on({ response_format: { json_schema: { strict: 'x' } } }), 'response_format.json_schema.strict'],
  ['seed not an integer', on({ seed: 1.5 }), 'seed'],
  ['seed above the range', on({ seed: 1e19 }), 'seed'],
  ['seed below the range', on({ seed: -1e19 }), 'seed'],
  ['seed one double above the bound', on({ seed: 9223372036854778000 }), 'seed'],
  ['stop', on({ stop: 5 }), 'stop'],
  ['stop as an object', on({ stop: {} }), 'stop'],
  ['stream', on({ stream: 'yes' }), 'stream'],
  ['stream_options', on({ stream: true, stream_options: 'x' }), 'stream_options'],
  ['stream_options.include_usage', on({ stream: true, stream_options: { include_usage: 'y' } }), 'stream_options.include_usage'],
  ['stream_options.continuous_usage_stats', on({ stream: true, stream_options: { continuous_usage_stats: 1 } }), 'stream_options.continuous_usage_stats'],
  ['temperature', on({ temperature: 'hot' }), 'temperature'],
  ['top_p', on({ top_p: 'x' }), 'top_p'],
  ['tools not an array', on({ tools: {} }), 'tools'],
  ['tools[].type', on({ tools: [{ type: 'fn', function: { name: 'f' } }] }), 'tools.0.type'],
  ['tools[].function missing', on({ tools: [{ type: 'function' }] }), 'tools.0.function'],
  ['tools[].function.name missing', on({ tools: [{ type: 'function', function: {} }] }), 'tools.0.function.name'],
  ['tools[].function.description', on({ tools: [{ type: 'function', function: { name: 'f', description: 1 } }] }), 'tools.0.function.description'],
  ['tools[].function.parameters', on({ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }), 'tools.0.function.parameters'],
  ['tool_choice outside its enum', on({ tool_choice: 'auto' }), 'tool_choice'],
  ['tool_choice as an object', on({ tool_choice: { type: 'function', function: { name: 'f' } } }), 'tool_choice'],
  ['reasoning_effort', on({ reasoning_effort: 'extreme' }), 'reasoning_effort'],
  ['include_reasoning', on({ include_reasoning: 'yes' }), 'include_reasoning'],
  ['parallel_tool_calls', on({ parallel_tool_calls: 1 }), 'parallel_tool_calls'],
  ['user', on({ user: 5 }), 'user'],
  ['top_k', on({ top_k: 1.5 }), 'top_k'],
  ['min_p', on({ min_p: 'x' }), 'min_p'],
  ['repetition_penalty', on({ repetition_penalty: 'x' }), 'repetition_penalty'],
  ['length_penalty', on({ length_penalty: 'x' }), 'length_penalty'],
  ['stop_token_ids element', on({ stop_token_ids: [1.5] }), 'stop_token_ids.0'],
  ['stop_token_ids', on({ stop_token_ids: 'x' }), 'stop_token_ids'],
  ['include_stop_str_in_output', on({ include_stop_str_in_output: 'x' }), 'include_stop_str_in_output'],
  ['ignore_eos', on({ ignore_eos: 'x' }), 'ignore_eos'],
  ['min_tokens', on({ min_tokens: 1.5 }), 'min_tokens'],
  ['skip_special_tokens', on({ skip_special_tokens: 0 }), 'skip_special_tokens'],
  ['spaces_between_special_tokens', on({ spaces_between_special_tokens: 'x' }), 'spaces_between_special_tokens'],
  ['truncate_prompt_tokens below -1', on({ truncate_prompt_tokens: -2 }), 'truncate_prompt_tokens'],
  ['truncate_prompt_tokens above the range', on({ truncate_prompt_tokens: 1e19 }), 'truncate_prompt_tokens'],
  ['truncate_prompt_tokens not an integer', on({ truncate_prompt_tokens: 2.5 }), 'truncate_prompt_tokens'],
  ['prompt_logprobs', on({ prompt_logprobs: 'x' }), 'prompt_logprobs'],
  ['prompt_logprobs below -1', on({ prompt_logprobs: -5 }), 'prompt_logprobs'],
  ['allowed_token_ids element', on({ allowed_token_ids: ['a'] }), 'allowed_token_ids.0'],
  ['bad_words element', on({ bad_words: [1] }), 'bad_words.0'],
  ['echo', on({ echo: 'x' }), 'echo'],
  ['add_generation_prompt', on({ add_generation_prompt: 'x' }), 'add_generation_prompt'],
  ['continue_final_message', on({ continue_final_message: 'x' }), 'continue_final_message'],
  ['add_special_tokens', on({ add_special_tokens: 'x' }), 'add_special_tokens'],
  ['documents element', on({ documents: [1] }), 'documents.0'],
  ['chat_template', on({ chat_template: 5 }), 'chat_template'],
  ['chat_template_kwargs', on({ chat_template_kwargs: 'x' }), 'chat_template_kwargs'],
  ['mm_processor_kwargs', on({ mm_processor_kwargs: [] }), 'mm_processor_kwargs'],
  ['structured_outputs', on({ structured_outputs: 'x' }), 'structured_outputs'],
  ['structured_outputs.choice element', on({ structured_outputs: { choice: [1] } }), 'structured_outputs.choice.0'],
  ['structured_outputs.json', on({ structured_outputs: { json: {} } }), 'structured_outputs.json'],
  ['structured_outputs.json_object', on({ structured_outputs: { json_object: 'x' } }), 'structured_outputs.json_object'],
  ['structured_outputs._backend_was_auto', on({ structured_outputs: { _backend_was_auto: 'x' } }), 'structured_outputs._backend_was_auto'],
  ['priority not an integer', { ...on({ priority: 1.5 }), model: 'prio' }, 'priority'],
  ['priority as a string', { ...on({ priority: '1' }), model: 'prio' }, 'priority'],
  // Regression (vLLM review): priority had no bound; these were queued ahead of everyone, then refused by vLLM (int64).
  ['priority far below int64', { ...on({ priority: -1e300 }), model: 'prio' }, 'priority'],
  ['priority above int64', { ...on({ priority: 1e20 }), model: 'prio' }, 'priority'],
  ['request_id not a string', on({ request_id: 5 }), 'request_id'],
  ['return_tokens_as_token_ids', on({ return_tokens_as_token_ids: 'x' }), 'return_tokens_as_token_ids'],
  ['return_token_ids', on({ return_token_ids: 'x' }), 'return_token_ids'],
  ['cache_salt not a string', on({ cache_salt: 5 }), 'cache_salt'],
  ['kv_transfer_params', on({ kv_transfer_params: 'x' }), 'kv_transfer_params'],
  ['engine_xargs not an object', on({ engine_xargs: 'x' }), 'engine_xargs'],
  ['engine_xargs value an object', on({ engine_xargs: { a: {} } }), 'engine_xargs.a'],
  ['engine_xargs value a boolean', on({ engine_xargs: { a: true } }), 'engine_xargs.a'],
  ['engine_xargs list of objects', on({ engine_xargs: { a: [{}] } }), 'engine_xargs.a.0'],
  ['engine_xargs value a boolean under a name with a line break', on({ engine_xargs: { 'a\nb': true } }), 'engine_xargs.a\nb'],
  ['engine_xargs value an object under a name with U+2028', on({ engine_xargs: { 'c\u2028': { x: 1 } } }), 'engine_xargs.c\u2028'],
  ['repetition_detection', on({ repetition_detection: 'x' }), 'repetition_detection'],
  ['repetition_detection.min_count', on({ repetition_detection: { min_count: 1.5 } }), 'repetition_detection.min_count'],
  // Not `T|null` in the interface, so null is a wrong type (vLLM itself would take it).
  ['stop null', on({ stop: null }), 'stop'],
  ['stream_options null', on({ stream: true, stream_options: null }), 'stream_options'],
  ['stream_options.include_usage null', on({ stream: true, stream_options: { include_usage: null } }), 'stream_options.include_usage'],
  ['stream_options.continuous_usage_stats null', on({ stream: true, stream_options: { continuous_usage_stats: null } }), 'stream_options.continuous_usage_stats'],
]

/** Rules across fields, on the configured model, and of the request id. */
const RULES: readonly Case[] = [
  ['a user message without content', messages({ role: 'user' }), 'messages.0.content'],
  ['an assistant message with null content and no tool_calls', messages(USER[0], { role: 'assistant', content: null }), 'messages.1.content'],
  ['an assistant message with empty tool_calls and no content', messages(USER[0], { role: 'assistant', tool_calls: [] }), 'messages.1.content'],
  ['a user message with tool_calls and no content', messages({ role: 'user', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }), 'messages.0.content'],
  ['stream_options with stream absent', on({ stream_options: { include_usage: true } }), 'stream_options'],
  ['stream_options with stream false', on({ stream: false, stream_options: { include_usage: true } }), 'stream_options'],
  ['stream_options with stream null', on({ stream: null, stream_options: {} }), 'stream_options'],
  ['top_logprobs without logprobs', on({ top_logprobs: 2 }), 'top_logprobs'],
  ['top_logprobs with logprobs false', on({ top_logprobs: 2, logprobs: false }), 'top_logprobs'],
  ['prompt_logprobs with stream true', on({ prompt_logprobs: 1, stream: true }), 'prompt_logprobs'],
  ['top_logprobs -1 (all) without logprobs', on({ top_logprobs: -1 }), 'top_logprobs'],
  ['cache_salt empty', on({ cache_salt: '' }), 'cache_salt'],
  ['continue_final_message with add_generation_prompt by default', on({ continue_final_message: true }), 'continue_final_message'],
  ['continue_final_message with add_generation_prompt true', on({ continue_final_message: true, add_generation_prompt: true }), 'continue_final_message'],
  ['priority 1 on a model without priority scheduling', on({ priority: 1 }), 'priority'],
  ['priority -1 on a model without priority scheduling', on({ priority: -1 }), 'priority'],
  ['priority on the default model, which has no priority scheduling', { messages: USER, priority: 3 }, 'priority'],
  ['request_id with a space', on({ request_id: 'has space' }), 'request_id'],
  ['request_id empty', on({ request_id: '' }), 'request_id'],
  ['request_id over 128 characters', on({ request_id: 'a'.repeat(129) }), 'request_id'],
  ['request_id with a slash', on({ request_id: 'a/b' }), 'request_id'],
]

describe('chat validation: refused with 400, never forwarded', () => {
  it.each(WRONG_TYPES)('wrong type: %s', async (_name, body, param) => {
    await expectRefused(body, param)
  })

  it.each(RULES)('rule: %s', async (_name, body, param) => {
    await expectRefused(body, param)
  })

  it('names the missing field with code missing_field', async () => {
    const error = await expectRefused(messages({ content: 'x' }), 'messages.0.role')
    expect(error.code).toBe('missing_field')
    expect(error.message).toContain('messages.0.role')
  })

  it('an unknown model names the model and lists the served ones', async () => {
    const error = await expectRefused(on({ model: 'nope' }), 'model')
    expect(error.code).toBe('model_not_found')
    expect(error.message).toContain('nope')
    expect(error.message).toMatch(/\bm\b/)
    expect(error.message).toContain('prio')
  })

  it.each([
    ['conflicting_fields', on({ top_logprobs: 2 }), 'top_logprobs'],
    ['missing_field', messages({ role: 'user' }), 'messages.0.content'],
    ['invalid_value', on({ cache_salt: '' }), 'cache_salt'],
  ] as const)('a rule across fields has its own code: %s', async (code, body, param) => {
    expect((await expectRefused(body, param)).code).toBe(code)
  })

  it('the message says what to change for a cross-field rule', async () => {
    const error = await expectRefused(on({ continue_final_message: true }), 'continue_final_message')
    expect(error.message).toContain('add_generation_prompt')
  })

  it.each([
    ['with a space', 'has space'],
    ['over 128 characters', 'a'.repeat(129)],
    ['with a comma', 'a,b'],
  ])('an X-Request-Id header %s is refused with param null', async (_name, id) => {
    const error = await expectRefused(BASE, null, { headers: { 'x-request-id': id } })
    expect(error.message).toContain('X-Request-Id')
  })

  it.each([
    ['a JSON array', [BASE]],
    ['a JSON string', 'hello'],
    ['a JSON number', 42],
    ['JSON null', null],
  ])('a body that is %s is refused with param null', async (_name, body) => {
    await expectRefused(body, null)
  })

  it.each([
    ['truncated JSON', '{"messages": [', 'invalid_json'],
    ['trailing garbage', '{"messages": []} x', 'invalid_json'],
    ['an empty body', '', 'invalid_json'],
  ])('%s is refused with code invalid_json', async (_name, raw, code) => {
    const error = await expectRefused(undefined, null, { raw })
    expect(error.code).toBe(code)
  })

  it('a __proto__ key is refused, not merged, and named', async () => {
    const error = await expectRefused(undefined, '__proto__', { raw: `{"__proto__": {"x": 1}, "model": "m", "messages": ${JSON.stringify(USER)}}` })
    expect(error.code).toBe('invalid_value')
  })

  it('an unsupported content type is refused with 415', async () => {
    const error = await expectRefused(undefined, null, { raw: '<chat/>', contentType: 'application/xml' }, 415)
    expect(error.code).toBe('unsupported_media_type')
  })

  it('a text/plain body is refused with 415 unsupported_media_type', async () => {
    const error = await expectRefused(undefined, null, { raw: JSON.stringify(BASE), contentType: 'text/plain' }, 415)
    expect(error.code).toBe('unsupported_media_type')
  })

  it.each([
    ['gzip, on a plain JSON body', 'gzip', Buffer.from(JSON.stringify(BASE))],
    ['gzip, on a gzipped body', 'gzip', gzipSync(JSON.stringify(BASE))],
    ['br', 'br', Buffer.from(JSON.stringify(BASE))],
    ['identity, gzip', 'identity, gzip', Buffer.from(JSON.stringify(BASE))],
  ])('a body with Content-Encoding %s is refused with 415 naming the coding', async (_name, encoding, raw) => {
    const error = await expectRefused(undefined, null, { raw, headers: { 'content-encoding': encoding } }, 415)
    expect(error.code).toBe('unsupported_media_type')
    expect(error.message).toContain(encoding)
  })

  it('a body with Content-Encoding identity is read as it is', async () => {
    await expectForwarded(undefined, { raw: JSON.stringify(BASE), headers: { 'content-encoding': 'Identity' } })
  })

  it('a text/plain body is refused in the error shape and not forwarded', async () => {
    const before = standIn.received.length
    const res = await post(undefined, { raw: JSON.stringify(BASE), contentType: 'text/plain' })
    const payload = (await res.json()) as { error: ErrorObject }
    expect(res.status).toBeGreaterThanOrEqual(400)
    expect(res.status).toBeLessThan(500)
    expect(Object.keys(payload.error).sort()).toEqual(ERROR_KEYS)
    expect(payload.error.type).toBe('invalid_request_error')
    expect(standIn.received.length).toBe(before)
  })
})

/**
 * A JSON number beyond the double range parses to Infinity; it must be
 * refused (Ajv `strictNumbers`), not forwarded as `null`.
 */
describe('chat validation: numbers beyond the double range', () => {
  it.each([
    ['temperature', `{"model":"m","messages":${JSON.stringify(USER)},"temperature":1e400}`],
    ['frequency_penalty', `{"model":"m","messages":${JSON.stringify(USER)},"frequency_penalty":-1e400}`],
    ['max_tokens', `{"model":"m","messages":${JSON.stringify(USER)},"max_tokens":1e400}`],
    ['n', `{"model":"m","messages":${JSON.stringify(USER)},"n":1e400}`],
    ['priority', `{"model":"prio","messages":${JSON.stringify(USER)},"priority":1e400}`],
    ['stop_token_ids.0', `{"model":"m","messages":${JSON.stringify(USER)},"stop_token_ids":[1e400]}`],
    ['engine_xargs.a', `{"model":"m","messages":${JSON.stringify(USER)},"engine_xargs":{"a":1e400}}`],
  ])('%s: 1e400 is refused with 400', async (param, raw) => {
    await expectRefused(undefined, param, { raw })
  })

  // Regression: the text check looked only for a 3-digit exponent or 309 digits in a row, so these
  // passed it; where no schema types the member, the backend got a number it reads as infinity.
  it.each([
    ['308 nines, then e5', `${'9'.repeat(308)}e5`],
    ['1 and 300 zeros, then .5E+10', `1${'0'.repeat(300)}.5E+10`],
  ])('%s, in a member no schema types, is refused with 400 too', async (_name, digits) => {
    await expectRefused(undefined, 'kv_transfer_params.a', { raw: `{"model":"m","messages":${JSON.stringify(USER)},"kv_transfer_params":{"a":${digits}}}` })
  })
})

describe('chat validation: bounds past 2^53 are checked on the digits sent', () => {
  // Each reads as a double inside the bounds; the backend would get the digits.
  it.each([
    ['seed', '9223372036854776001'],
    ['seed', '-9223372036854776001'],
    ['seed', '9223372036854776832'],
    ['truncate_prompt_tokens', '9223372036854776500'],
  ])('%s %s is refused with 400', async (param, digits) => {
    const error = await expectRefused(undefined, param, { raw: `{"model":"m","messages":${JSON.stringify(USER)},"${param}":${digits}}` })
    expect(error.code).toBe('invalid_value')
    expect(error.message).toContain('9223372036854776000')
  })

  // Regression (audit): a leading byte order mark, or a member name written with an escape, skipped the
  // check; the body went upstream with the client's own digits, with or without a member changed.
  it.each([
    ['a byte order mark, no model sent', '\ufeff{"messages":MESSAGES,"truncate_prompt_tokens":9223372036854776001}', 'truncate_prompt_tokens'],
    ['a byte order mark, the model rewritten', '\ufeff{"model":"m","messages":MESSAGES,"seed":9223372036854776001}', 'seed'],
    ['an escaped name, no model sent', '{"messages":MESSAGES,"se\\u0065d":-9223372036854776001}', 'seed'],
    ['an escaped name, the model rewritten', '{"model":"m","messages":MESSAGES,"truncate_prompt_tok\\u0065ns":9223372036854776001}', 'truncate_prompt_tokens'],
  ])('%s: refused with 400 all the same', async (_name, template, param) => {
    const error = await expectRefused(undefined, param, { raw: template.replace('MESSAGES', JSON.stringify(USER)) })
    expect(error.code).toBe('invalid_value')
  })

  it.each([
    ['seed', '9223372036854776000'],
    ['seed', '-9223372036854776000'],
    ['seed', '9223372036854775999'],
    ['truncate_prompt_tokens', '9223372036854775807'],
  ])('%s %s is forwarded', async (param, digits) => {
    await expectForwarded(undefined, { raw: `{"model":"m","messages":${JSON.stringify(USER)},"${param}":${digits}}` })
  })
})

describe('chat validation: priority has vLLM int64 range, checked on the digits sent', () => {
  const body = (digits: string) => `{"model":"prio","messages":${JSON.stringify(USER)},"priority":${digits}}`
  it.each(['9223372036854775808', '-9223372036854775809'])('priority %s is refused with 400', async (digits) => {
    const error = await expectRefused(undefined, 'priority', { raw: body(digits) })
    expect(error.code).toBe('invalid_value')
  })

  it.each(['9223372036854775807', '-9223372036854775808', '9.2e18', '-9.2e18'])('priority %s is forwarded', async (digits) => {
    await expectForwarded(undefined, { raw: body(digits) })
  })

  // Regression (code review): the schema's bound is 2^63 as a double, and the digits were checked only
  // when written as a plain integer; vLLM's pydantic refuses a float of 2^63 or more as an int64.
  it.each(['9223372036854775808.0', '9.223372036854775807e18', '-9223372036854775809.0', '-9223372036854775808.0'])('priority %s, a double of 2^63 or more, is refused with 400', async (digits) => {
    const error = await expectRefused(undefined, 'priority', { raw: body(digits) })
    expect(error.code).toBe('invalid_value')
  })
})

describe("chat normalization: the interface's tool_choice default", () => {
  it('tools without tool_choice reach the backend with tool_choice "none" (vLLM would otherwise default to "auto")', async () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }]
    const before = standIn.received.length
    const res = await post(on({ tools }))
    expect(res.status).toBe(200)
    expect(standIn.received.slice(before).map((r) => r.body)).toEqual([expect.objectContaining({ tools, tool_choice: 'none' })])
  })
})

describe('chat validation: valid edge values reach the backend', () => {
  /** Each body is forwarded exactly as sent, except `model` (served name) and `request_id` (added). */
  const FORWARDED: readonly (readonly [name: string, body: Record<string, unknown>, served: string])[] = [
    ['priority -5 on a model with priority scheduling', { model: 'prio', messages: USER, priority: -5 }, 'prio'],
    ['priority 0 on a model without priority scheduling', on({ priority: 0 }), SERVED_M],
    ['continue_final_message with add_generation_prompt false', on({ continue_final_message: true, add_generation_prompt: false }), SERVED_M],
    ['stream_options with stream true', on({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: false } }), SERVED_M],
    ['top_logprobs with logprobs true', on({ top_logprobs: 2, logprobs: true }), SERVED_M],
    ['top_logprobs 0 without logprobs', on({ top_logprobs: 0 }), SERVED_M],
    ['prompt_logprobs without stream', on({ prompt_logprobs: 1 }), SERVED_M],
    ['prompt_logprobs 0 with stream true', on({ prompt_logprobs: 0, stream: true, stream_options: { include_usage: true, continuous_usage_stats: false } }), SERVED_M],
    ['top_logprobs -1 (all) with logprobs true', on({ top_logprobs: -1, logprobs: true }), SERVED_M],
    ['seed near the lower bound', on({ seed: -9223372036854775000 }), SERVED_M],
    ['seed at the upper bound', on({ seed: 9223372036854776000 }), SERVED_M],
    ['truncate_prompt_tokens -1', on({ truncate_prompt_tokens: -1 }), SERVED_M],
    ['tool_choice none', on({ tool_choice: 'none' }), SERVED_M],
    ['reasoning_effort high', on({ reasoning_effort: 'high' }), SERVED_M],
    ['a tool definition with tool_choice none', on({ tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }], tool_choice: 'none' }), SERVED_M],
    [
      'an assistant message with tool_calls and no content',
      messages(USER[0], { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', content: '42', tool_call_id: 'c1' }),
      SERVED_M,
    ],
    [
      'an assistant message with tool_calls and null content',
      messages(USER[0], { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
      SERVED_M,
    ],
    [
      'content-part arrays',
      messages({ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } }] }),
      SERVED_M,
    ],
    // Regression (vLLM review): vLLM takes a plain string as a text part and a part without `type` that
    // carries image_url/audio_url/video_url/input_audio; the gateway refused both.
    [
      'content parts as plain strings and type-less media parts',
      messages({ role: 'user', content: ['hello', { type: 'text', text: 'x' }, { image_url: 'https://example.com/a.png' }, { audio_url: { url: 'https://example.com/a.wav' } }, { video_url: 'https://example.com/a.mp4' }] }),
      SERVED_M,
    ],
    ['an unknown extension field, untouched', on({ foo_ext: { a: 1 }, messages: [{ role: 'user', content: 'x', extra_member: [1, 'two'] }] }), SERVED_M],
    ['structured_outputs', on({ structured_outputs: { choice: ['a', 'b'], disable_fallback: true } }), SERVED_M],
    ['response_format with a json_schema', on({ response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' }, strict: true } } }), SERVED_M],
    ['engine_xargs of strings, numbers and lists', on({ engine_xargs: { a: 'x', b: 1.5, c: [1, 'y'] } }), SERVED_M],
    ['cache_salt non-empty', on({ cache_salt: 'salt' }), SERVED_M],
    ['stop as a string', on({ stop: 'END' }), SERVED_M],
    [
      'null on every nullable field',
      on({
        frequency_penalty: null,
        logprobs: null,
        top_logprobs: null,
        max_completion_tokens: null,
        n: null,
        presence_penalty: null,
        seed: null,
        stream: null,
        temperature: null,
        top_p: null,
        tools: null,
        reasoning_effort: null,
        parallel_tool_calls: null,
        user: null,
        top_k: null,
        min_p: null,
        repetition_penalty: null,
        stop_token_ids: null,
        truncate_prompt_tokens: null,
        prompt_logprobs: null,
        allowed_token_ids: null,
        documents: null,
        chat_template: null,
        return_tokens_as_token_ids: null,
        return_token_ids: null,
        cache_salt: null,
      }),
      SERVED_M,
    ],
    ['model null: the default model', { model: null, messages: USER }, SERVED_M],
    ['no model: the default model', { messages: USER }, SERVED_M],
  ]

  it.each(FORWARDED)('%s', async (_name, body, served) => {
    const { res, received } = await expectForwarded(body)
    const requestId = res.headers.get('x-request-id')
    expect(requestId).toMatch(REQUEST_ID)
    expect(bodyOf(received)).toEqual({ ...body, model: served, request_id: requestId })
  })

  it('rewrites the model to its served name and sends a generated request id in the body and the header', async () => {
    const { res, received } = await expectForwarded(BASE)
    const requestId = res.headers.get('x-request-id')
    expect(requestId).toMatch(REQUEST_ID)
    expect(bodyOf(received).model).toBe(SERVED_M)
    expect(bodyOf(received).request_id).toBe(requestId)
    expect(received.headers['x-request-id']).toBe(requestId)
  })

  it('gives each request its own generated id', async () => {
    const first = await expectForwarded(BASE)
    const second = await expectForwarded(BASE)
    expect(first.res.headers.get('x-request-id')).not.toBe(second.res.headers.get('x-request-id'))
  })

  it('treats an empty X-Request-Id header as absent: one generated id in the answer, the body and upstream', async () => {
    const { res, received } = await expectForwarded(BASE, { headers: { 'x-request-id': '' } })
    const requestId = res.headers.get('x-request-id')
    expect(requestId).toMatch(REQUEST_ID)
    expect(bodyOf(received).request_id).toBe(requestId)
    expect(received.headers['x-request-id']).toBe(requestId)
  })

  it('copies a lone max_tokens to max_completion_tokens and keeps it', async () => {
    const { received } = await expectForwarded(on({ max_tokens: 7 }))
    expect(bodyOf(received).max_completion_tokens).toBe(7)
    expect(bodyOf(received).max_tokens).toBe(7)
  })

  it('leaves max_completion_tokens alone when both are given', async () => {
    const { received } = await expectForwarded(on({ max_tokens: 7, max_completion_tokens: 3 }))
    expect(bodyOf(received).max_completion_tokens).toBe(3)
    expect(bodyOf(received).max_tokens).toBe(7)
  })

  it('the X-Request-Id header wins over the body request_id', async () => {
    const { res, received } = await expectForwarded(on({ request_id: 'body-id' }), { headers: { 'x-request-id': 'abc-1' } })
    expect(res.headers.get('x-request-id')).toBe('abc-1')
    expect(bodyOf(received).request_id).toBe('abc-1')
    expect(received.headers['x-request-id']).toBe('abc-1')
  })

  it('uses the body request_id when there is no header', async () => {
    const { res, received } = await expectForwarded(on({ request_id: 'body-id.1:x_y' }))
    expect(res.headers.get('x-request-id')).toBe('body-id.1:x_y')
    expect(bodyOf(received).request_id).toBe('body-id.1:x_y')
    expect(received.headers['x-request-id']).toBe('body-id.1:x_y')
  })

  it('accepts a request id of exactly 128 characters', async () => {
    const id = `${'a'.repeat(127)}Z`
    const { res, received } = await expectForwarded(BASE, { headers: { 'x-request-id': id } })
    expect(res.headers.get('x-request-id')).toBe(id)
    expect(bodyOf(received).request_id).toBe(id)
  })

  it("never sends the client's Authorization header upstream", async () => {
    const { received } = await expectForwarded(BASE)
    expect(received.headers.authorization).toBeUndefined()
    expect(JSON.stringify(received.headers)).not.toContain(key.token)
  })

  it('forwards to the trailing-slash path too', async () => {
    const before = standIn.received.length
    const res = await fetch(`${gateway.url}/v1/chat/completions/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(BASE),
    })
    expect(res.status).toBe(200)
    await res.text()
    expect(standIn.received.length).toBe(before + 1)
  })
})

describe('chat validation: body size', () => {
  let small: TestGateway

  beforeAll(async () => {
    small = await startTestGateway({
      server: { body_limit_bytes: 2048 },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', backends: [{ url: standIn.url }] }],
    })
  })

  afterAll(async () => {
    await small?.shutdown()
  })

  it('refuses a body over body_limit_bytes with 413', async () => {
    const big = on({ messages: [{ role: 'user', content: 'x'.repeat(4096) }] })
    const error = await expectRefused(big, null, { baseUrl: small.url }, 413)
    expect(error.code).toBe('body_too_large')
  })

  it('refuses an oversized body sent without a Content-Length', async () => {
    const before = standIn.received.length
    const text = JSON.stringify(on({ messages: [{ role: 'user', content: 'x'.repeat(4096) }] }))
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(text))
        controller.close()
      },
    })
    const res = await fetch(`${small.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit)
    const payload = (await res.json()) as { error: ErrorObject }
    expect(res.status).toBe(413)
    expect(payload.error.type).toBe('invalid_request_error')
    expect(standIn.received.length).toBe(before)
  })

  it('forwards a body just under the limit', async () => {
    const before = standIn.received.length
    const res = await post(on({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(1800) }] }), { baseUrl: small.url })
    await res.text()
    expect(res.status).toBe(200)
    expect(standIn.received.length).toBe(before + 1)
  })
})
