/**
 * After a reload, the gauges of models and backends no configuration in
 * service has any more. Left in place they read on forever: a removed
 * backend's `sluice_backend_up 0` kept the shipped no-healthy-backend alert
 * firing for a model that no longer existed. They go once the generation
 * that served them has closed (its last request ended). Counters and
 * histograms stay: their totals are history, and Prometheus expects them not
 * to reset while the process lives.
 */
import type { GatewayConfig } from '../config/resolve.js'
import type { Metrics } from './registry.js'

export interface RemovedSeries {
  readonly models: readonly string[]
  readonly backends: readonly { readonly model: string; readonly backend: string }[]
}

/** What `retired` served that none of `serving` does. */
export function removedSeries(retired: GatewayConfig, serving: readonly GatewayConfig[]): RemovedSeries {
  const models = new Set(serving.flatMap((config) => config.models.map((m) => m.name)))
  const backends = new Set(serving.flatMap((config) => config.models.flatMap((m) => m.backends.map((b) => backendKey(m.name, b.name)))))
  return {
    models: retired.models.map((m) => m.name).filter((name) => !models.has(name)),
    backends: retired.models.flatMap((m) => m.backends.filter((b) => !backends.has(backendKey(m.name, b.name))).map((b) => ({ model: m.name, backend: b.name }))),
  }
}

export function forgetSeries(metrics: Metrics, removed: RemovedSeries): void {
  for (const model of removed.models) metrics.queueDepth.remove({ model })
  for (const labels of removed.backends) {
    metrics.backendUp.remove(labels)
    metrics.inflight.remove(labels)
    metrics.inflightCounts.remove(labels.model, labels.backend)
  }
}

function backendKey(model: string, backend: string): string {
  return `${model}\u0000${backend}`
}
