/** A secret found however an HTML or XML writer escaped its characters (pure). */
import { describe, expect, it } from 'vitest'
import { htmlEscapedPattern, withoutHtmlEscaped } from '../../src/proxy/html-escaped-secret.js'

const SECRET = 'ckpt/TOKEN+9012&x'

function scrubbed(text: string): string {
  return withoutHtmlEscaped(Buffer.from(text, 'latin1'), htmlEscapedPattern(SECRET)!, '[redacted]').toString('latin1')
}

describe('htmlEscapedPattern', () => {
  it('is null for a secret of letters and digits: no writer escapes those', () => {
    expect(htmlEscapedPattern('sk0123ABCdef')).toBeNull()
  })

  // Regression (diff review, session 27): Go's html/template writes `+` as `&#43;`, and the token reached the client.
  it.each([
    ['Go html/template', 'ckpt/TOKEN&#43;9012&amp;x'],
    ['.NET HtmlEncoder', 'ckpt/TOKEN&#x2B;9012&amp;x'],
    ['OWASP, lowercase hex and zeros', 'ckpt&#x002f;TOKEN&#x2b;9012&#38;x'],
    ['every character escaped', 'ckpt&#47;TOKEN&#43;9012&#0038;x'],
    ['as written', SECRET],
  ])('matches the secret as %s writes it', (_writer, written) => {
    expect(scrubbed(`<p>bad key ${written}</p>`)).toBe('<p>bad key [redacted]</p>')
  })

  it('does not match a near miss, a different letter case, or a reference to another character', () => {
    for (const text of ['ckpt/token&#43;9012&amp;x', 'ckpt/TOKEN&#44;9012&amp;x', 'ckpt/TOKEN+9012&lt;x', 'ckpt/TOKEN+901']) {
      expect(scrubbed(text)).toBe(text)
    }
  })

  it('keeps the rest of the body byte for byte, UTF-8 included', () => {
    const body = Buffer.from('<p>é ✓ ckpt/TOKEN&#43;9012&amp;x ✓</p>', 'utf8')
    const out = withoutHtmlEscaped(body, htmlEscapedPattern(SECRET)!, '[redacted]')
    expect(out.toString('utf8')).toBe('<p>é ✓ [redacted] ✓</p>')
  })

  it('returns the same buffer for a body without a character reference, or without the secret', () => {
    const pattern = htmlEscapedPattern(SECRET)!
    for (const text of ['ckpt/TOKEN+9012 and no ampersand', '<p>fine &amp; well</p>']) {
      const body = Buffer.from(text)
      expect(withoutHtmlEscaped(body, pattern, '[redacted]')).toBe(body)
    }
  })

  it('matches a secret with characters beyond ASCII as UTF-8 bytes or as references', () => {
    const pattern = htmlEscapedPattern('pässwörd+1')!
    const body = Buffer.from('a pässwörd&#43;1 b p&#228;ssw&#xF6;rd+1 c', 'utf8')
    expect(withoutHtmlEscaped(body, pattern, 'X').toString('utf8')).toBe('a X b X c')
  })
})
