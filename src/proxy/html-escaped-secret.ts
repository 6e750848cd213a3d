/**
 * A secret as an HTML or XML writer may have escaped it in an error page:
 * any of its characters other than letters and digits as a numeric
 * character reference (`&#43;`, `&#x2B;`, `&#x2b;`, zeros allowed) or, for
 * `& < > " '`, a named one. Writers escape different sets (Go's
 * html/template `+` as `&#43;`, .NET's HtmlEncoder `+` as `&#x2B;`, OWASP's
 * `/` as `&#x2F;`) and leave the rest as it is, so each character may be
 * either: one pattern per secret matches every mixture, where a list of
 * forms would need one per combination (a diff review: Go's `&#43;` quoted
 * the token past the search). Pure.
 */

const NAMED: Readonly<Record<string, string>> = { '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' }

/** Hex digits in either case (the pattern is case-sensitive: the secret's own letters are not). */
function anyCaseHex(code: number): string {
  return [...code.toString(16)].map((digit) => (/[a-f]/.test(digit) ? `[${digit}${digit.toUpperCase()}]` : digit)).join('')
}

function escapeForRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')
}

/** One character of the secret: itself (its UTF-8 bytes, read as Latin-1) or a character reference to it. */
function characterPattern(char: string): string {
  const literal = escapeForRegExp(Buffer.from(char, 'utf8').toString('latin1'))
  if (/[A-Za-z0-9]/.test(char)) return literal
  const code = char.codePointAt(0)!
  const named = NAMED[char] === undefined ? '' : `|&${NAMED[char]};`
  return `(?:${literal}|&#0*${code};|&#[xX]0*${anyCaseHex(code)};${named})`
}

/**
 * A pattern for `secret` written with any of its characters escaped, to run
 * over a body read as Latin-1 (byte for byte); null when it has no
 * character an escaper would change (the plain byte search finds it then).
 */
export function htmlEscapedPattern(secret: string): RegExp | null {
  if (/^[A-Za-z0-9]*$/.test(secret)) return null
  return new RegExp([...secret].map(characterPattern).join(''), 'g')
}

/** `body` with every escaped writing of the secret `pattern` matches replaced by `replacement`; the same buffer when none occurs. */
export function withoutHtmlEscaped(body: Buffer, pattern: RegExp, replacement: string): Buffer {
  // Only a body with a character reference in it can hold an escaped secret: most never pay for the pattern.
  if (body.indexOf('&') < 0) return body
  const text = body.toString('latin1')
  pattern.lastIndex = 0
  if (!pattern.test(text)) return body
  return Buffer.from(text.replace(pattern, replacement), 'latin1')
}
