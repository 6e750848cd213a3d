import { describe, it, expect } from 'vitest'
import { chooseRequestId, isValidRequestId } from '../../src/schemas/request-id.js'

describe('isValidRequestId', () => {
  it.each([
    ['one character', 'a'],
    ['every allowed kind of character', 'AZaz09._:-'],
    ['a UUID', '0f94fd27-fa52-4eda-be92-f23110eef178'],
    ['exactly 128 characters', 'x'.repeat(128)],
  ])('accepts %s', (_name, id) => {
    expect(isValidRequestId(id)).toBe(true)
  })

  it.each([
    ['the empty string', ''],
    ['129 characters', 'x'.repeat(129)],
    ['a space', 'has space'],
    ['a slash', 'a/b'],
    ['a comma (two joined headers)', 'a,b'],
    ['a trailing newline', 'abc\n'],
    ['a CR LF pair', 'abc\r\nx-evil: 1'],
    ['a non-ASCII letter', 'caf\u00e9'],
    ['a tab', 'a\tb'],
  ])('refuses %s', (_name, id) => {
    expect(isValidRequestId(id)).toBe(false)
  })
})

describe('chooseRequestId', () => {
  const never = (): string => {
    throw new Error('must not generate')
  }

  it('takes the header first', () => {
    expect(chooseRequestId('from-header', 'from-body', never)).toEqual({ ok: true, id: 'from-header' })
  })

  it('takes the body when there is no header', () => {
    expect(chooseRequestId(undefined, 'from-body', never)).toEqual({ ok: true, id: 'from-body' })
  })

  it('generates one when neither is given, exactly once', () => {
    let calls = 0
    const generate = () => `gen-${++calls}`
    expect(chooseRequestId(undefined, undefined, generate)).toEqual({ ok: true, id: 'gen-1' })
    expect(calls).toBe(1)
  })

  it('refuses an invalid header, naming the header, even when the body is valid', () => {
    expect(chooseRequestId('bad id', 'good', never)).toEqual({ ok: false, source: 'header' })
  })

  it('treats an empty header as absent, as vLLM does', () => {
    expect(chooseRequestId('', 'from-body', never)).toEqual({ ok: true, id: 'from-body' })
    expect(chooseRequestId('', undefined, () => 'generated')).toEqual({ ok: true, id: 'generated' })
  })

  it('refuses an invalid body id, naming the body', () => {
    expect(chooseRequestId(undefined, 'bad id', never)).toEqual({ ok: false, source: 'body' })
    expect(chooseRequestId(undefined, 'y'.repeat(129), never)).toEqual({ ok: false, source: 'body' })
  })

  it('ignores the body id when a valid header is given', () => {
    expect(chooseRequestId('good', 'bad id', never)).toEqual({ ok: true, id: 'good' })
  })
})
