import { describe, expect, it } from 'vitest'
import { findWideIntegerViolation } from '../../src/schemas/wide-integer-bounds.js'

/** The check as the chat route runs it: on the bytes and on what JSON.parse made of them. */
function check(text: string): ReturnType<typeof findWideIntegerViolation> {
  return findWideIntegerViolation(Buffer.from(text), JSON.parse(text) as Record<string, unknown>)
}

describe('findWideIntegerViolation (interface.md bounds past 2^53, checked on the digits)', () => {
  it.each([
    ['{"seed": 9223372036854776001}', 'seed', 'must be <= 9223372036854776000'],
    ['{"seed": 9223372036854776832}', 'seed', 'must be <= 9223372036854776000'],
    ['{"seed": -9223372036854776001}', 'seed', 'must be >= -9223372036854776000'],
    ['{"truncate_prompt_tokens": 9223372036854776500}', 'truncate_prompt_tokens', 'must be <= 9223372036854776000'],
    // JSON.parse keeps the last of a repeated name, and so does the backend's parser.
    ['{"seed": 1, "seed": 9223372036854776001}', 'seed', 'must be <= 9223372036854776000'],
  ])('%s is out of bounds, though it reads as a double inside them', (text, param, message) => {
    expect(JSON.parse(text)[param]).toBeLessThanOrEqual(9223372036854776000)
    expect(check(text)).toEqual({ param, message })
  })

  it.each([
    '{"seed": 9223372036854776000}',
    '{"seed": -9223372036854776000}',
    '{"seed": 9223372036854775999}',
    '{"truncate_prompt_tokens": 9223372036854775807}',
    '{"seed": 9223372036854776001, "seed": 5}',
    // Spellings a JSON parser reads as doubles: the schema's check on the double stands.
    '{"seed": 9.223372036854776e18}',
    '{"seed": 9223372036854776001.0}',
    // Small values are exact as doubles: nothing to check again.
    '{"seed": 42, "truncate_prompt_tokens": -1}',
    '{"messages": [], "model": "m"}',
  ])('%s passes', (text) => {
    expect(check(text)).toBeNull()
  })

  it('finds the member among others, in a body with whitespace and nesting', () => {
    const text = ' {\n "messages": [{"role": "user", "content": "seed: 1"}],\n "nested": {"seed": 1},\n "seed" :\t9223372036854776100 }\n'
    expect(check(text)).toEqual({ param: 'seed', message: 'must be <= 9223372036854776000' })
  })

  // Regression (audit): both skipped the check, and the client's own digits went upstream as sent.
  it('finds the digits behind a name written with an escape, and in a body with a byte order mark', () => {
    expect(check('{"se\\u0065d": 9223372036854776001}')).toEqual({ param: 'seed', message: 'must be <= 9223372036854776000' })
    const marked = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"truncate_prompt_tokens": 9223372036854776001}')])
    expect(findWideIntegerViolation(marked, { truncate_prompt_tokens: 9223372036854776000 })).toEqual({ param: 'truncate_prompt_tokens', message: 'must be <= 9223372036854776000' })
  })

  it('has nothing to check without the raw bytes', () => {
    expect(findWideIntegerViolation(null, { seed: 9223372036854776000 })).toBeNull()
  })
})
