/** The admission state `state.kind` asks for: in this process, or shared through Redis. */
import type { Logger } from 'pino'
import type { Clock } from '../context.js'
import type { GatewayConfig } from '../config/resolve.js'
import type { Metrics } from '../metrics/registry.js'
import { buildMemoryState, type AdmissionState } from './memory-state.js'
import type { RedisTimings } from './redis-link.js'
import { buildRedisState } from './redis-state.js'
import { NO_PEERS, type SlotPeers } from './slot-peers.js'
import type { AdmissionObserver } from './store.js'

const REDIS_UP = 'sluice_redis_up'

export function buildAdmissionState(
  config: GatewayConfig,
  usable: (model: string, backend: string) => boolean,
  clock: Clock,
  observer: AdmissionObserver,
  logger: Logger,
  metrics: Metrics,
  redisTimings: RedisTimings = {},
  peers: SlotPeers = NO_PEERS,
): AdmissionState {
  const { registry, redisUp } = metrics
  if (config.state.kind !== 'redis') {
    // DESIGN.md: sluice_redis_up exists in redis mode; a memory gateway has no Redis to be down.
    registry.removeSingleMetric(REDIS_UP)
    return buildMemoryState(config, usable, clock, observer, peers)
  }
  if (registry.getSingleMetric(REDIS_UP) === undefined) registry.registerMetric(redisUp)
  return buildRedisState(config, usable, clock, observer, logger, metrics, redisTimings)
}
