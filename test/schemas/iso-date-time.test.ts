/** Which `start_time` values are ISO 8601 date-times (pure: the format the training schema checks). */
import { describe, expect, it } from 'vitest'
import { isIsoDateTime } from '../../src/schemas/iso-date-time.js'

describe('isIsoDateTime', () => {
  // Regression (platform review, session 27): 1 to 9 fraction digits only, and no comma; RFC 3339 allows any
  // number of digits and ISO 8601 the comma, and the upstream's Python reads both.
  it.each([
    '2024-01-01T00:00:00.1234567890Z',
    '2024-01-01T00:00:00.123456789012345678901Z',
    '2024-01-01T00:00:00,5Z',
    '2024-01-01T00:00:00.5',
    '2024-01-01 00:00:00,123+01:00',
    '2024-02-29T23:59:59.999999-0530',
  ])('accepts %s', (text) => {
    expect(isIsoDateTime(text)).toBe(true)
  })

  it.each([
    '2024-01-01T00:00:00.Z',
    '2024-01-01T00:00:00,',
    '2024-01-01T00:00.5',
    '2024-01-01T00:00:00.5.5',
    '2024-01-01T00:00:00..5',
    '2024-01-01T00:00:00.x',
    '2023-02-29T00:00:00',
    '20240101T000000Z',
  ])('refuses %s', (text) => {
    expect(isIsoDateTime(text)).toBe(false)
  })
})
