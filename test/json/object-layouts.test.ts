import { describe, expect, it } from 'vitest'
import { countObjectLayouts } from '../../src/json/object-layouts.js'

/** Every layout in `text`, counted (a cap the text is long enough to be scanned for). */
function layouts(text: string): number {
  return countObjectLayouts(Buffer.from(text), Math.floor(text.length / 5) - 1)
}

describe('countObjectLayouts', () => {
  it('counts each distinct sequence of member names from an object\'s start, wherever the object is', () => {
    expect(layouts('[{"a":1,"b":2},{"a":3,"c":4}]')).toBe(3)
    expect(layouts('[{"a":1,"b":2},{"a":3,"b":[{"a":4,"b":5}]}]')).toBe(2)
    // Order is part of a layout: a,b and b,a share no step.
    expect(layouts('[{"a":1,"b":2},{"b":1,"a":2}]')).toBe(4)
    expect(layouts('{"a":{"a":{"a":{}}}}')).toBe(1)
  })

  it('counts names, not strings in values or array members, nor brackets and commas inside strings', () => {
    expect(layouts('{"a":"b","c":["d","e",{"f":"g"}]}')).toBe(3)
    expect(layouts('{"a":"{\\"b\\":1,\\"c\\":2}","d":"x,\\"e\\":1"}')).toBe(2)
    expect(layouts('["a","b",["c",{"d":1}],"e"]')).toBe(1)
    expect(layouts('[{"ab":1,"c":2},{"a":1,"bc":2}]')).toBe(4)
    expect(layouts('[{"a\\"b":1},{"a\\"c":1},{"a\\"b":1}]')).toBe(2)
  })

  it('does not count names that are array indices, which V8 keeps out of the hidden class', () => {
    expect(layouts('[{"0":1,"1":2},{"50256":-100},{"4294967294":1}]')).toBe(0)
    expect(layouts('{"a":1,"0":2,"b":3}')).toBe(2)
    // Not indices: a leading zero, past 2^32 - 2, a sign, an escape, empty.
    expect(layouts('[{"01":1},{"4294967295":1},{"-1":1},{"\\u0031":1},{"":1}]')).toBe(5)
  })

  it('stops one over the cap, and does not scan text too short to exceed it', () => {
    const distinct = `[${Array.from({ length: 100 }, (_, i) => `{"k${i}":1}`).join(',')}]`
    expect(countObjectLayouts(Buffer.from(distinct), 10)).toBe(11)
    expect(countObjectLayouts(Buffer.from(distinct), 100)).toBe(100)
    expect(countObjectLayouts(Buffer.from(distinct), Math.ceil(distinct.length / 5))).toBe(0)
  })
})
