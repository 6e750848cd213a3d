/**
 * The chat completion request of interface.md, field by field. Unknown
 * members are allowed everywhere (vLLM accepts extensions and evolves faster
 * than we do); what is listed is checked for type, nullability, enum and
 * range. Cross-field rules live in chat-rules.ts.
 */
import { Type, type Static } from 'typebox'
import { nullable, stringEnum } from './json-schema.js'
import { WIDE_INTEGER_BOUNDS, type IntegerBounds } from './wide-integer-bounds.js'

/** interface.md's range as the schema checks it, on the double (exact on the digits: wide-integer-bounds.ts). */
const inRange = ({ min, max }: IntegerBounds) => Type.Integer({ minimum: Number(min), maximum: Number(max) })

const Int = Type.Integer()
const Num = Type.Number()
const Bool = Type.Boolean()
const Str = Type.String()
const Obj = Type.Object({})
const IntArray = Type.Array(Type.Integer())

/**
 * Members that name a content part's kind when it has no `type`: vLLM reads
 * `{"image_url": ...}` and the like as that kind of part (chat_utils.py).
 */
const TYPELESS_PART_MEMBERS = ['image_url', 'audio_url', 'video_url', 'input_audio', 'image_embeds', 'audio_embeds', 'image_pil']

/**
 * One part of a content array as vLLM takes it: a plain string (text), an
 * object with a string `type`, or an object without `type` that carries one
 * of the members above. Anything else vLLM refuses ("Missing 'type' field").
 */
const ContentPart = {
  type: ['string', 'object'],
  properties: { type: { type: 'string' } },
  if: { type: 'object', not: { anyOf: TYPELESS_PART_MEMBERS.map((name) => ({ required: [name] })) } },
  then: { required: ['type'] },
}

/**
 * A message. The interface gives every variant `role` and `content` (string);
 * we also accept the OpenAI content-part array (vLLM does), and a missing or
 * null `content` on an assistant message that carries `tool_calls`.
 */
export const ChatMessage = Type.Object({
  role: Type.String({ minLength: 1 }),
  content: Type.Optional(
    Type.Unsafe<string | (string | object)[] | null>({
      type: ['string', 'array', 'null'],
      items: ContentPart,
    }),
  ),
  name: Type.Optional(Str),
})

const FunctionDefinition = Type.Object({
  name: Type.String({ minLength: 1 }),
  description: Type.Optional(Str),
  parameters: Type.Optional(Obj),
})

export const ChatTool = Type.Object({
  type: stringEnum(['function'] as const),
  function: FunctionDefinition,
})

export const ChatCompletionRequest = Type.Object({
  messages: Type.Array(ChatMessage, { minItems: 1 }),
  model: Type.Optional(nullable(Str)),
  frequency_penalty: Type.Optional(nullable(Num)),
  logit_bias: Type.Optional(Obj),
  logprobs: Type.Optional(nullable(Bool)),
  top_logprobs: Type.Optional(nullable(Type.Integer({ minimum: -1 }))),
  max_tokens: Type.Optional(nullable(Int)),
  max_completion_tokens: Type.Optional(nullable(Int)),
  n: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
  presence_penalty: Type.Optional(nullable(Num)),
  response_format: Type.Optional(
    Type.Object({
      json_schema: Type.Optional(
        Type.Object({
          name: Type.Optional(Str),
          description: Type.Optional(Str),
          schema: Type.Optional(Obj),
          strict: Type.Optional(Bool),
        }),
      ),
    }),
  ),
  seed: Type.Optional(nullable(inRange(WIDE_INTEGER_BOUNDS.seed))),
  // "list" in the interface; a single string is what OpenAI clients also send.
  // Not null: the interface marks a field that may be null `T|null` (vLLM
  // itself takes null here, but the contract is what is checked).
  stop: Type.Optional(Type.Unsafe<string | unknown[]>({ type: ['array', 'string'] })),
  stream: Type.Optional(nullable(Bool)),
  stream_options: Type.Optional(
    Type.Object({
      include_usage: Type.Optional(Bool),
      continuous_usage_stats: Type.Optional(Bool),
    }),
  ),
  temperature: Type.Optional(nullable(Num)),
  top_p: Type.Optional(nullable(Num)),
  tools: Type.Optional(nullable(Type.Array(ChatTool))),
  tool_choice: Type.Optional(stringEnum(['none'] as const)),
  reasoning_effort: Type.Optional(nullable(stringEnum(['low', 'medium', 'high'] as const))),
  include_reasoning: Type.Optional(Bool),
  parallel_tool_calls: Type.Optional(nullable(Bool)),
  user: Type.Optional(nullable(Str)),
  top_k: Type.Optional(nullable(Int)),
  min_p: Type.Optional(nullable(Num)),
  repetition_penalty: Type.Optional(nullable(Num)),
  length_penalty: Type.Optional(Num),
  stop_token_ids: Type.Optional(nullable(IntArray)),
  include_stop_str_in_output: Type.Optional(Bool),
  ignore_eos: Type.Optional(Bool),
  min_tokens: Type.Optional(Int),
  skip_special_tokens: Type.Optional(Bool),
  spaces_between_special_tokens: Type.Optional(Bool),
  truncate_prompt_tokens: Type.Optional(nullable(inRange(WIDE_INTEGER_BOUNDS.truncate_prompt_tokens))),
  prompt_logprobs: Type.Optional(nullable(Type.Integer({ minimum: -1 }))),
  allowed_token_ids: Type.Optional(nullable(IntArray)),
  bad_words: Type.Optional(Type.Array(Str)),
  echo: Type.Optional(Bool),
  add_generation_prompt: Type.Optional(Bool),
  continue_final_message: Type.Optional(Bool),
  add_special_tokens: Type.Optional(Bool),
  documents: Type.Optional(nullable(Type.Array(Obj))),
  chat_template: Type.Optional(nullable(Str)),
  chat_template_kwargs: Type.Optional(Obj),
  mm_processor_kwargs: Type.Optional(Obj),
  structured_outputs: Type.Optional(
    Type.Object({
      json: Type.Optional(Str),
      regex: Type.Optional(Str),
      choice: Type.Optional(Type.Array(Str)),
      grammar: Type.Optional(Str),
      json_object: Type.Optional(Bool),
      disable_fallback: Type.Optional(Bool),
      disable_any_whitespace: Type.Optional(Bool),
      disable_additional_properties: Type.Optional(Bool),
      whitespace_pattern: Type.Optional(Str),
      structural_tag: Type.Optional(Str),
      _backend: Type.Optional(Str),
      _backend_was_auto: Type.Optional(Bool),
    }),
  ),
  priority: Type.Optional(inRange(WIDE_INTEGER_BOUNDS.priority)),
  request_id: Type.Optional(Str),
  return_tokens_as_token_ids: Type.Optional(nullable(Bool)),
  return_token_ids: Type.Optional(nullable(Bool)),
  cache_salt: Type.Optional(nullable(Str)),
  kv_transfer_params: Type.Optional(Obj),
  // Every member, whatever its name: a Type.Record is a pattern ("^.*$") that a name holding a line
  // break does not match, so such a member went unchecked to the backend (session 23 review).
  engine_xargs: Type.Optional(
    Type.Unsafe<Record<string, string | number | unknown[]>>({
      type: 'object',
      additionalProperties: {
        type: ['string', 'number', 'array'],
        items: { type: ['string', 'number'] },
      },
    }),
  ),
  repetition_detection: Type.Optional(
    Type.Object({
      max_pattern_size: Type.Optional(Int),
      min_pattern_size: Type.Optional(Int),
      min_count: Type.Optional(Int),
    }),
  ),
})

export type ChatCompletionBody = Static<typeof ChatCompletionRequest> & Record<string, unknown>
