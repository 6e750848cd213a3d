/** errorEventOf over the two vLLM error shapes, as json.dumps and as compact JSON write them, and over what is not an error. */
import { describe, expect, it } from 'vitest'
import { errorEventOf } from '../../src/proxy/error-event.js'

const event = (data: string, framing = '\n\n') => Buffer.from(`data: ${data}${framing}`)

describe('errorEventOf', () => {
  it('reads the error body vLLM writes into a stream, in both shapes and both spacings', () => {
    const cases: [string, { type: string | null; code: number | null }][] = [
      ['{"error": {"message": "boom", "type": "InternalServerError", "param": null, "code": 500}}', { type: 'InternalServerError', code: 500 }],
      ['{"error":{"message":"too long","type":"BadRequestError","param":null,"code":400}}', { type: 'BadRequestError', code: 400 }],
      ['{"object": "error", "message": "boom", "type": "InternalServerError", "param": null, "code": 500}', { type: 'InternalServerError', code: 500 }],
      ['{ "object":"error","message":"m","type":"BadRequestError","code":400}', { type: 'BadRequestError', code: 400 }],
      ['{"object" :\t"error", "message": "m", "type": "X", "code": 400}', { type: 'X', code: 400 }],
    ]
    for (const [data, expected] of cases) expect(errorEventOf(event(data)), data).toEqual(expected)
    expect(errorEventOf(event('{"error": {"message": "m", "type": "X", "code": 500}}', '\r\n\r\n'))).toEqual({ type: 'X', code: 500 })
    expect(errorEventOf(Buffer.from('data:{"error":{"type":"X","code":503}}\n\n'))).toEqual({ type: 'X', code: 503 })
  })

  it('keeps only a word-like type and a numeric code (a log line must not carry message-sized text)', () => {
    expect(errorEventOf(event(`{"error": {"message": "m", "type": "${'prompt text '.repeat(20)}", "code": "500"}}`))).toEqual({ type: null, code: null })
    expect(errorEventOf(event('{"error": {"message": "m"}}'))).toEqual({ type: null, code: null })
  })

  it('is null for chat chunks, usage chunks and anything else', () => {
    for (const data of [
      '{"id":"c","object":"chat.completion.chunk","choices":[]}',
      '{"object":"chat.completion.chunk","id":"c","choices":[]}',
      '{"object": "error-like", "id": "c"}',
      '{"objects": "error"}',
      '{"error": "not an object"}',
      '{"error": [1]}',
      '{"error": null}',
      '{"error": {"message": "cut',
      '[DONE]',
      '"error"',
    ]) {
      expect(errorEventOf(event(data)), data).toBeNull()
    }
  })
})
