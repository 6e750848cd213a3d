import { describe, expect, it } from 'vitest'
import { loggableRedisError, redactedRedisUrl, redisUrlSecrets } from '../../src/state/redis-url.js'

describe('redactedRedisUrl', () => {
  it('keeps scheme, host, port and database; drops userinfo and query, where a password may sit', () => {
    expect(redactedRedisUrl('redis://127.0.0.1:6379/2')).toBe('redis://127.0.0.1:6379/2')
    expect(redactedRedisUrl('redis://:pw@127.0.0.1:6379')).toBe('redis://***@127.0.0.1:6379')
    expect(redactedRedisUrl('rediss://user:pw@cache.internal:6380/0')).toBe('rediss://***@cache.internal:6380/0')
    expect(redactedRedisUrl('redis://127.0.0.1:6379/?password=pw&db=1')).toBe('redis://127.0.0.1:6379/')
    expect(redactedRedisUrl('redis://u:pw@127.0.0.1:99999')).toBe('redis')
  })
})

describe('redisUrlSecrets', () => {
  it('finds the password in the userinfo and in ?password=, as written and decoded', () => {
    expect(redisUrlSecrets('redis://user:p%40ss@h:1').sort()).toEqual(['p%40ss', 'p@ss'].sort())
    expect(redisUrlSecrets('redis://h:1/?password=q%2Bw')).toEqual(['q+w'])
    expect(redisUrlSecrets('redis://h:1')).toEqual([])
    expect(redisUrlSecrets('not a url')).toEqual([])
  })
})

describe('loggableRedisError', () => {
  it('scrubs every secret from the message and leaves the command and its arguments behind', () => {
    const error = Object.assign(new Error('ERR AUTH s3cret called without any password configured for the default user'), {
      name: 'ReplyError',
      code: 'ERR',
      command: { name: 'auth', args: ['default', 's3cret'] },
    })
    const loggable = loggableRedisError(error, ['s3cret'])
    expect(loggable).toEqual({ type: 'ReplyError', message: 'ERR AUTH *** called without any password configured for the default user', code: 'ERR' })
    expect(JSON.stringify(loggable)).not.toContain('s3cret')
  })

  it('takes a thrown non-error as its text', () => {
    expect(loggableRedisError('boom pw', ['pw'])).toEqual({ type: 'Error', message: 'boom ***' })
  })
})
