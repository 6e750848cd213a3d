import { describe, expect, it } from 'vitest'
import { targetPath } from '../src/target-path.js'

// Regression (security review, 2026-11-28): the access log and the 404 message kept a fragment
// (`#token=…`) and an absolute-form target's `user:pw@` authority, cutting only at `?`.
describe('targetPath', () => {
  it.each([
    ['/v1/models', '/v1/models'],
    ['/v1/objects/abc?X-Signature=secret&x=1', '/v1/objects/abc'],
    ['/v1/preview/models/m1/checkpoints#token=secret', '/v1/preview/models/m1/checkpoints'],
    ['/a#x?y', '/a'],
    ['/a?y#x', '/a'],
    ['http://user:secret@evil.example/v1/models', '/v1/models'],
    ['https://evil.example:8443/v1/models?token=secret', '/v1/models'],
    ['http://user:secret@evil.example', '/'],
    ['http://evil.example#secret', '/'],
    ['/', '/'],
    ['/?', '/'],
    ['*', '*'],
  ])('%s → %s', (url, path) => {
    expect(targetPath(url)).toBe(path)
  })

  it('a path that merely contains :// is not an absolute-form target', () => {
    expect(targetPath('/x/http://y/z')).toBe('/x/http://y/z')
  })
})
