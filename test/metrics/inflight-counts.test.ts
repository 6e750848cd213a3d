import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../src/metrics/registry.js'
import { metricValue } from '../support/metrics.js'

describe('sluice_inflight_requests from plain counts', () => {
  it('shows each (model, backend) count at scrape time, zeros included, and follows later changes', async () => {
    const metrics = createMetrics()
    metrics.inflightCounts.add('m', 'b1', 0)
    metrics.inflightCounts.add('m', 'b2', 1)
    metrics.inflightCounts.add('m', 'b2', 1)
    metrics.inflightCounts.add('other', 'b1', 1)
    let text = await metrics.registry.metrics()
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'm', backend: 'b1' })).toBe(0)
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'm', backend: 'b2' })).toBe(2)
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'other', backend: 'b1' })).toBe(1)

    metrics.inflightCounts.add('m', 'b2', -2)
    text = await metrics.registry.metrics()
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'm', backend: 'b2' })).toBe(0)
  })

  it('keeps a model and backend whose names would run together apart', async () => {
    const metrics = createMetrics()
    metrics.inflightCounts.add('a', 'bc', 1)
    metrics.inflightCounts.add('ab', 'c', 3)
    const text = await metrics.registry.metrics()
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'a', backend: 'bc' })).toBe(1)
    expect(metricValue(text, 'sluice_inflight_requests', { model: 'ab', backend: 'c' })).toBe(3)
  })
})
