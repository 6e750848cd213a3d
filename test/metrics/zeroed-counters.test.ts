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

// Regression (metrics review): the same for the first rejection of each reason.
describe('sluice_rejections_total', () => {
  it('has every reason README lists at 0 before any rejection', async () => {
    const text = await createMetrics().registry.metrics()
    const reasons = ['queue_full', 'queue_timeout', 'rate_limit_requests', 'rate_limit_tokens', 'concurrency', 'priority_forbidden', 'shutting_down']
    for (const reason of reasons) expect(text).toContain(`sluice_rejections_total{reason="${reason}"} 0`)
  })
})
