import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ByteSearch } from '../src/byte-search.js'

describe('ByteSearch', () => {
  it('finds the first occurrence at or after `from`, as Buffer indexOf does', () => {
    const usage = new ByteSearch(Buffer.from('"usage":'))
    const chunk = Buffer.from('data: {"id":"x","choices":[],"usage":null}\n\n')
    expect(usage.firstIn(chunk)).toBe(chunk.indexOf('"usage":'))
    expect(usage.firstIn(chunk, chunk.indexOf('"usage":') + 1)).toBe(-1)
    expect(usage.firstIn(Buffer.from('"usage"'))).toBe(-1)
    expect(usage.firstIn(Buffer.from('"usage":'))).toBe(0)
    expect(usage.firstIn(Buffer.alloc(0))).toBe(-1)
    // The window's end on a byte of the needle moves by less than its length: no occurrence is jumped over.
    expect(usage.firstIn(Buffer.from('"usag""usage":'))).toBe(6)
    expect(new ByteSearch(Buffer.from('aa')).firstIn(Buffer.from('baaa'))).toBe(1)
  })

  it('refuses a needle it cannot shift by (empty, or longer than a byte counts)', () => {
    expect(() => new ByteSearch(Buffer.alloc(0))).toThrow(RangeError)
    expect(() => new ByteSearch(Buffer.alloc(256))).toThrow(RangeError)
  })

  it('agrees with Buffer indexOf on texts made of the needle’s own bytes', () => {
    // A small alphabet makes near-misses and overlapping occurrences common.
    const bytes = (max: number) => fc.array(fc.constantFrom(0x22, 0x75, 0x73, 0x3a, 0x61, 0x0a), { minLength: 1, maxLength: max }).map((b) => Buffer.from(b))
    fc.assert(
      fc.property(bytes(6), bytes(80), fc.nat({ max: 90 }), (needle, text, from) => {
        expect(new ByteSearch(needle).firstIn(text, from)).toBe(text.indexOf(needle, from))
      }),
      { numRuns: 3000 },
    )
  })
})
