/** Admission state kept in this process (`state.kind: memory`). */
import type { Clock } from '../context.js'
import type { HealthBoard } from './health-board.js'
import type { GatewayConfig } from '../config/resolve.js'
import { MemoryKeyLimiter } from './memory-key-limiter.js'
import { MemoryModelSlots, type ModelSlotSettings } from './memory-slots.js'
import { NO_PEERS, type SlotPeers } from './slot-peers.js'
import type { AdmissionObserver, KeyLimiter, ModelSlots } from './store.js'

export interface AdmissionState {
  readonly slots: ReadonlyMap<string, ModelSlots>
  readonly keys: KeyLimiter
  /** Backend health verdicts shared with other replicas (Redis mode); absent: nothing shared. */
  readonly healthBoard?: HealthBoard
  /** False while a shared store (Redis) is unreachable and admission runs on local limits. */
  reachable(): boolean
  /** Turns every waiter away (shutdown); in-flight leases stay valid. */
  close(): void
  /** Frees connections and timers, once no lease is held any more (after `close()` and the drain). */
  disconnect(): Promise<void>
}

/** The slot settings of one configured model. */
export function modelSlotSettings(model: GatewayConfig['models'][number], usable: (model: string, backend: string) => boolean): ModelSlotSettings {
  return {
    model: model.name,
    backends: model.backends.map((b) => b.name),
    slotsPerBackend: model.max_concurrency_per_backend,
    maxQueue: model.queue.max_size,
    maxWaitMs: model.queue.max_wait_ms,
    usable: (backend: string) => usable(model.name, backend),
  }
}

export function buildMemoryState(
  config: GatewayConfig,
  usable: (model: string, backend: string) => boolean,
  clock: Clock,
  observer: AdmissionObserver,
  peers: SlotPeers = NO_PEERS,
): AdmissionState {
  const slots = new Map<string, ModelSlots>()
  for (const model of config.models) {
    const urls = new Map(model.backends.map((b) => [b.name, b.url]))
    const settings = {
      ...modelSlotSettings(model, usable),
      // Another generation's requests on the same backend count against its slots (after a reload).
      elsewhere: (backend: string) => peers.held(model.name, backend, urls.get(backend) ?? ''),
      onFreed: () => peers.freed(model.name),
    }
    slots.set(model.name, new MemoryModelSlots(settings, clock, observer))
  }
  return {
    slots,
    keys: new MemoryKeyLimiter(clock),
    reachable: () => true,
    close() {
      for (const modelSlots of slots.values()) modelSlots.close()
    },
    disconnect: async () => undefined,
  }
}
