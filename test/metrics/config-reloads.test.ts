import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../src/metrics/registry.js'

// Regression (lifecycle review, 2026-11-28): the series appeared with the first reload, so an alert on
// increase(sluice_config_reloads_total{result="invalid"}[…]) missed the first bad reload after a start.
describe('sluice_config_reloads_total', () => {
  it('has every result at 0 before any reload', async () => {
    const text = await createMetrics().registry.metrics()
    for (const result of ['ok', 'invalid', 'failed']) expect(text).toContain(`sluice_config_reloads_total{result="${result}"} 0`)
  })
})
