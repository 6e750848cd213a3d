import { describe, it, expect } from 'vitest'
import { closestName, editDistance } from '../../src/schemas/closest-name.js'

describe('editDistance', () => {
  it.each([
    ['', '', 0],
    ['abc', '', 3],
    ['', 'abc', 3],
    ['backend', 'backends', 1],
    ['api-key', 'api_key', 1],
    ['max_concurency', 'max_concurrency', 1],
    ['max_conucrrency', 'max_concurrency', 1],
    ['kitten', 'sitting', 3],
  ])('%j to %j is %i', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance)
    expect(editDistance(b, a)).toBe(distance)
  })
})

describe('closestName', () => {
  const serverKeys = ['host', 'port', 'body_limit_bytes', 'request_timeout_ms']

  it('names the known key a typo was meant to be', () => {
    expect(closestName('prot', serverKeys)).toBe('port')
    expect(closestName('body_limit_byte', serverKeys)).toBe('body_limit_bytes')
    expect(closestName('Request_Timeout_MS', serverKeys)).toBe('request_timeout_ms')
  })

  it('names nothing for a different word, however near the nearest key is', () => {
    expect(closestName('bogus', serverKeys)).toBeNull()
    expect(closestName('listen', serverKeys)).toBeNull()
    expect(closestName('x', serverKeys)).toBeNull()
  })

  it('names nothing when two keys are equally near', () => {
    expect(closestName('cat', ['bat', 'hat'])).toBeNull()
    expect(closestName('cat', ['bat', 'hat', 'cat_'])).toBeNull()
  })

  it('prefers the nearer of two keys within reach', () => {
    expect(closestName('max_concurency', ['max_concurrency', 'max_concurrency_per_backend'])).toBe('max_concurrency')
  })

  it('names nothing among no candidates', () => {
    expect(closestName('port', [])).toBeNull()
  })
})
