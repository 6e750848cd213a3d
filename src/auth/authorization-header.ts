/** Splits an Authorization header into scheme and credentials (RFC 9110 §11.4). */

export interface ParsedAuthorization {
  /** Lower-cased scheme name, e.g. `bearer`. */
  readonly scheme: string
  readonly credentials: string
}

export function parseAuthorization(header: string | undefined): ParsedAuthorization | null {
  if (header === undefined) return null
  const match = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S.*)$/.exec(withoutOws(header))
  if (!match) return null
  return { scheme: match[1]!.toLowerCase(), credentials: withoutOws(match[2]!) }
}

/**
 * Less HTTP's optional whitespace (space and tab, RFC 9110 §5.6.3) at either
 * end. Not String.trim(): it also strips U+00A0, which is how Node reads a
 * 0xA0 byte, so a header with one was approved and forwarded byte for byte to
 * a `forward_client` upstream that reads a different token (an auth review).
 */
function withoutOws(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, '')
}
