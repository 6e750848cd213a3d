/** Splits an Authorization header into scheme and credentials (RFC 9110 §11.4). */

export interface ParsedAuthorization {
  /** Lower-cased scheme name, e.g. `bearer`. */
  readonly scheme: string
  readonly credentials: string
}

export function parseAuthorization(header: string | undefined): ParsedAuthorization | null {
  if (header === undefined) return null
  const match = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S.*)$/.exec(header.trim())
  if (!match) return null
  return { scheme: match[1]!.toLowerCase(), credentials: match[2]!.trim() }
}
