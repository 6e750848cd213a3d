/**
 * A config file's text, or why it cannot be had. The file must be UTF-8
 * (YAML's own rule, and what `check` promises): read loosely, a Latin-1
 * file's `ä` in a Basic password became U+FFFD, passed `check`, and the
 * upstream refused every request with the password the gateway sent
 * instead (a config review).
 */
import { readFile } from 'node:fs/promises'

export type ConfigText = { readonly text: string } | { readonly problem: string }

export async function readConfigText(file: string): Promise<ConfigText> {
  let bytes: Buffer
  try {
    bytes = await readFile(file)
  } catch (error) {
    return { problem: `cannot read file: ${(error as Error).message}` }
  }
  return decodeConfigBytes(bytes)
}

export function decodeConfigBytes(bytes: Uint8Array): ConfigText {
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) }
  } catch {
    const offset = firstInvalidByte(bytes)
    const line = countNewlines(bytes, offset) + 1
    return { problem: `the file is not valid UTF-8 (line ${line}, byte offset ${offset}); save it as UTF-8` }
  }
}

/**
 * Where the first character that is not UTF-8 starts: the longest prefix a
 * strict decoder takes (a cut through a character is not refused in
 * streaming mode, so a longer prefix is refused whenever a shorter one is)
 * ends there, or inside it when it began as a character and broke later.
 */
function firstInvalidByte(bytes: Uint8Array): number {
  let valid = bytes.length
  if (!decodes(bytes)) {
    valid = 0
    let invalid = bytes.length
    while (invalid - valid > 1) {
      const middle = Math.floor((valid + invalid) / 2)
      if (decodes(bytes.subarray(0, middle))) valid = middle
      else invalid = middle
    }
  }
  return unfinishedCharacterStart(bytes, valid) ?? valid
}

/** The index of a character begun before `end` and not finished by it, or null. */
function unfinishedCharacterStart(bytes: Uint8Array, end: number): number | null {
  let start = end
  while (start > 0 && end - start < 3 && (bytes[start - 1]! & 0xc0) === 0x80) start--
  const lead = start > 0 ? bytes[start - 1]! : 0
  if (lead < 0xc0) return null
  const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2
  return end - (start - 1) < length ? start - 1 : null
}

function decodes(prefix: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(prefix, { stream: true })
    return true
  } catch {
    return false
  }
}

function countNewlines(bytes: Uint8Array, end: number): number {
  let lines = 0
  for (let i = 0; i < end; i++) if (bytes[i] === 0x0a) lines++
  return lines
}
