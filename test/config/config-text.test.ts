import { describe, expect, it } from 'vitest'
import { decodeConfigBytes } from '../../src/config/config-text.js'

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))))

describe('decodeConfigBytes', () => {
  it('decodes UTF-8, dropping a byte order mark', () => {
    expect(decodeConfigBytes(bytes([0xef, 0xbb, 0xbf], 'a: "é€😀"\n'))).toEqual({ text: 'a: "é€😀"\n' })
  })

  it.each([
    ['a Latin-1 byte', bytes('a: 1\nb: "p', [0xe4], 'ss"\n'), 2, 10],
    ['a lead byte followed by ASCII', bytes('x: ', [0xc3, 0x28]), 1, 3],
    ['a lone continuation byte first', bytes([0x80], 'x'), 1, 0],
    ['an encoded surrogate', bytes('x\n\n', [0xed, 0xa0, 0x80]), 3, 3],
    ['a character cut at the end of the file', bytes('x: ', [0xe2, 0x82]), 1, 3],
  ])('%s is refused with the line and byte offset where its character starts', (_name, input, line, offset) => {
    expect(decodeConfigBytes(input)).toEqual({ problem: `the file is not valid UTF-8 (line ${line}, byte offset ${offset}); save it as UTF-8` })
  })
})
