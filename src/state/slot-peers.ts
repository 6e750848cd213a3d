/**
 * The other admission states in this process that count the same backends.
 * After a reload the retiring generation still runs (and queues) requests on
 * backends the new one serves too. Each memory store counts only its own
 * leases, so without peers a backend could briefly get twice its slots.
 * Peers count each other's leases on a backend (same model, backend name
 * and URL), and a slot one of them frees without a taker in its own queue
 * is offered to the others' queues.
 */
export interface SlotPeers {
  /** Requests the other states run on this backend right now. */
  held(model: string, backend: string, url: string): number
  /** A slot of `model` was freed and this state's own queue served: the others may have room now. */
  freed(model: string): void
  /** Requests of key `keyId` the other states run right now (Redis mode's local fallback counts them). */
  keyHeld(keyId: string): number
}

/** A state alone in its process (tests, benchmarks, the first generation before any reload). */
export const NO_PEERS: SlotPeers = { held: () => 0, freed: () => undefined, keyHeld: () => 0 }
