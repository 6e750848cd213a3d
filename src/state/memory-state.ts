/** Admission state kept in this process (`state.kind: memory`). */
import type { Clock } from '../context.js'
import type { GatewayConfig } from '../config/resolve.js'
import { MemoryKeyLimiter } from './memory-key-limiter.js'
import { MemoryModelSlots } from './memory-slots.js'
import { NO_PEERS, type SlotPeers } from './slot-peers.js'
import type { BodyBudget } from '../scheduling/queued-bodies.js'
import type { AdmissionObserver, AdmissionState, ModelSlots, ModelSlotSettings } from './store.js'

/** The slot settings of one configured model. */
export function modelSlotSettings(model: GatewayConfig['models'][number], usable: (model: string, backend: string) => boolean, bodyBudget?: BodyBudget): ModelSlotSettings {
  return {
    bodyBudget,
    model: model.name,
    backends: model.backends.map((b) => b.name),
    slotsPerBackend: model.max_concurrency_per_backend,
    maxQueue: model.queue.max_size,
    maxWaitMs: model.queue.max_wait_ms,
    usable: (backend: string) => usable(model.name, backend),
  }
}

/**
 * A model's local slots as the other generations' requests concern them
 * (after a reload): their requests on the same backend count against its
 * slots, a slot freed here with no taker is offered to them, the serving
 * generation's limit holds, and the queues are served and bounded as one. `ownHeld`:
 * requests this replica runs under another store's leases (Redis mode's).
 */
export function peerCounted(model: GatewayConfig['models'][number], peers: SlotPeers, ownHeld: (backend: string) => number = () => 0): Pick<ModelSlotSettings, 'elsewhere' | 'onFreed' | 'limit' | 'peerAhead' | 'peerQueued' | 'peerWorst'> {
  const urls = new Map(model.backends.map((b) => [b.name, b.url]))
  const own = model.max_concurrency_per_backend
  return {
    elsewhere: (backend) => ownHeld(backend) + peers.held(model.name, backend, urls.get(backend) ?? ''),
    onFreed: () => peers.freed(model.name),
    limit: (backend) => peers.limit(model.name, backend, urls.get(backend) ?? '') ?? own,
    peerAhead: (rank) => peers.headAhead(model.name, rank),
    peerQueued: () => peers.queued(model.name),
    peerWorst: () => peers.worst(model.name),
  }
}

export function buildMemoryState(
  config: GatewayConfig,
  usable: (model: string, backend: string) => boolean,
  clock: Clock,
  observer: AdmissionObserver,
  peers: SlotPeers = NO_PEERS,
  keys: MemoryKeyLimiter = new MemoryKeyLimiter(clock),
  bodyBudget?: BodyBudget,
): AdmissionState {
  const slots = new Map<string, ModelSlots>()
  for (const model of config.models) {
    slots.set(model.name, new MemoryModelSlots({ ...modelSlotSettings(model, usable, bodyBudget), ...peerCounted(model, peers) }, clock, observer))
  }
  return {
    slots,
    keys,
    reachable: () => true,
    whenReachable: () => Promise.resolve(true),
    close() {
      for (const modelSlots of slots.values()) modelSlots.close()
    },
    disconnect: async () => undefined,
  }
}
