/**
 * The other admission states in this process that count the same backends.
 * After a reload the retiring generation still runs (and queues) requests on
 * backends the new one serves too. Each memory store counts only its own
 * leases, so without peers a backend could briefly get twice its slots.
 * Peers count each other's leases on a backend (same model, backend name
 * and URL), and a slot one of them frees without a taker in its own queue
 * is offered to the others' queues.
 */
import type { WaiterRank } from '../scheduling/admission.js'

export interface SlotPeers {
  /** Requests the other states run on this backend right now. */
  held(model: string, backend: string, url: string): number
  /** A slot of `model` was freed and this state's own queue served: the others may have room now. */
  freed(model: string): void
  /** Requests of key `keyId` the other states run right now (Redis mode's local fallback counts them). */
  keyHeld(keyId: string): number
  /**
   * The backend's `max_concurrency_per_backend` in the serving generation's
   * configuration, when that is another state's and serves the same backend;
   * null otherwise. A retiring generation's waiters run under the limit the
   * operator just set: under their own, a raised limit left them waiting for
   * the backend to go idle while new arrivals took every slot.
   */
  limit(model: string, backend: string, url: string): number | null
  /**
   * Whether another state's next waiter for `model` comes before `rank` and
   * could be admitted now: the two queues of a reload are served as one, in
   * priority then arrival order, rather than the new one first.
   */
  headAhead(model: string, rank: WaiterRank): boolean
  /** Waiters for `model` in the other states' queues: `queue.max_size` bounds them all together. */
  queued(model: string): number
  /** The other states' waiter for `model` a full queue turns away first, and how to turn it away; null when none waits. */
  worst(model: string): PeerWaiter | null
}

export interface PeerWaiter {
  readonly rank: WaiterRank
  /** Turns it away with 429 queue_full, as its own queue would. */
  evict(): void
}

/** A state alone in its process (tests, benchmarks, the first generation before any reload). */
export const NO_PEERS: SlotPeers = { held: () => 0, freed: () => undefined, keyHeld: () => 0, limit: () => null, headAhead: () => false, queued: () => 0, worst: () => null }
