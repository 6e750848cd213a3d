/** The admission state `state.kind` asks for: in this process, or shared through Redis. */
import type { Logger } from 'pino'
import type { Clock } from '../context.js'
import type { GatewayConfig } from '../config/resolve.js'
import type { Metrics } from '../metrics/registry.js'
import { buildMemoryState } from './memory-state.js'
import type { RedisTimings } from './redis-link.js'
import { buildRedisState } from './redis-state.js'
import { NO_PEERS, type SlotPeers } from './slot-peers.js'
import { MemoryKeyLimiter } from './memory-key-limiter.js'
import type { AdmissionObserver, AdmissionState, KeyLimiter } from './store.js'
import type { BodyBudget } from '../scheduling/queued-bodies.js'


/** What an admission state is built from, besides the config. */
export interface AdmissionDeps {
  /** Whether a model's backend may take new requests (its health, backend-monitor.ts). */
  readonly usable: (model: string, backend: string) => boolean
  readonly clock: Clock
  readonly observer: AdmissionObserver
  readonly logger: Logger
  readonly metrics: Metrics
  /** Redis mode's lease, heartbeat and budget timings. [RedisLink's defaults] */
  readonly redisTimings?: RedisTimings
  /** The other generations' slots on the same backends (in Redis mode, for the local fallback). [none] */
  readonly peers?: SlotPeers
  /**
   * The serving generation's key limiter. Memory mode keeps using it when
   * that was a memory one too, so a reload neither refills the buckets nor
   * forgets the requests running (its limits come with each call, so changed
   * limits apply at once). [a new one]
   */
  readonly keysFrom?: KeyLimiter
  /** The bodies of waiting requests, counted across models and generations. [not counted] */
  readonly bodyBudget?: BodyBudget
  /** Who signs the shared health verdicts: one per gateway, across its generations (Redis mode). [one of its own] */
  readonly healthSigner?: string
}

export function buildAdmissionState(config: GatewayConfig, deps: AdmissionDeps): AdmissionState {
  const { registry, redisUp, redisLocalAdmissions } = deps.metrics
  const redisOnly = [
    ['sluice_redis_up', redisUp],
    ['sluice_redis_local_admissions_total', redisLocalAdmissions],
  ] as const
  if (config.state.kind !== 'redis') {
    // DESIGN.md: sluice_redis_up exists in redis mode; a memory gateway has no Redis to be down (nor to fall back from).
    for (const [name] of redisOnly) registry.removeSingleMetric(name)
    const keys = deps.keysFrom instanceof MemoryKeyLimiter ? deps.keysFrom : undefined
    return buildMemoryState(config, deps.usable, deps.clock, deps.observer, deps.peers ?? NO_PEERS, keys, deps.bodyBudget)
  }
  for (const [name, metric] of redisOnly) if (registry.getSingleMetric(name) === undefined) registry.registerMetric(metric)
  return buildRedisState(config, deps)
}
