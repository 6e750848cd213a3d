/**
 * Content codings the gateway can undo, for the one case where it must read
 * a platform answer it otherwise passes on as bytes: an error answer that may
 * quote the gateway's own credential (credential-echo.ts). Compressed, the
 * quote was invisible to the search and reached the client (a client only
 * had to send `Accept-Encoding: gzip`). So the codings a client may ask such
 * an upstream for are cut to those decoded here, and an error body in one of
 * them is decoded for the search.
 */
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'

const DECODERS: Readonly<Record<string, (body: Buffer, options: { maxOutputLength: number }) => Buffer>> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
}

/** Whether a coding list (`identity, identity`) holds nothing but `coding`; case, spaces and empty entries do not matter. */
export function holdsOnly(list: string, coding: string): boolean {
  return list.split(',').every((entry) => {
    const name = entry.trim().toLowerCase()
    return name === coding || name === ''
  })
}

/** A `Content-Encoding` header's codings as one list (Node gives a repeated header as an array). */
export function codingList(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ')
}

/** A `Content-Encoding` with nothing but identity in it, or none at all. */
export function isIdentityCoding(list: string | undefined): boolean {
  return list === undefined || holdsOnly(list, 'identity')
}

/**
 * The client's `Accept-Encoding` with only the codings decoded here (and
 * identity) left, parameters kept; `*` is dropped, as it would let the
 * upstream choose any. `identity` when nothing is left.
 */
export function decodableAcceptEncoding(value: string): string {
  const kept = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => {
      const coding = entry.split(';', 1)[0]!.trim().toLowerCase()
      return coding === 'identity' || Object.hasOwn(DECODERS, coding)
    })
  return kept.length === 0 ? 'identity' : kept.join(', ')
}

/**
 * `body` with its content coding (one, or a list applied in order) undone;
 * null when a coding is not one decoded here, the bytes do not decode, or
 * the decoded body would pass `maxBytes` (a small compressed body can hold
 * gigabytes).
 */
export function decodedBody(body: Buffer, list: string, maxBytes: number): Buffer | null {
  const codings = list
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity')
  let out = body
  // Applied in the order listed, so undone from the last.
  for (const coding of codings.reverse()) {
    const decode = Object.hasOwn(DECODERS, coding) ? DECODERS[coding]! : null
    if (decode === null) return null
    try {
      out = decode(out, { maxOutputLength: maxBytes })
    } catch {
      return null
    }
  }
  return out
}
