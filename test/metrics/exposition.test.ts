import { Gauge, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { exposition } from '../../src/metrics/exposition.js'

describe('exposition', () => {
  // Regression (observability audit): prom-client wrote `Nan` (Node's event-loop lag mean right after start).
  it('spells a value that is not a number NaN, as the exposition format does', async () => {
    const registry = new Registry()
    new Gauge({ name: 'lag_mean_seconds', help: 'h', registers: [registry] }).set(Number.NaN)
    new Gauge({ name: 'named_nan', help: 'h', labelNames: ['which'], registers: [registry] }).set({ which: 'Nan' }, 1)

    const text = await exposition(registry)
    expect(text).toContain('lag_mean_seconds NaN\n')
    expect(text).not.toMatch(/ Nan$/m)
    // A label value is not a sample value: left as it is.
    expect(text).toContain('named_nan{which="Nan"} 1\n')
  })
})
