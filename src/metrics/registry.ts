/**
 * Every metric Sluice exports, defined once on a registry of its own (one per
 * running gateway, shared by the generations its reloads create, so counters
 * run on; tests build many in one process). Label values are only
 * ever configured names or fixed words, never raw request input.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { InflightCounts } from './inflight-counts.js'
import { PlainCounter, PlainHistogram } from './plain-series.js'
import { QueueDepths } from './queue-depths.js'
import type { KeyRejection, SlotRejection } from '../state/store.js'

/**
 * LLM requests span milliseconds (errors, cached answers) to minutes (long
 * generations), so the buckets cover 5 ms to 10 min on a rough 2–2.5x scale.
 */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]

/**
 * The series every request updates (requests, durations, queue wait, time
 * to first token, tokens) are plain-series.ts's; the rest are prom-client's.
 */
export function createMetrics() {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const registers = [registry]
  const inflightCounts = new InflightCounts()
  const queueDepths = new QueueDepths()
  return {
    registry,
    requestsTotal: new PlainCounter({
      name: 'sluice_requests_total',
      help: 'Requests answered, by route family, model and status code.',
      labelNames: ['route', 'model', 'status'] as const,
      registers,
    }),
    requestDuration: new PlainHistogram({
      name: 'sluice_request_duration_seconds',
      help: 'Time from receiving a request to the end of its answer.',
      labelNames: ['route', 'model'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    timeToFirstToken: new PlainHistogram({
      name: 'sluice_time_to_first_token_seconds',
      help: 'Streams: from receiving the request to the first content chunk leaving the gateway.',
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    inflightCounts,
    queueDepths,
    inflight: new Gauge({
      name: 'sluice_inflight_requests',
      help: 'Requests being answered by a backend right now.',
      labelNames: ['model', 'backend'] as const,
      registers,
      collect() {
        for (const series of inflightCounts.series()) this.set(series.labels, series.value)
      },
    }),
    backendUp: new Gauge({
      name: 'sluice_backend_up',
      help: '1 when the backend is considered healthy, else 0.',
      labelNames: ['model', 'backend'] as const,
      registers,
    }),
    queueDepth: new Gauge({
      name: 'sluice_queue_depth',
      help: 'Requests waiting for a slot (not those in flight).',
      labelNames: ['model'] as const,
      registers,
      collect() {
        for (const [model, depth] of queueDepths.totals()) this.set({ model }, depth)
      },
    }),
    queueWait: new PlainHistogram({
      name: 'sluice_queue_wait_seconds',
      help: 'Time from arrival to getting a slot, for requests that got one.',
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    rejections: zeroed(
      new Counter({
        name: 'sluice_rejections_total',
        help: 'Requests turned away by admission, or by the bound on Basic credential checks at once, by reason.',
        labelNames: ['reason'] as const,
        registers,
      }),
      'reason',
      REJECTION_REASONS,
    ),
    tokens: new PlainCounter({
      name: 'sluice_tokens_total',
      help: 'Tokens reported by answers, by model, key and kind (prompt|completion).',
      labelNames: ['model', 'key', 'kind'] as const,
      registers,
    }),
    configReloads: zeroed(
      new Counter({
        name: 'sluice_config_reloads_total',
        help: 'Configuration reloads (SIGHUP), by result (ok|invalid|failed).',
        labelNames: ['result'] as const,
        registers,
      }),
      'result',
      RELOAD_RESULTS,
    ),
    upstreamErrors: new Counter({
      name: 'sluice_upstream_errors_total',
      help: 'Failed attempts to get an answer from a backend, by reason.',
      labelNames: ['model', 'backend', 'reason'] as const,
      registers,
    }),
    redisLocalAdmissions: new Counter({
      name: 'sluice_redis_local_admissions_total',
      help: 'Redis mode: requests admitted on this replica\'s local limits (Redis unreachable, or its answer later than the 50 ms call budget), by model.',
      labelNames: ['model'] as const,
      registers,
    }),
    connectionsDropped: new Counter({
      name: 'sluice_connections_dropped_total',
      help: 'Client connections closed as they were accepted: server.max_connections were open.',
      registers,
    }),
    // Exported in redis mode only: state/admission-state.ts takes it off the registry otherwise.
    redisUp: new Gauge({
      name: 'sluice_redis_up',
      help: 'Redis mode: 1 while this replica reaches Redis (shared state), 0 while it admits on local limits.',
      registers,
    }),
  }
}

export type Metrics = ReturnType<typeof createMetrics>

const RELOAD_RESULTS = ['ok', 'invalid', 'failed'] as const
const REJECTION_REASONS = [
  'queue_full',
  'queue_timeout',
  'rate_limit_requests',
  'rate_limit_tokens',
  'concurrency',
  'priority_forbidden',
  'shutting_down',
  'credential_checks_busy',
] as const satisfies readonly (SlotRejection | KeyRejection | 'priority_forbidden' | 'credential_checks_busy')[]

/** Why an attempt at a chat backend failed (README's metrics table). */
export const CHAT_BACKEND_FAILURES = ['connect', 'timeout', 'reset', 'bad_response', 'status_5xx', 'mid_stream', 'error_event', 'auth_refused'] as const
/** The same for a platform upstream: its 5xx is the client's answer, and it sends no events. */
export const PLATFORM_UPSTREAM_FAILURES = ['connect', 'timeout', 'reset', 'bad_response', 'mid_stream', 'auth_refused'] as const

/** A configured backend's or upstream's failure series at 0, for the same reason as `zeroed`'s. */
export function zeroUpstreamErrors(metrics: Metrics, model: string, backend: string, reasons: readonly string[]): void {
  for (const reason of reasons) metrics.upstreamErrors.inc({ model, backend, reason }, 0)
}

/**
 * Each value's series at 0 from the start: an alert on `increase(…)` sees no
 * rise in a series that appears with its first count (the first bad reload,
 * the first rejection).
 */
function zeroed<L extends string>(counter: Counter<L>, label: L, values: readonly string[]): Counter<L> {
  for (const value of values) counter.inc({ [label]: value } as Partial<Record<L, string>>, 0)
  return counter
}
