import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { firstNonFiniteNumber, jsonShape } from '../../src/json/json-limits.js'
import { prototypeKeyPath } from '../../src/json/prototype-keys.js'

const shapeOf = (text: string) => jsonShape(Buffer.from(text))

describe('jsonShape', () => {
  it('counts nesting and objects and arrays, not brackets inside strings or escaped quotes', () => {
    const sizes = (text: string) => ({ depth: shapeOf(text).depth, containers: shapeOf(text).containers })
    expect(sizes('1')).toEqual({ depth: 0, containers: 0 })
    expect(sizes('{"a":[1,{"b":[]}]}')).toEqual({ depth: 4, containers: 4 })
    expect(sizes('{"a":"[[[{{{"}')).toEqual({ depth: 1, containers: 1 })
    expect(sizes('{"a":"\\"[[[","b":[[]]}')).toEqual({ depth: 3, containers: 3 })
    expect(sizes('{"a":"\\\\","b":[[]]}')).toEqual({ depth: 3, containers: 3 })
    expect(sizes('[{},{},[],{}]')).toEqual({ depth: 2, containers: 5 })
    expect(sizes(`{"a":"${'x'.repeat(100)}[\\"{","b":[-1.5e3,{}]}`)).toEqual({ depth: 3, containers: 3 })
  })
})

describe('the scan reads a body once', () => {
  // Regression (review): the escaped-name check searched with indexOf from each name of 9 to 66
  // bytes on, past its end to the next backslash or the body's end: names × body bytes (7.9 MiB
  // of 40-name objects with no backslash took 32 s, the event loop held).
  it('its native searches together span the body at most once, whatever its names', () => {
    const names = Array.from({ length: 40 }, (_, i) => `"n${String(i).padStart(8, '0')}":0,"name_${i}_padded_to_twenty":1`).join(',')
    const raw = Buffer.from(`[${Array.from({ length: 50 }, () => `{${names}}`).join(',')},"a long tail: ${'x'.repeat(100)} \\ ${'y'.repeat(100)}"]`)
    const spans: number[] = []
    const original = Buffer.prototype.indexOf
    Buffer.prototype.indexOf = function (this: Buffer, value: number, byteOffset?: number) {
      const found = original.call(this, value, byteOffset)
      spans.push((found === -1 ? this.length : found) - (byteOffset ?? 0))
      return found
    } as typeof original
    try {
      expect(jsonShape(raw).mayHoldPrototypeKey).toBe(false)
    } finally {
      Buffer.prototype.indexOf = original
    }
    expect(spans.length).toBeGreaterThan(0)
    expect(spans.reduce((sum, span) => sum + span, 0)).toBeLessThanOrEqual(raw.length)
  })
})

describe('numbers that may be beyond the double range', () => {
  const suspect = (text: string) => shapeOf(text).mayHoldHugeNumber

  it('are suspected by their digits before the point plus a non-negative exponent, reaching 309', () => {
    expect(suspect('{"a":1.5e10,"b":123456,"c":-0.5E-7}')).toBe(false)
    expect(suspect('{"a":1e400}')).toBe(true)
    expect(suspect('{"a":-1E+400}')).toBe(true)
    expect(suspect(`{"a":${'9'.repeat(309)}}`)).toBe(true)
    expect(suspect(`{"a":${'9'.repeat(308)}}`)).toBe(false)
    // The regular expression this scan replaced passed these two (each is Infinity to JSON.parse).
    expect(suspect(`{"a":${'9'.repeat(308)}e5}`)).toBe(true)
    expect(suspect(`[1${'0'.repeat(300)}.5e10]`)).toBe(true)
    expect(suspect('[1e307, 12e306, 0.9e307, 1e0000000000307]')).toBe(false)
    expect(suspect('[1e308]')).toBe(true)
    expect(suspect('[1e0000000000308]')).toBe(true)
    // A negative exponent, however long, and fraction digits only come closer to zero.
    expect(suspect(`[1e-400, 0.${'9'.repeat(400)}]`)).toBe(false)
    // Digits in strings are not numbers.
    expect(suspect(`{"a":"1e400 ${'9'.repeat(400)}"}`)).toBe(false)
  })

  it('every number JSON.parse turns into ±Infinity is suspected', () => {
    const number = fc
      .tuple(fc.boolean(), fc.nat({ max: 320 }), fc.constantFrom('', '.5', '.000'), fc.constantFrom('', 'e', 'E+', 'e-', 'e0', 'E00'), fc.nat({ max: 320 }))
      .map(([minus, digits, fraction, exponent, power]) => `${minus ? '-' : ''}${digits === 0 ? '0' : `1${'0'.repeat(digits - 1)}`}${fraction}${exponent === '' ? '' : `${exponent}${power}`}`)
    fc.assert(
      fc.property(number, (text) => {
        if (!Number.isFinite(JSON.parse(`[${text}]`)[0])) expect(suspect(`[${text}]`)).toBe(true)
      }),
      { numRuns: 3000 },
    )
  })

  it('finds the dotted path of the first non-finite number', () => {
    expect(firstNonFiniteNumber(JSON.parse('{"a":{"b":[1,1e400]}}'))).toBe('a.b.1')
    expect(firstNonFiniteNumber(JSON.parse('{"a":"1e400","b":[1,2]}'))).toBeNull()
    expect(firstNonFiniteNumber(JSON.parse('-1e400'))).toBe('')
  })
})

describe('member names that may be prototype keys', () => {
  const suspect = (text: string) => shapeOf(text).mayHoldPrototypeKey

  it('are __proto__, constructor, or escaped names long enough to spell one', () => {
    expect(suspect('{"__proto__":{}}')).toBe(true)
    expect(suspect('{"a":[{"constructor" :{"prototype":1}}]}')).toBe(true)
    expect(suspect('{"\\u005f_proto__":1}')).toBe(true)
    expect(suspect(`{"${'\\u0063\\u006f\\u006e\\u0073\\u0074\\u0072\\u0075\\u0063\\u0074\\u006f\\u0072'}":{}}`)).toBe(true)
    // Not names, or names that cannot spell either.
    expect(suspect('{"a":"__proto__","b":["constructor"]}')).toBe(false)
    expect(suspect('{"content":"x","__proto_":1,"construct0r":2,"a\\nb":3}')).toBe(false)
    expect(suspect(`{"${'\\u0041'.repeat(12)}":1}`)).toBe(false)
  })

  it('every body whose parsed value holds one is suspected', () => {
    const name = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'a'), fc.string({ maxLength: 3 }))
    const value = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, fc.integer(), fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(name, tie('value'), { maxKeys: 3 })),
    })).value
    // Names written plainly or with every character escaped.
    const escaped = (text: string) => text.replace(/"(__proto__|constructor)"/g, (_, word: string) => `"${[...word].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`)
    fc.assert(
      fc.property(value, fc.boolean(), (parsed, escape) => {
        const plain = JSON.stringify(parsed)
        const text = escape ? escaped(plain) : plain
        if (prototypeKeyPath(JSON.parse(text)) !== null) expect(suspect(text)).toBe(true)
      }),
      { numRuns: 2000 },
    )
  })
})
