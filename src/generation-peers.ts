/**
 * The slot peers of one generation (state/slot-peers.ts): every other
 * generation still answering requests on the listener. Memory-mode stores
 * count them always; in Redis mode the leases of all generations live in
 * Redis, and only the local fallback used while Redis is away counts them.
 */
import type { Generation } from './generation.js'
import type { PeerWaiter, SlotPeers } from './state/slot-peers.js'
import { turnedAwayFirst } from './scheduling/admission.js'
import { inTurn } from './state/wake-turns.js'

/** `self` is read at call time: the generation does not exist yet when its peers are made. */
export function generationPeers(self: () => Generation | null, live: () => readonly Generation[]): SlotPeers {
  return {
    held(model, backend, url) {
      let count = 0
      for (const other of live()) {
        if (other !== self() && servesBackend(other, model, backend, url)) count += other.context.state.slots.get(model)?.inFlight(backend) ?? 0
      }
      return count
    },
    freed(model) {
      inTurn(() => {
        for (const other of live()) if (other !== self()) other.context.state.slots.get(model)?.wake()
      })
    },
    keyHeld(keyId) {
      let count = 0
      for (const other of live()) if (other !== self()) count += other.context.state.keys.running?.(keyId) ?? 0
      return count
    },
    limit(model, backend, url) {
      const serving = live()[0]
      if (serving === undefined || serving === self()) return null
      return servesBackend(serving, model, backend, url) ? (serving.config.models.find((m) => m.name === model)?.max_concurrency_per_backend ?? null) : null
    },
    headAhead(model, rank) {
      for (const other of live()) {
        if (other !== self() && other.context.state.slots.get(model)?.headAhead?.(rank) === true) return true
      }
      return false
    },
    queued(model) {
      let count = 0
      for (const other of live()) if (other !== self()) count += other.context.state.slots.get(model)?.queueDepth() ?? 0
      return count
    },
    worst(model) {
      let found: PeerWaiter | null = null
      for (const other of live()) {
        const slots = other === self() ? undefined : other.context.state.slots.get(model)
        const rank = slots?.worstWaiter?.()
        if (slots === undefined || rank === undefined) continue
        if (found === null || turnedAwayFirst(rank, found.rank)) found = { rank, evict: () => slots.evictWorst?.() }
      }
      return found
    },
  }
}

/** The same model on the same server: a backend renamed or moved to another URL is another backend. */
function servesBackend(generation: Generation, model: string, backend: string, url: string): boolean {
  return generation.config.models.some((m) => m.name === model && m.backends.some((b) => b.name === backend && b.url === url))
}
