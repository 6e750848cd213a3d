import { describe, expect, it } from 'vitest'
import { firstNonFiniteNumber, jsonShape, mayHoldNonFiniteNumber } from '../../src/json/json-limits.js'

describe('jsonShape', () => {
  it('counts nesting and objects and arrays, not brackets inside strings or escaped quotes', () => {
    expect(jsonShape(Buffer.from('1'))).toEqual({ depth: 0, containers: 0 })
    expect(jsonShape(Buffer.from('{"a":[1,{"b":[]}]}'))).toEqual({ depth: 4, containers: 4 })
    expect(jsonShape(Buffer.from('{"a":"[[[{{{"}'))).toEqual({ depth: 1, containers: 1 })
    expect(jsonShape(Buffer.from('{"a":"\\"[[[","b":[[]]}'))).toEqual({ depth: 3, containers: 3 })
    expect(jsonShape(Buffer.from('{"a":"\\\\","b":[[]]}'))).toEqual({ depth: 3, containers: 3 })
    expect(jsonShape(Buffer.from('[{},{},[],{}]'))).toEqual({ depth: 2, containers: 5 })
  })
})

describe('numbers beyond the double range', () => {
  it('only texts with a long exponent or digit run are suspected', () => {
    expect(mayHoldNonFiniteNumber('{"a":1.5e10,"b":123456}')).toBe(false)
    expect(mayHoldNonFiniteNumber('{"a":1e400}')).toBe(true)
    expect(mayHoldNonFiniteNumber(`{"a":${'9'.repeat(400)}}`)).toBe(true)
    // Exactly at the edges, and a run that starts after other characters or ends the text.
    expect(mayHoldNonFiniteNumber(`{"a":${'9'.repeat(308)}}`)).toBe(false)
    expect(mayHoldNonFiniteNumber(`x${'1'.repeat(309)}`)).toBe(true)
    expect(mayHoldNonFiniteNumber(`${'1'.repeat(308)} ${'1'.repeat(308)}`)).toBe(false)
    expect(mayHoldNonFiniteNumber('{"a":1E+308}')).toBe(true)
    expect(mayHoldNonFiniteNumber('{"a":1e-400,"b":2e99}')).toBe(false)
  })

  it('finds the dotted path of the first non-finite number', () => {
    expect(firstNonFiniteNumber(JSON.parse('{"a":{"b":[1,1e400]}}'))).toBe('a.b.1')
    expect(firstNonFiniteNumber(JSON.parse('{"a":"1e400","b":[1,2]}'))).toBeNull()
    expect(firstNonFiniteNumber(JSON.parse('-1e400'))).toBe('')
  })
})
