import { describe, expect, it } from 'vitest'
import { nextProbeIn } from '../../src/routing/backend-monitor.js'

describe('nextProbeIn: health checks start every interval, however long each took', () => {
  it.each([
    // A quick answer: the rest of the interval.
    [5000, 12, 4988],
    // A hung backend: the check waited out its timeout (the interval, at most 5 s), so the next starts at once.
    // Regression (audit): counted from the check's end, such a backend was checked every 2 intervals, marked down twice as late.
    [500, 500, 0],
    [5000, 5003, 0],
    [60_000, 5000, 55_000],
  ])('interval %i ms, took %i ms: the next in %i ms', (interval, took, next) => {
    expect(nextProbeIn(interval, took)).toBe(next)
  })
})
