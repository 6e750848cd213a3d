/**
 * The shared-state interface behind admission: per-model slots and wait
 * queue, and per-key limits. `memory-slots.ts` and `memory-key-limiter.ts`
 * keep them in this process; the Redis ones make them global across
 * replicas (and the failover ones fall back to the memory ones while
 * Redis is away). Both kinds pass one contract suite (test/state/). What
 * may wait on the network (admission, charging tokens) returns a promise;
 * what reads or signals this replica's own view (depth, in flight, wake,
 * turn away) is synchronous.
 */
import type { KeyLimitSettings } from '../config/schema.js'
import type { HealthBoard } from './health-board.js'
import type { BodyBudget } from '../scheduling/queued-bodies.js'
import type { WaiterRank } from '../scheduling/admission.js'
import type { PeerWaiter } from './slot-peers.js'

export type SlotRejection = 'queue_full' | 'queue_timeout' | 'shutting_down'
export type KeyRejection = 'rate_limit_requests' | 'rate_limit_tokens' | 'concurrency'

/** Thrown (rejected) by `acquire` when a request will not get a slot. */
export class AdmissionRefused extends Error {
  readonly reason: SlotRejection | KeyRejection
  readonly retryAfterMs: number
  constructor(reason: SlotRejection | KeyRejection, retryAfterMs: number, message: string) {
    super(message)
    this.name = 'AdmissionRefused'
    this.reason = reason
    this.retryAfterMs = retryAfterMs
  }
}

/**
 * What a queue reads of "the client went away". An AbortSignal is one; the
 * chat path passes a lighter ClientDeparture (src/proxy/client-departure.ts).
 */
export interface DepartureSignal {
  readonly aborted: boolean
  readonly reason: unknown
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}

export interface SlotRequest {
  readonly priority: number
  /** Aborted when the client goes away: the request leaves the queue. */
  readonly signal: DepartureSignal
  /** Picks one backend among those with a free slot (the balancer). */
  readonly choose: (candidates: readonly string[]) => string
  /** The size of the request's body, held for as long as it waits (the settings' bodyBudget). [0] */
  readonly bodyBytes?: number
  /**
   * When the request first asked for this slot (the clock's ms). Its wait
   * limit and its reported wait run from here: a request an outage moves
   * between Redis and the local queue keeps one `max_wait_ms` in all. [now]
   */
  readonly arrivedAt?: number
}

export interface SlotLease {
  readonly backend: string
  /** When the lease was granted (queue wait = grantedAt - arrival). */
  readonly waitedMs: number
  /** Gives the slot back; safe to call more than once. */
  release(): void
}

export interface ModelSlots {
  /** Waits for a slot in priority order; rejects with AdmissionRefused or the signal's abort reason. */
  acquire(request: SlotRequest): Promise<SlotLease>
  /** A slot now on a backend not in `exclude`, or null: no waiting (used for retries). */
  tryAcquire(exclude: ReadonlySet<string>, choose: SlotRequest['choose']): Promise<SlotLease | null>
  /** Re-examines the queue, e.g. after a backend became usable again. */
  wake(): void
  /** Whether this store's next waiter comes before `rank` and could be admitted now (see ModelSlotSettings.peerAhead). [never] */
  headAhead?(rank: WaiterRank): boolean
  /** The waiter a full queue turns away first, if any waits. [none] */
  worstWaiter?(): WaiterRank | undefined
  /** Turns that waiter away with queue_full (another store's arrival needs its place). */
  evictWorst?(): void
  queueDepth(): number
  /** Requests this store admitted that are on `backend` now (the in-flight gauge). */
  inFlight(backend: string): number
  /**
   * Requests on `backend` as far as this store knows, for the balancer: its
   * own and, in memory mode, a reload's other generations'; in Redis mode
   * every replica's (the lease counts of the latest answer).
   */
  load(backend: string): number
  /**
   * Rejects every waiter with `error` (the model has no usable backend left:
   * they would wait for nothing); leases stay valid, later arrivals queue.
   */
  turnAway(error: unknown): void
  /** Rejects every waiter with `shutting_down`; in-flight leases stay valid. */
  close(): void
}

/** A first attempt excludes no backend (one shared set, not one per request). */
export const NO_EXCLUSIONS: ReadonlySet<string> = new Set()

/** The ticket of a request with no key limits to count against. */
export const UNLIMITED_TICKET: KeyTicket = { chargeTokens: async () => undefined, release: () => undefined }

export interface KeyTicket {
  /** Charges an answer's prompt + completion tokens against the key's budget. */
  chargeTokens(tokens: number): Promise<void>
  /** Ends the request's share of the key's concurrency; safe to call more than once. */
  release(): void
}

/** Requests and tokens counted against a key's per-minute limits. */
export interface MinuteUse {
  readonly requests: number
  readonly tokens: number
}

export interface KeyLimiter {
  /** Admits one request of the key or rejects with AdmissionRefused. */
  admit(keyId: string, limits: KeyLimitSettings): Promise<KeyTicket>
  /**
   * Requests of the key this limiter admitted that still run, for another
   * generation's limits to count. Read only by Redis mode's local fallback:
   * memory mode's generations share one limiter, which counts them already.
   * [not said]
   */
  running?(keyId: string): number
}

/** Notified of what admission does, for metrics (queue depths are read at scrape time: ModelSlots.queueDepth). */
export interface AdmissionObserver {
  slotTaken(model: string, backend: string): void
  slotReleased(model: string, backend: string): void
  waited(model: string, milliseconds: number): void
}

/** What `state.kind` builds: every model's slots and the keys' limits, in this process or shared. */
export interface AdmissionState {
  readonly slots: ReadonlyMap<string, ModelSlots>
  readonly keys: KeyLimiter
  /** Backend health verdicts shared with other replicas (Redis mode); absent: nothing shared. */
  readonly healthBoard?: HealthBoard
  /** False while a shared store (Redis) is unreachable and admission runs on local limits. */
  reachable(): boolean
  /** Resolves true once reachable (at once when it is), false when `withinMs` pass first. */
  whenReachable(withinMs: number): Promise<boolean>
  /** Turns every waiter away (shutdown); in-flight leases stay valid. */
  close(): void
  /** Frees connections and timers, once no lease is held any more (after `close()` and the drain). */
  disconnect(): Promise<void>
}

/** One model's slot settings, as every slot store takes them. */
export interface ModelSlotSettings {
  readonly model: string
  readonly backends: readonly string[]
  readonly slotsPerBackend: number
  readonly maxQueue: number
  readonly maxWaitMs: number
  /** False for a backend that must get no new requests (unhealthy). */
  readonly usable: (backend: string) => boolean
  /**
   * Requests this replica runs on the backend under another store's leases
   * (Redis leases still running while Redis is away): they count against
   * the backend's slots too. [none]
   */
  readonly elsewhere?: (backend: string) => number
  /** Called when a slot was freed and this queue served: another store may have a taker. [none] */
  readonly onFreed?: () => void
  /**
   * The backend's concurrency limit when another store's configuration says
   * it (a reload's serving generation, for the retiring one's waiters).
   * [slotsPerBackend]
   */
  readonly limit?: (backend: string) => number
  /** Whether another store's waiter comes before this rank and could be admitted now (admission.ts comesBefore). [never] */
  readonly peerAhead?: (rank: WaiterRank) => boolean
  /** Waiters in the other stores' queues of this model, counted against maxQueue too. [0] */
  readonly peerQueued?: () => number
  /** The other stores' waiter a full queue turns away first. [none] */
  readonly peerWorst?: () => PeerWaiter | null
  /** The bodies of waiting requests, counted with every other model's (queued-bodies.ts). [not counted] */
  readonly bodyBudget?: BodyBudget
}
