import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors/gateway-error.js'
import { MAX_EVENT_BYTES } from '../../src/proxy/sse-events.js'
import { SseRelay } from '../../src/proxy/sse-relay.js'

const header = '"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m"'
const roleChunk = `data: {${header},"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}\n\n`
const tokenChunk = (text: string) => `data: {${header},"choices":[{"index":0,"delta":{"content":"${text}"}}],"usage":null}\n\n`
const usageChunk = `data: {${header},"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}\n\n`
const done = 'data: [DONE]\n\n'
const STREAM = roleChunk + tokenChunk('a') + tokenChunk('b') + usageChunk + done

/** Feeds `stream` cut at `cuts`, gathering what the client would get. */
function relayAll(stream: string, cuts: readonly number[], strip: boolean): { sent: string; firstContentAt: number[]; relay: SseRelay } {
  const relay = new SseRelay(strip)
  const bytes = Buffer.from(stream, 'utf8')
  const sent: Buffer[] = []
  const firstContentAt: number[] = []
  let from = 0
  for (const [index, cut] of [...cuts, bytes.length].entries()) {
    const { out, firstContent } = relay.push(bytes.subarray(from, cut))
    if (out !== null) sent.push(out)
    if (firstContent) firstContentAt.push(index)
    from = cut
  }
  const rest = relay.end()
  if (rest !== null) sent.push(rest)
  return { sent: Buffer.concat(sent).toString('utf8'), firstContentAt, relay }
}

describe('SseRelay', () => {
  it('passes a stream the client asked usage for through byte for byte, however it is cut', () => {
    const bytes = Buffer.byteLength(STREAM)
    for (let cut = 0; cut <= bytes; cut += 7) {
      const { sent, relay } = relayAll(STREAM, [cut], false)
      expect(sent, `cut at ${cut}`).toBe(STREAM)
      expect(relay.usage).toEqual({ prompt: 4, completion: 2 })
    }
  })

  it('hides what injected usage added: the usage-only chunk and the "usage":null members', () => {
    const { sent, relay } = relayAll(STREAM, [50, 200], true)
    expect(sent).toBe(roleChunk.replace(',"usage":null', '') + tokenChunk('a').replace(',"usage":null', '') + tokenChunk('b').replace(',"usage":null', '') + done)
    expect(relay.usage).toEqual({ prompt: 4, completion: 2 })
  })

  it('reports the first generated output once, in the chunk that completes it (not the role chunk)', () => {
    const roleEnd = Buffer.byteLength(roleChunk)
    const { firstContentAt } = relayAll(STREAM, [roleEnd, roleEnd + 10, roleEnd + Buffer.byteLength(tokenChunk('a'))], false)
    // Chunk 0 is the role chunk; the first token's event completes in chunk 2.
    expect(firstContentAt).toEqual([2])
  })

  it('passes a backend error event on unchanged and reports the first one, in the chunk that completes it', () => {
    const errorEvent = 'data: {"error": {"message": "boom", "type": "InternalServerError", "param": null, "code": 500}}\n\n'
    const later = 'data: {"object": "error", "message": "again", "type": "ServiceUnavailableError", "code": 503}\n\n'
    const stream = roleChunk + tokenChunk('a') + errorEvent + later + done
    const relay = new SseRelay(false)
    const bytes = Buffer.from(stream)
    const cut = Buffer.byteLength(roleChunk + tokenChunk('a')) + 20
    const first = relay.push(bytes.subarray(0, cut))
    const second = relay.push(bytes.subarray(cut))
    expect(first.errorEvent).toBeNull()
    expect(second.errorEvent).toEqual({ type: 'InternalServerError', code: 500 })
    expect(Buffer.concat([first.out!, second.out!]).toString()).toBe(stream)
  })

  it('sends nothing for a chunk that completes no event, and the unfinished tail at a clean end', () => {
    const relay = new SseRelay(false)
    expect(relay.push(Buffer.from('data: {"choi')).out).toBeNull()
    expect(relay.end()?.toString()).toBe('data: {"choi')
  })

  it('calls a stream complete once data: [DONE] came, a bare one at the end included', () => {
    const endedBy = (...parts: string[]) => {
      const relay = new SseRelay(false)
      for (const part of parts) relay.push(Buffer.from(part))
      relay.end()
      return relay.complete
    }
    expect(endedBy(STREAM)).toBe(true)
    expect(endedBy(roleChunk, 'data: [DONE]\r\n\r\n')).toBe(true)
    expect(endedBy(roleChunk, 'data: [DONE]')).toBe(true)
    expect(endedBy(roleChunk, 'data:[DONE]\n')).toBe(true)
    expect(endedBy()).toBe(false)
    expect(endedBy(roleChunk)).toBe(false)
    // What follows [DONE] is dropped; data starting with [DONE] is the end to the openai client too.
    expect(endedBy(roleChunk, 'data: [DONE]\n\n', tokenChunk('a'))).toBe(true)
    expect(endedBy(roleChunk, 'data: [DONE] and more\n\n')).toBe(true)
    expect(endedBy(roleChunk, 'data: {"cho')).toBe(false)
    expect(endedBy(roleChunk, 'data: {"content":"[DONE]"}\n\n')).toBe(false)
    // Read in place when `data:` comes first: one space dropped, not two; the data lines joined.
    expect(endedBy(roleChunk, 'data:  [DONE]\n\n')).toBe(false)
    expect(endedBy(roleChunk, 'data: [DON\ndata: E]\n\n')).toBe(false)
    expect(endedBy(roleChunk, 'data: [DONE]\ndata: more\n\n')).toBe(true)
    expect(endedBy(roleChunk, 'data: [DONE')).toBe(false)
  })

  // Regression (audit): [DONE] counted only as the last event of its chunk, and only in 16 bytes, so a stream with
  // anything after it in the same chunk (even one more blank line) or a longer spelling ended in an error event.
  it.each([
    ['one more blank line', 'data: [DONE]\n\n\n'],
    ['a comment after it', 'data: [DONE]\n\n: ping\n\n'],
    ['a content event after it', `data: [DONE]\n\n${tokenChunk('late')}`],
    ['trailing spaces', 'data: [DONE]   \n\n'],
    ['an event: line', 'event: done\ndata: [DONE]\n\n'],
    ['an id: line, CRLF', 'id: 5\r\ndata: [DONE] \r\n\r\n'],
    // Regression (stream review, session 26): an event over 256 bytes was never [DONE], so a backend's long id:
    // line or padding ended every stream in an error event and had the healthy backend ejected.
    ['a 300-byte id: line', `id: ${'a'.repeat(300)}\ndata: [DONE]\n\n`],
    ['300 trailing spaces', `data: [DONE]${' '.repeat(300)}\n\n`],
  ])('[DONE] with %s, in the chunk of the last content: complete, and nothing after [DONE] goes out', (_name, tail) => {
    const relay = new SseRelay(false)
    const content = tokenChunk('a')
    const { out } = relay.push(Buffer.from(`${content}${tail}`))
    expect(relay.complete).toBe(true)
    const sent = out!.toString('utf8')
    expect(sent.startsWith(content)).toBe(true)
    expect(sent.slice(content.length)).toMatch(/^(?:(?:event|id): [^\r\n]*\r?\n)?data: \[DONE\] *(?:\r\n\r\n|\n\n)$/)
    expect(relay.push(Buffer.from(tokenChunk('later'))).out).toBeNull()
    expect(relay.end()).toBeNull()
    expect(relay.events).toBe(1)
  })

  // Regression (diff review, session 26): once [DONE] was looked for in events of any length, a network chunk
  // starting at `data: [DONE]` inside an oversized event's content ended the stream there, silently cut.
  it('does not take the rest of an oversized event, starting at `data: [DONE]` in its content, for the end', () => {
    const relay = new SseRelay(false)
    const head = `data: {"choices":[{"delta":{"content":"${'x'.repeat(MAX_EVENT_BYTES)}`
    const tail = `data: [DONE] is text here${'y'.repeat(1000)}"}}]}\n\n`
    const sent = [relay.push(Buffer.from(head)).out, relay.push(Buffer.from(tail)).out, relay.push(Buffer.from(`${tokenChunk('after')}data: [DONE]\n\n`)).out]
    expect(relay.complete).toBe(true)
    expect(Buffer.concat(sent.filter((b) => b !== null)).toString('utf8')).toBe(`${head}${tail}${tokenChunk('after')}data: [DONE]\n\n`)
    expect(relay.events).toBe(2)
  })

  it('ends a [DONE] event that outgrew the bound (padding) with the blank line that will not come', () => {
    const relay = new SseRelay(false)
    const done = `data: [DONE]${' '.repeat(MAX_EVENT_BYTES + 10)}`
    const { out } = relay.push(Buffer.from(done))
    expect(relay.complete).toBe(true)
    expect(out!.toString('utf8')).toBe(`${done}\n\n`)
  })

  // Regression (audit): every piece counted as a completion token in the estimate: 200,000 keep-alive
  // comments with no output were charged 199,999 tokens, a 3 MB event about 12.
  it('counts only data events for the estimate: not comments, stray line breaks or the pieces of an oversized event', () => {
    const relay = new SseRelay(false)
    relay.push(Buffer.from(`${roleChunk}: ping\n\n\n${tokenChunk('a')}: ping\n\n`))
    relay.push(Buffer.from(`data: {"choices":[{"delta":{"content":"${'x'.repeat(3 * 256 * 1024)}"}}]}\n\n`))
    relay.push(Buffer.from('data: [DONE]\n\n'))
    expect(relay.events).toBe(3)
  })

  const failureBody = new GatewayError('upstream_bad_response', 'Upstream backend "b1" closed the connection before answering.').toBody()

  it('closes a failed stream with an error event and [DONE], dropping an unfinished event the client never saw', () => {
    const relay = new SseRelay(false)
    relay.push(Buffer.from('data: {"choices":[]}\n\ndata: {"cho'))
    expect(relay.failure(failureBody).toString('utf8')).toBe(`data: ${JSON.stringify(failureBody)}\n\ndata: [DONE]\n\n`)
  })

  // Regression: after an event that outgrew the splitter's bound was passed on
  // in part, the error event was glued onto its unfinished line.
  it('ends an event the client holds the start of before the error event', () => {
    const relay = new SseRelay(false)
    const start = relay.push(Buffer.from(`data: {"content":"${'y'.repeat(MAX_EVENT_BYTES)}`)).out
    expect(start?.toString('utf8').endsWith('yyy')).toBe(true)
    const text = relay.failure(failureBody).toString('utf8')
    expect(text).toBe(`\n\ndata: ${JSON.stringify(failureBody)}\n\ndata: [DONE]\n\n`)
    // As an SSE parser sees the whole stream: the broken event, then the error as an event of its own.
    const events = `${start!.toString('utf8')}${text}`.split('\n\n').filter((e) => e !== '')
    expect(events.slice(-2)).toEqual([`data: ${JSON.stringify(failureBody)}`, 'data: [DONE]'])
  })

  it('after the oversized event ended, a failure needs no extra blank line', () => {
    const relay = new SseRelay(false)
    relay.push(Buffer.from(`data: {"content":"${'y'.repeat(MAX_EVENT_BYTES)}`))
    relay.push(Buffer.from('"}\n\n'))
    expect(relay.failure(failureBody).toString('utf8').startsWith('data: ')).toBe(true)
  })
})
