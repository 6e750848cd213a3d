/** The bytes of JSON's structure, for the scans that read JSON text without parsing it. */

export const QUOTE = 0x22
export const BACKSLASH = 0x5c
export const COMMA = 0x2c
export const COLON = 0x3a
export const OPEN_BRACE = 0x7b
export const CLOSE_BRACE = 0x7d
export const OPEN_BRACKET = 0x5b
export const CLOSE_BRACKET = 0x5d

/** JSON's four whitespace bytes: space, tab, line feed, carriage return (RFC 8259 §2). */
export function isJsonWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
}
