/** Admission state kept in this process (`state.kind: memory`). */
import type { Clock } from '../context.js'
import type { GatewayConfig } from '../config/resolve.js'
import { MemoryKeyLimiter } from './memory-key-limiter.js'
import { MemoryModelSlots } from './memory-slots.js'
import type { AdmissionObserver, KeyLimiter, ModelSlots } from './store.js'

export interface AdmissionState {
  readonly slots: ReadonlyMap<string, ModelSlots>
  readonly keys: KeyLimiter
  /** Turns every waiter away (shutdown); in-flight leases stay valid. */
  close(): void
}

export function buildMemoryState(
  config: GatewayConfig,
  usable: (model: string, backend: string) => boolean,
  clock: Clock,
  observer: AdmissionObserver,
): AdmissionState {
  const slots = new Map<string, ModelSlots>()
  for (const model of config.models) {
    const settings = {
      model: model.name,
      backends: model.backends.map((b) => b.name),
      slotsPerBackend: model.max_concurrency_per_backend,
      maxQueue: model.queue.max_size,
      maxWaitMs: model.queue.max_wait_ms,
      usable: (backend: string) => usable(model.name, backend),
    }
    slots.set(model.name, new MemoryModelSlots(settings, clock, observer))
  }
  return {
    slots,
    keys: new MemoryKeyLimiter(clock),
    close() {
      for (const modelSlots of slots.values()) modelSlots.close()
    },
  }
}
