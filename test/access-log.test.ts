import { describe, it, expect } from 'vitest'
import { LOGGED_PATH_LIMIT, loggedPath } from '../src/access-log.js'

describe('loggedPath', () => {
  it('keeps the path and drops the query string, which may carry a signature or token', () => {
    expect(loggedPath('/v1/objects/abc?X-Signature=secret&x=1')).toBe('/v1/objects/abc')
    expect(loggedPath('/v1/chat/completions')).toBe('/v1/chat/completions')
    expect(loggedPath('/?')).toBe('/')
  })

  it('cuts a long path at the limit and says it did', () => {
    const long = `/${'a'.repeat(LOGGED_PATH_LIMIT * 4)}`
    const logged = loggedPath(`${long}?q=1`)
    expect(logged).toBe(`${long.slice(0, LOGGED_PATH_LIMIT)}…`)
    expect(loggedPath(long.slice(0, LOGGED_PATH_LIMIT))).toBe(long.slice(0, LOGGED_PATH_LIMIT))
  })
})
