import { describe, expect, it } from 'vitest'
import { carriesContent, dataOf, inspectEvent, readCompletion } from '../../src/proxy/stream-usage.js'

const completionUsage = (body: Buffer) => readCompletion(body)?.usage

const header = '"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m"'
const contentChunk = `data: {${header},"choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}\n\n`
const contentChunkWithNullUsage = `data: {${header},"choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`
const usageOnly = `data: {${header},"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}\n\n`

const event = (text: string) => Buffer.from(text, 'utf8')

describe('inspectEvent', () => {
  it('leaves events without usage untouched, byte for byte, whether stripping or not', () => {
    for (const text of [contentChunk, 'data: [DONE]\n\n', ': keep-alive\n\n', 'data: {"choices":[]}\r\n\r\n', 'data: not json\n\n']) {
      for (const strip of [false, true]) {
        const input = event(text)
        const verdict = inspectEvent(input, strip)
        expect(verdict.usage).toBeNull()
        expect(verdict.forward?.equals(input), `${JSON.stringify(text)} strip=${strip}`).toBe(true)
      }
    }
  })

  it('reads the usage of the usage-only chunk and forwards it unchanged when not stripping', () => {
    const input = event(usageOnly)
    const verdict = inspectEvent(input, false)
    expect(verdict.usage).toEqual({ prompt: 3, completion: 7 })
    expect(verdict.forward?.equals(input)).toBe(true)
  })

  it('drops the usage-only chunk when stripping, still reporting its usage', () => {
    expect(inspectEvent(event(usageOnly), true)).toEqual({ forward: null, usage: { prompt: 3, completion: 7 } })
    const crlf = usageOnly.replace(/\n\n$/, '\r\n\r\n')
    expect(inspectEvent(event(crlf), true)).toEqual({ forward: null, usage: { prompt: 3, completion: 7 } })
  })

  it('removes a trailing ,"usage":null only when stripping', () => {
    const input = event(contentChunkWithNullUsage)
    expect(inspectEvent(input, false).forward?.equals(input)).toBe(true)

    const stripped = inspectEvent(input, true)
    expect(stripped.usage).toBeNull()
    expect(stripped.forward?.toString('utf8')).toBe(contentChunk)
  })

  it('strips the trailing ,"usage":null of an event held in a larger buffer without touching that buffer', () => {
    const whole = event(`${contentChunkWithNullUsage}${contentChunkWithNullUsage}`)
    const before = Buffer.from(whole)
    const first = whole.subarray(0, contentChunkWithNullUsage.length)
    expect(inspectEvent(first, true).forward?.toString('utf8')).toBe(contentChunk)
    expect(whole.equals(before)).toBe(true)
  })

  it('takes the same verdict when a second "usage": comes before the trailing null one (no shortcut then)', () => {
    const nested = `data: {${header},"meta":{"usage":1},"usage":null}\n\n`
    expect(inspectEvent(event(nested), false)).toEqual({ forward: event(nested), usage: null })
    expect(inspectEvent(event(nested), true).forward?.toString('utf8')).toBe(`data: {${header},"meta":{"usage":1}}\n\n`)
  })

  it('keeps the line ending of an event whose trailing "usage":null it removes: CRLF and lone CR', () => {
    for (const ending of ['\r\n\r\n', '\r\r']) {
      const framed = contentChunkWithNullUsage.replace(/\n\n$/, ending)
      expect(inspectEvent(event(framed), true).forward?.toString('utf8'), JSON.stringify(ending)).toBe(contentChunk.replace(/\n\n$/, ending))
      expect(inspectEvent(event(framed), false).forward?.toString('utf8')).toBe(framed)
    }
  })

  it('reads the usage of a usage-only chunk framed with lone CRs, and drops it when stripping', () => {
    const usageOnly = `data: {${header},"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\r\r`
    expect(inspectEvent(event(usageOnly), true)).toEqual({ forward: null, usage: { prompt: 1, completion: 2 } })
  })

  it('strips a trailing "usage":null of a lone-CR event spread over two data: lines through the parsing path', () => {
    const twoLines = `data: {${header},\rdata: "choices":[],"usage":null}\r\r`
    expect(inspectEvent(event(twoLines), true).forward?.toString('utf8')).toBe(`data: {${header},\rdata: "choices":[]}\r\r`)
  })

  it('does not treat a chunk with choices as usage-only, even when stripping', () => {
    const withBoth = `data: {${header},"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n`
    const verdict = inspectEvent(event(withBoth), true)
    expect(verdict.forward).not.toBeNull()
    expect(verdict.usage).toEqual({ prompt: 1, completion: 2 })
  })

  it('reads usage from data spread over several data: lines', () => {
    const split = `data: {${header},"choices":[],\ndata: "usage":{"prompt_tokens":4,"completion_tokens":5,"total_tokens":9}}\n\n`
    expect(inspectEvent(event(split), true)).toEqual({ forward: null, usage: { prompt: 4, completion: 5 } })
  })

  it('treats a trailing "usage":null after a key that ends in "usage" like any other (the parsing path)', () => {
    const tricky = `data: {${header},"a\\"usage":1,"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}\n\n`
    expect(JSON.parse(tricky.slice(6))).toHaveProperty('a"usage', 1)
    const verdict = inspectEvent(event(tricky), true)
    expect(verdict.usage).toBeNull()
    expect(verdict.forward?.toString('utf8')).toBe(tricky.replace(',"usage":null}', '}'))
  })

  it('strips a "usage":null that closes a multi-line data event only through the parsing path, with the same result', () => {
    const split = `data: {${header},\ndata: "choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}\n\n`
    expect(inspectEvent(event(split), true).forward?.toString('utf8')).toBe(split.replace(',"usage":null}', '}'))
    expect(inspectEvent(event(split), false).forward?.toString('utf8')).toBe(split)
  })

  // Session 23 stream review: the member was left in when it began a data line of its own.
  it.each([
    ['on its own data line', `data: {${header},"choices":[]\ndata: ,"usage":null}\n\n`],
    ['after a comma that ends the line before', `data: {${header},"choices":[],\ndata: "usage":null}\n\n`],
    ['with the brace on a line of its own', `data: {${header},"choices":[],\ndata:"usage":null\ndata: }\n\n`],
  ])('strips a "usage":null that begins a data line (%s): the JSON the client reads is the backend\'s without it', (_name, split) => {
    const forward = inspectEvent(event(split), true).forward!.toString('utf8')
    expect(forward).not.toContain('usage')
    expect(JSON.parse(dataOf(forward)!)).toEqual(JSON.parse(dataOf(split)!.replace(/,\s*"usage":null/, '')))
  })

  it('leaves "usage":null that is not the last member alone', () => {
    const inner = `data: {${header},"usage":null,"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n`
    expect(inspectEvent(event(inner), true)).toEqual({ forward: event(inner), usage: null })
  })

  it('forwards an event that contains "usage": but is not JSON unchanged', () => {
    const input = event('data: {"usage": broken\n\n')
    for (const strip of [false, true]) expect(inspectEvent(input, strip)).toEqual({ forward: input, usage: null })
  })
})

describe('events written with spaces (Python json.dumps style), and bytes that are not UTF-8', () => {
  // Regression (audit): a backend writing `"content": "Hi"` never had its time to first token
  // recorded, and its `"usage": null` members reached a client that had not asked for usage.
  it('finds generated output however JSON is spaced, and not in a role-only delta', () => {
    expect(carriesContent(event('data: {"choices": [{"delta": {"content": "Hi"}}]}\n\n'))).toBe(true)
    expect(carriesContent(event('data: {"choices": [{"delta": {"tool_calls" : [ {"index": 0}]}}]}\n\n'))).toBe(true)
    expect(carriesContent(event('data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n'))).toBe(false)
  })

  it('strips a spaced trailing "usage": null when stripping', () => {
    const spaced = 'data: {"id": "c", "choices": [{"delta": {"content": "Hi"}}], "usage": null}\n\n'
    expect(inspectEvent(event(spaced), true).forward!.toString('utf8')).toBe('data: {"id": "c", "choices": [{"delta": {"content": "Hi"}}]}\n\n')
  })

  // Regression (audit): the parsing path re-encoded a decoded string, turning bytes that are not UTF-8 into U+FFFD.
  it('keeps bytes that are not UTF-8 when it cuts a trailing "usage":null out', () => {
    const input = Buffer.concat([Buffer.from('event: message\ndata: {"choices":[{"delta":{"content":"'), Buffer.from([0xff, 0xc3]), Buffer.from('"}}],"usage":null}\n\n')])
    const expected = Buffer.concat([Buffer.from('event: message\ndata: {"choices":[{"delta":{"content":"'), Buffer.from([0xff, 0xc3]), Buffer.from('"}}]}\n\n')])
    expect(inspectEvent(input, true).forward!.equals(expected)).toBe(true)
  })
})

describe('readCompletion: the usage', () => {
  it('reads prompt and completion tokens of a whole answer', () => {
    expect(completionUsage(Buffer.from('{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":22,"total_tokens":33}}'))).toEqual({ prompt: 11, completion: 22 })
  })

  it('counts a reported number that is not a token count (negative, fractional, beyond 2^53, a string) as 0', () => {
    for (const bad of ['-5', '2.5', '1e300', '"7"', 'null']) {
      const body = `{"choices":[],"usage":{"prompt_tokens":${bad},"completion_tokens":4}}`
      expect(completionUsage(Buffer.from(body)), bad).toEqual({ prompt: 0, completion: 4 })
    }
  })

  it('gives null for a completion without usage', () => {
    expect(completionUsage(Buffer.from('{"choices":[]}'))).toBeNull()
    expect(completionUsage(Buffer.from('{"choices":[],"usage":null}'))).toBeNull()
  })

  it('gives undefined for a body that is not a completion: not JSON, not an object, no choices array', () => {
    for (const body of ['not json', '[1,2]', '"x"', 'null', '42', '{}', '{"usage":{"prompt_tokens":1}}', '{"choices":{}}']) {
      expect(completionUsage(Buffer.from(body)), body).toBeUndefined()
    }
  })
})
