/** A secret found however an HTML or XML writer escaped its characters (pure). */
import { describe, expect, it } from 'vitest'
import { htmlEscapedPattern, withoutHtmlEscapedSecrets } from '../../src/proxy/html-escaped-secret.js'
import { encoded, type TextEncoding } from '../../src/proxy/body-charset.js'

const SECRET = 'ckpt/TOKEN+9012&x"y'

function scrubbed(text: string, secrets = [SECRET]): string {
  return withoutHtmlEscapedSecrets(Buffer.from(text, 'utf8'), secrets, ['utf8'], '[redacted]').toString('utf8')
}

describe('htmlEscapedPattern', () => {
  it('is null for a secret of letters and digits: no writer escapes those', () => {
    expect(htmlEscapedPattern('sk0123ABCdef', 'utf8-bytes')).toBeNull()
  })
})

describe('withoutHtmlEscapedSecrets', () => {
  // Regression (diff reviews, session 27): Go's html/template writes `+` as `&#43;`, and the token reached the client;
  // a pattern without `&quot;` or an uppercase `&#X` passed every test.
  it.each([
    ['Go html/template', 'ckpt/TOKEN&#43;9012&amp;x&#34;y'],
    ['.NET HtmlEncoder', 'ckpt/TOKEN&#x2B;9012&amp;x&quot;y'],
    ['Python html.escape', 'ckpt/TOKEN+9012&amp;x&quot;y'],
    ['OWASP, lowercase hex and zeros', 'ckpt&#x002f;TOKEN&#x2b;9012&#38;x&#x22;y'],
    ['an uppercase X', 'ckpt&#X2F;TOKEN&#X2B;9012&amp;x&#X22;y'],
    ['every character escaped', 'ckpt&#47;TOKEN&#43;9012&#0038;x&#34;y'],
  ])('matches the secret as %s writes it', (_writer, written) => {
    expect(scrubbed(`<p>bad key ${written}</p>`)).toBe('<p>bad key [redacted]</p>')
  })

  it('does not match a near miss, a different letter case, or a reference to another character', () => {
    for (const text of ['ckpt/token&#43;9012&amp;x&quot;y', 'ckpt/TOKEN&#44;9012&amp;x&quot;y', 'ckpt/TOKEN+9012&lt;x&quot;y', 'ckpt/TOKEN&#43;9012&amp;x']) {
      expect(scrubbed(text)).toBe(text)
    }
  })

  it('keeps the rest of the body byte for byte, UTF-8 included', () => {
    expect(scrubbed('<p>é ✓ ckpt/TOKEN&#43;9012&amp;x"y ✓</p>')).toBe('<p>é ✓ [redacted] ✓</p>')
  })

  it('returns the same buffer for a body without a character reference, or without the secret', () => {
    for (const text of ['ckpt/TOKEN+9012 and no ampersand', '<p>fine &amp; well</p>']) {
      const body = Buffer.from(text)
      expect(withoutHtmlEscapedSecrets(body, [SECRET], ['utf8'], '[redacted]')).toBe(body)
    }
  })

  it('handles regular-expression characters and an astral character in a secret', () => {
    const secret = 'a$b]c\\d-e^f.g*h(i)j|k{l}m?n[o😀'
    const written = 'a&#36;b&#93;c&#92;d&#45;e&#94;f&#46;g&#42;h&#40;i&#41;j&#124;k&#123;l&#125;m&#63;n&#91;o&#x1F600;'
    expect(scrubbed(`[${written}]`, [secret])).toBe('[[redacted]]')
    expect(scrubbed(`[${secret}&amp;]`, [secret])).toBe('[[redacted]&amp;]')
  })

  it('matches a secret with characters beyond ASCII as UTF-8 bytes or as references', () => {
    expect(scrubbed('a pässwörd&#43;1 b p&#228;ssw&#xF6;rd+1 c', ['pässwörd+1'])).toBe('a [redacted] b [redacted] c')
  })

  // Regression (diff review, session 27): the pattern ran only over UTF-8 bytes.
  it('matches in a Latin-1 body, and in UTF-16 of either byte order, written back in that encoding', () => {
    const latin1 = Buffer.from('bad pässwörd&#43;1!', 'latin1')
    expect(withoutHtmlEscapedSecrets(latin1, ['pässwörd+1'], ['utf8'], '[redacted]').equals(Buffer.from('bad [redacted]!', 'latin1'))).toBe(true)
    for (const encoding of ['utf16le', 'utf16be'] as TextEncoding[]) {
      const body = Buffer.concat([encoded('<p>Bearer ckpt/TOKEN&#43;9012&amp;x&quot;y</p>', encoding), Buffer.from([0x0a])])
      const out = withoutHtmlEscapedSecrets(body, [SECRET], ['utf8', encoding], '[redacted]')
      expect(out.equals(Buffer.concat([encoded('<p>Bearer [redacted]</p>', encoding), Buffer.from([0x0a])]))).toBe(true)
    }
  })
})
