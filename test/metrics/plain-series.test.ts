/**
 * plain-series.ts stands in for prom-client's Counter and Histogram on the
 * hot path, so /metrics must read exactly as it would with prom-client's:
 * the same updates, applied to both, give byte-identical exposition text.
 */
import fc from 'fast-check'
import { Counter, Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { LATENCY_BUCKETS } from '../../src/metrics/registry.js'
import { PlainCounter, PlainHistogram } from '../../src/metrics/plain-series.js'

/** Label values as configured names can be, and some that exposition must escape. */
const labelValue = fc.constantFrom('chat', 'm', 'team-a', '', 'a"quote', 'back\\slash', 'new\nline', 'ünï')
const labels = fc.record({ route: labelValue, model: labelValue })
/** Bounds themselves, values between them, and beyond the last. */
const seconds = fc.oneof(fc.constantFrom(...LATENCY_BUCKETS, 0, 601), fc.double({ min: 0, max: 700, noNaN: true }))

describe('PlainHistogram', () => {
  it('exports what prom-client Histogram exports for the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(labels, seconds), { maxLength: 40 }), async (observations) => {
        const ours = new Registry()
        const theirs = new Registry()
        const options = { name: 'h_seconds', help: 'A histogram.', labelNames: ['route', 'model'] as const, buckets: LATENCY_BUCKETS }
        const plain = new PlainHistogram({ ...options, registers: [ours] })
        const reference = new Histogram({ ...options, registers: [theirs] })
        for (const [l, v] of observations) {
          plain.observe(l, v)
          reference.observe(l, v)
        }
        expect(await ours.metrics()).toBe(await theirs.metrics())
      }),
    )
  })

  it('refuses a value that is not a finite number, as prom-client does', () => {
    const h = new PlainHistogram({ name: 'h', help: 'h', labelNames: ['model'], buckets: [1], registers: [] })
    for (const bad of [Number.NaN, Infinity, -Infinity]) expect(() => h.observe({ model: 'm' }, bad)).toThrow(RangeError)
  })
})

describe('PlainCounter', () => {
  it('exports what prom-client Counter exports for the same increments', async () => {
    const by = fc.oneof(fc.constant(undefined), fc.nat(10_000), fc.double({ min: 0, max: 1e6, noNaN: true }))
    const status = fc.constantFrom('200', '404', '499')
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(labels, status, by), { maxLength: 40 }), async (increments) => {
        const ours = new Registry()
        const theirs = new Registry()
        const options = { name: 'c_total', help: 'A counter.', labelNames: ['route', 'model', 'status'] as const }
        const plain = new PlainCounter({ ...options, registers: [ours] })
        const reference = new Counter({ ...options, registers: [theirs] })
        for (const [l, s, n] of increments) {
          plain.inc({ ...l, status: s }, n)
          reference.inc({ ...l, status: s }, n)
        }
        expect(await ours.metrics()).toBe(await theirs.metrics())
      }),
    )
  })

  it('refuses to go down or by a non-finite amount', () => {
    const c = new PlainCounter({ name: 'c', help: 'c', labelNames: ['model'], registers: [] })
    for (const bad of [-1, Number.NaN, Infinity]) expect(() => c.inc({ model: 'm' }, bad)).toThrow(RangeError)
    c.inc({ model: 'm' }, 2)
  })

  it('keeps its own copy of the labels: changing the caller object later changes nothing', async () => {
    const registry = new Registry()
    const c = new PlainCounter({ name: 'c_total', help: 'c', labelNames: ['model'], registers: [registry] })
    const l = { model: 'm' }
    c.inc(l)
    l.model = 'changed'
    expect(await registry.metrics()).toContain('c_total{model="m"} 1')
    expect(await registry.metrics()).not.toContain('changed')
  })

  it('forgets every series on reset, as the registry asks', async () => {
    const registry = new Registry()
    const c = new PlainCounter({ name: 'c_total', help: 'c', labelNames: ['model'], registers: [registry] })
    c.inc({ model: 'm' }, 3)
    registry.resetMetrics()
    c.inc({ model: 'm' })
    expect(await registry.metrics()).toContain('c_total{model="m"} 1')
  })
})
