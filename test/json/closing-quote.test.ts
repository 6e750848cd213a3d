import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { closingQuote } from '../../src/json/json-bytes.js'

/** The byte loop closingQuote replaced for long strings, kept as the reference. */
function byteByByte(raw: Uint8Array, opening: number): number {
  for (let i = opening + 1; i < raw.length; i++) {
    if (raw[i] === 0x5c) i++
    else if (raw[i] === 0x22) return i
  }
  return -1
}

describe('closingQuote', () => {
  it('finds the closing quote of short and long strings, past escaped quotes and backslash runs', () => {
    const at = (text: string, opening = 0) => closingQuote(Buffer.from(text), opening)
    expect(at('"abc",1')).toBe(4)
    expect(at(`"${'x'.repeat(100)}"`)).toBe(101)
    // Escapes past the byte-by-byte stretch (32 bytes), where the native search takes over.
    expect(at(`"${'x'.repeat(40)}\\"y"`)).toBe(44)
    expect(at(`"${'x'.repeat(40)}\\\\"y"`)).toBe(43)
    expect(at(`"${'x'.repeat(40)}\\\\\\"y"`)).toBe(46)
    expect(at(`x"${'x'.repeat(40)}"`, 1)).toBe(42)
    expect(at(`"${'x'.repeat(40)}`)).toBe(-1)
    expect(at(`"${'x'.repeat(40)}\\"`)).toBe(-1)
  })

  it('agrees with a byte-by-byte scan wherever the stretch boundary falls among backslashes and quotes', () => {
    // Mostly plain bytes after a plain run of 0-40, so closing quotes fall on both sides of the boundary.
    const byte = fc.oneof({ arbitrary: fc.constant('x'), weight: 8 }, { arbitrary: fc.constant('é'), weight: 1 }, { arbitrary: fc.constant('\\'), weight: 3 }, { arbitrary: fc.constant('"'), weight: 1 })
    const text = fc
      .tuple(fc.nat({ max: 40 }), fc.array(byte, { maxLength: 120 }))
      .map(([plain, parts]) => Buffer.from(`"${'x'.repeat(plain)}${parts.join('')}`))
    fc.assert(
      fc.property(text, (raw) => {
        expect(closingQuote(raw, 0)).toBe(byteByByte(raw, 0))
      }),
      { numRuns: 2000 },
    )
  })
})
