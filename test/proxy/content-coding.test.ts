import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { decodableAcceptEncoding, decodedBody, isIdentityCoding } from '../../src/proxy/content-coding.js'

const TEXT = Buffer.from('{"error":"Incorrect API key provided: Bearer tok-123"}')

describe('decodableAcceptEncoding', () => {
  it('keeps the codings decoded here and identity, with their parameters, and drops the rest and *', () => {
    expect(decodableAcceptEncoding('gzip, deflate, br, zstd')).toBe('gzip, deflate, br')
    expect(decodableAcceptEncoding('zstd;q=1.0, GZIP;q=0.5, identity;q=0.1, *;q=0')).toBe('GZIP;q=0.5, identity;q=0.1')
    expect(decodableAcceptEncoding('x-gzip')).toBe('x-gzip')
  })

  it('asks for identity when nothing decodable is left', () => {
    expect(decodableAcceptEncoding('zstd')).toBe('identity')
    expect(decodableAcceptEncoding('*')).toBe('identity')
    expect(decodableAcceptEncoding('')).toBe('identity')
  })
})

describe('decodedBody', () => {
  it.each([
    ['gzip', gzipSync(TEXT)],
    ['x-gzip', gzipSync(TEXT)],
    ['deflate', deflateSync(TEXT)],
    ['br', brotliCompressSync(TEXT)],
    ['Gzip', gzipSync(TEXT)],
  ])('undoes %s', (coding, body) => {
    expect(decodedBody(body, coding, 1024)?.equals(TEXT)).toBe(true)
  })

  it('undoes a list of codings from the last applied', () => {
    expect(decodedBody(gzipSync(deflateSync(TEXT)), 'deflate, gzip', 1024)?.equals(TEXT)).toBe(true)
    expect(decodedBody(gzipSync(TEXT), 'identity, gzip', 1024)?.equals(TEXT)).toBe(true)
  })

  it('is null for a coding not decoded here, bytes that do not decode, or a body that decodes past the limit', () => {
    expect(decodedBody(TEXT, 'zstd', 1024)).toBeNull()
    expect(decodedBody(TEXT, 'gzip', 1024)).toBeNull()
    expect(decodedBody(gzipSync(Buffer.alloc(1_000_000)), 'gzip', 1000)).toBeNull()
  })
})

describe('isIdentityCoding', () => {
  it('is true for none, identity or a list of identity only', () => {
    expect(isIdentityCoding(undefined)).toBe(true)
    expect(isIdentityCoding('Identity')).toBe(true)
    expect(isIdentityCoding('identity, identity')).toBe(true)
    expect(isIdentityCoding('gzip')).toBe(false)
    expect(isIdentityCoding('identity, br')).toBe(false)
  })
})
