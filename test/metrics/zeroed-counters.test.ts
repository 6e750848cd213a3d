import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../src/metrics/registry.js'
import { makeKey } from '../support/gateway.js'
import { metricSamples, scrape } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

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
    const reasons = ['queue_full', 'queue_timeout', 'rate_limit_requests', 'rate_limit_tokens', 'concurrency', 'priority_forbidden', 'shutting_down', 'credential_checks_busy']
    for (const reason of reasons) expect(text).toContain(`sluice_rejections_total{reason="${reason}"} 0`)
  })
})

// Regression (session 24's own list): a backend's first failure of each kind made its series, so
// increase(sluice_upstream_errors_total[…]) saw nothing until the second.
describe('sluice_upstream_errors_total', () => {
  const cleanups = trackedAfterEach()

  it('has every reason at 0 for each configured backend and upstream before any request', async () => {
    const gw = await cleanups.gateway({
      auth: { keys: [makeKey('k', ['chat']).entry] },
      models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9', name: 'a' }, { url: 'http://127.0.0.2:9', name: 'b' }] }],
      upstreams: { training: { url: 'http://127.0.0.1:9' } },
    })
    const samples = metricSamples(await scrape(gw.url), 'sluice_upstream_errors_total')
    const chatReasons = ['connect', 'timeout', 'reset', 'bad_response', 'status_5xx', 'mid_stream', 'error_event', 'auth_refused']
    const platformReasons = ['connect', 'timeout', 'reset', 'bad_response', 'mid_stream', 'auth_refused']
    const expected = [
      ...['a', 'b'].flatMap((backend) => chatReasons.map((reason) => `m|${backend}|${reason}`)),
      ...platformReasons.map((reason) => `|training|${reason}`),
    ]
    expect(samples.map((s) => `${s.labels.model}|${s.labels.backend}|${s.labels.reason}`).sort()).toEqual(expected.sort())
    expect(samples.every((s) => s.value === 0)).toBe(true)
  })
})
