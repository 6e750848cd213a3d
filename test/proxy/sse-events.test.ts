import { describe, expect, it } from 'vitest'
import { SseEventSplitter } from '../../src/proxy/sse-events.js'

const LF_EVENTS = [
  'data: {"id":"a","choices":[{"delta":{"content":"hé"}}]}\n\n',
  ': a comment line\n\n',
  'event: message\nid: 7\ndata: first line\ndata: second line\n\n',
  'data: [DONE]\n\n',
]
const CRLF_EVENTS = ['data: {"n":1}\r\n\r\n', 'event: ping\r\ndata: {"n":2}\r\n\r\n', 'data: [DONE]\r\n\r\n']
// Lone CR ends lines too (SSE spec), and one stream may mix all three.
const CR_EVENTS = ['data: {"n":1}\r\r', 'event: ping\rdata: {"n":2}\r\r', 'data: [DONE]\r\r']
const MIXED_EVENTS = ['data: {"n":1}\r\n\n', 'data: a\ndata: b\r\r', 'data: c\r\n\r\n', ': note\n\r\n', 'data: [DONE]\n\n']

function splitAll(stream: Buffer, cuts: readonly number[]): { events: Buffer[]; rest: Buffer } {
  const splitter = new SseEventSplitter()
  const events: Buffer[] = []
  let from = 0
  for (const cut of [...cuts, stream.length]) {
    events.push(...splitter.push(stream.subarray(from, cut)))
    from = cut
  }
  return { events, rest: splitter.rest() }
}

describe('SseEventSplitter', () => {
  for (const [name, events] of [
    ['LF', LF_EVENTS],
    ['CRLF', CRLF_EVENTS],
    ['CR', CR_EVENTS],
    ['mixed', MIXED_EVENTS],
  ] as const) {
    // A stream that ends in a lone CR: whether an LF follows is unknown until
    // the stream ends, so that last event stays in rest() (the relay sends it then).
    const endsInCR = name === 'CR'
    const stream = Buffer.from(events.join(''), 'utf8')
    const all = events.map((e) => Buffer.from(e, 'utf8'))
    const expected = endsInCR ? all.slice(0, -1) : all
    const expectedRest = endsInCR ? all.at(-1)!.length : 0

    it(`gives whole ${name} events, each with its blank line, from one chunk`, () => {
      const { events: out, rest } = splitAll(stream, [])
      expect(out).toEqual(expected)
      expect(rest.length).toBe(expectedRest)
    })

    it(`reassembles ${name} events identically when the stream is cut at any one byte`, () => {
      for (let cut = 0; cut <= stream.length; cut++) {
        const { events: out, rest } = splitAll(stream, [cut])
        expect(out, `cut at ${cut}`).toEqual(expected)
        expect(rest.length, `cut at ${cut}`).toBe(expectedRest)
      }
    })

    it(`reassembles ${name} events when every byte arrives alone`, () => {
      const cuts = Array.from({ length: stream.length - 1 }, (_, i) => i + 1)
      const { events: out, rest } = splitAll(stream, cuts)
      expect(out).toEqual(expected)
      expect(Buffer.concat([...out, rest]).equals(stream)).toBe(true)
    })
  }

  it('keeps two cut points apart: every pair of byte boundaries', () => {
    const stream = Buffer.from(CRLF_EVENTS.join('') + LF_EVENTS.join(''), 'utf8')
    const expected = [...CRLF_EVENTS, ...LF_EVENTS].map((e) => Buffer.from(e, 'utf8'))
    const wrong: string[] = []
    for (let first = 1; first < stream.length; first += 2) {
      for (let second = first; second < stream.length; second += 3) {
        const { events } = splitAll(stream, [first, second])
        const same = events.length === expected.length && events.every((e, i) => e.equals(expected[i]!))
        if (!same) wrong.push(`${first},${second}`)
      }
    }
    expect(wrong).toEqual([])
  })

  it('emits an event only once its terminator is complete, and holds an unfinished one in rest()', () => {
    const splitter = new SseEventSplitter()
    expect(splitter.push(Buffer.from('data: x\r\n\r'))).toEqual([])
    expect(splitter.push(Buffer.from('\ndata: y\n'))).toEqual([Buffer.from('data: x\r\n\r\n')])
    expect(splitter.rest().toString()).toBe('data: y\n')
    expect(splitter.push(Buffer.from('\n'))).toEqual([Buffer.from('data: y\n\n')])
    expect(splitter.rest().length).toBe(0)
  })

  it('passes on an event that never ends in pieces, holding no more than its bound', () => {
    const max = 1000
    const splitter = new SseEventSplitter(max)
    const chunk = Buffer.alloc(300, 'x')
    const out: Buffer[] = []
    for (let i = 0; i < 40; i++) {
      out.push(...splitter.push(chunk))
      expect(splitter.rest().length).toBeLessThanOrEqual(max + chunk.length)
    }
    out.push(...splitter.push(Buffer.from('\n\ndata: next\n\n')))
    expect(out.length).toBeGreaterThan(5)
    expect(Buffer.concat(out).toString()).toBe(`${'x'.repeat(12_000)}\n\ndata: next\n\n`)
    // Framing resumes after the oversized event: the next event comes whole.
    expect(out.at(-1)?.toString()).toBe('data: next\n\n')
  })

  it('does not split inside a multibyte character cut across chunks', () => {
    const stream = Buffer.from('data: {"c":"日本語"}\n\n', 'utf8')
    for (let cut = 1; cut < stream.length; cut++) {
      const out = splitAll(stream, [cut]).events
      expect(out.map((e) => e.toString('utf8')), `cut at ${cut}`).toEqual(['data: {"c":"日本語"}\n\n'])
    }
  })
})
