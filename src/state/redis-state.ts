/**
 * Admission state shared by every replica through Redis (`state.kind:
 * redis`), with this replica's memory state as the fallback while Redis is
 * unreachable (failover-model-slots.ts, failover-key-limiter.ts).
 */
import type { GatewayConfig } from '../config/resolve.js'
import { FailoverKeyLimiter } from './failover-key-limiter.js'
import { FailoverModelSlots } from './failover-model-slots.js'
import { MemoryKeyLimiter } from './memory-key-limiter.js'
import { MemoryModelSlots } from './memory-slots.js'
import { modelSlotSettings, peerCounted } from './memory-state.js'
import { RedisHealthBoard } from './redis-health-board.js'
import { RedisKeyLimiter } from './redis-key-limiter.js'
import { RedisLink } from './redis-link.js'
import { RedisModelSlots } from './redis-slots.js'
import { NO_PEERS } from './slot-peers.js'
import type { AdmissionDeps } from './admission-state.js'
import type { AdmissionState } from './store.js'

export function buildRedisState(config: GatewayConfig, deps: AdmissionDeps): AdmissionState {
  const { usable, clock, observer, logger, metrics } = deps
  const url = config.state.redis_url
  if (url === undefined) throw new Error('state.redis_url is required when state.kind is redis')
  const link = new RedisLink({ url, keyPrefix: config.state.key_prefix, logger, upGauge: metrics.redisUp, ...deps.redisTimings })
  const slots = new Map<string, FailoverModelSlots>()
  const shared: RedisModelSlots[] = []
  const peers = deps.peers ?? NO_PEERS
  for (const model of config.models) {
    const settings = modelSlotSettings(model, usable, deps.bodyBudget)
    const modelSlots = new RedisModelSlots(settings, clock, observer, link)
    // Local limits count this replica's Redis leases still running, so an outage admits no extra
    // request; and the other generations' requests on the backend (a reload during an outage gave
    // a backend twice its slots, a chaos audit: the new generation's local limits started from 0).
    const local = new MemoryModelSlots({ ...settings, ...peerCounted(model, peers, (backend) => modelSlots.inFlight(backend)) }, clock, observer)
    shared.push(modelSlots)
    // At 0 from the start, for an increase() alert: local admissions while sluice_redis_up is 1 are calls over budget.
    metrics.redisLocalAdmissions.inc({ model: model.name }, 0)
    const hooks = { freedWhileAway: () => peers.freed(model.name), admittedLocally: () => metrics.redisLocalAdmissions.inc({ model: model.name }), clock }
    slots.set(model.name, new FailoverModelSlots(modelSlots, local, link, hooks))
  }
  const sharedKeys = new RedisKeyLimiter(link)
  const healthBoard = new RedisHealthBoard(link, clock, logger, deps.healthSigner ?? link.replicaId)
  return {
    slots,
    healthBoard,
    keys: new FailoverKeyLimiter(sharedKeys, new MemoryKeyLimiter(clock), link, clock, (keyId) => peers.keyHeld(keyId)),
    reachable: () => link.up(),
    whenReachable: (withinMs) => untilUp(link, withinMs),
    close() {
      for (const modelSlots of slots.values()) modelSlots.close()
    },
    async disconnect() {
      for (const modelSlots of shared) modelSlots.dispose()
      sharedKeys.dispose()
      healthBoard.close()
      await link.close()
    },
  }
}

/** Whether the link is up, waiting up to `withinMs` for it to come up. */
function untilUp(link: RedisLink, withinMs: number): Promise<boolean> {
  if (link.up()) return Promise.resolve(true)
  return new Promise((resolve) => {
    const onUp = (): void => {
      clearTimeout(timer)
      resolve(true)
    }
    const timer = setTimeout(() => {
      link.off('up', onUp)
      resolve(false)
    }, withinMs)
    link.once('up', onUp)
  })
}
