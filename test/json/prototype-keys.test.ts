import { describe, expect, it } from 'vitest'
import { prototypeKeyPath } from '../../src/json/prototype-keys.js'

describe('prototypeKeyPath', () => {
  it.each([
    ['{"__proto__": 1}', '__proto__'],
    ['{"a": [{"b": {"__proto__": {}}}]}', 'a.0.b.__proto__'],
    ['{"a": {"constructor": {"prototype": null}}}', 'a.constructor'],
    // Breadth first, as the parser looks: the shallower one is named.
    ['{"a": {"b": {"__proto__": 1}}, "c": {"__proto__": 2}}', 'c.__proto__'],
  ])('%s: %s', (text, path) => {
    expect(prototypeKeyPath(JSON.parse(text))).toBe(path)
  })

  it.each(['{"constructor": "x"}', '{"constructor": {"name": 1}}', '{"prototype": {}}', '[1, "__proto__"]', '"__proto__"', 'null'])('%s: none', (text) => {
    expect(prototypeKeyPath(JSON.parse(text))).toBeNull()
  })
})
