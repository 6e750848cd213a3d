import { describe, expect, it } from 'vitest'
import { bytesAt } from '../src/bytes-at.js'

describe('bytesAt', () => {
  const raw = Buffer.from('data: [DONE]')
  it('finds the bytes where they are, and only there', () => {
    expect(bytesAt(raw, Buffer.from('data:'), 0)).toBe(true)
    expect(bytesAt(raw, Buffer.from('[DONE]'), 6)).toBe(true)
    expect(bytesAt(raw, Buffer.from('[DONE]'), 5)).toBe(false)
    expect(bytesAt(raw, Buffer.from('data;'), 0)).toBe(false)
  })
  it('is false past either end, never reading outside the text', () => {
    expect(bytesAt(raw, Buffer.from('[DONE]!'), 6)).toBe(false)
    expect(bytesAt(raw, Buffer.from(']'), raw.length)).toBe(false)
    expect(bytesAt(raw, Buffer.from('d'), -1)).toBe(false)
    expect(bytesAt(raw, Buffer.alloc(0), raw.length)).toBe(true)
  })
})
