/**
 * Pure admission decisions (DESIGN.md chat path step 2), with no timers, no
 * I/O and no state of their own, so each is tested on plain values.
 */
import { evictedBefore, type QueueEntry } from './wait-queue.js'

export type ArrivalDecision<T> =
  | { readonly kind: 'queue' }
  | { readonly kind: 'reject' }
  | { readonly kind: 'evict-and-queue'; readonly evicted: T }

/**
 * Whether an arriving request may wait. A full queue turns away the newest
 * request of the worst priority present: the arriving one, unless a worse
 * one is waiting, which then makes room.
 */
export function decideArrival<T extends QueueEntry>(size: number, maxSize: number, worst: T | undefined, arriving: QueueEntry): ArrivalDecision<T> {
  if (size < maxSize) return { kind: 'queue' }
  if (worst === undefined || !evictedBefore(worst, arriving)) return { kind: 'reject' }
  return { kind: 'evict-and-queue', evicted: worst }
}

/** Which backends can take one more request now: usable, and fewer in flight than `limit` says. */
export function backendsWithRoom<B>(backends: readonly B[], inFlight: (backend: B) => number, usable: (backend: B) => boolean, limit: (backend: B) => number): B[] {
  return backends.filter((b) => usable(b) && inFlight(b) < limit(b))
}

/**
 * When a model's queues together are full (a reload's two generations each
 * keep one), whether another queue's worst waiter is turned away rather than
 * this queue's choice: the arriving request, or `ownEvicted` when this
 * queue would evict its own worst for it. Worse priority goes first, then
 * the later arrival; the arriving request is the newest of all, so a tie
 * with it keeps the other queue's waiter.
 */
export function peerEvictedInstead(peerWorst: WaiterRank, ownEvicted: WaiterRank | undefined, arriving: WaiterRank): boolean {
  if (!turnedAwayFirst(peerWorst, arriving)) return false
  return ownEvicted === undefined || turnedAwayFirst(peerWorst, ownEvicted)
}

/** Across queues: the worse priority, then the later arrival. */
export function turnedAwayFirst(a: WaiterRank, b: WaiterRank): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.arrivedAt > b.arrivedAt
}

/** A waiter as another queue of the same model sees it. */
export interface WaiterRank {
  readonly priority: number
  readonly arrivedAt: number
}

/**
 * Whether a waiter of one queue comes before one of another queue of the
 * same model (a reload's two generations each keep one): lower priority,
 * then earlier arrival, as within a queue (DESIGN.md chat path step 2).
 * Arrivals in the same millisecond: neither, so each queue serves its own
 * and neither waits for the other.
 */
export function comesBefore(a: WaiterRank, b: WaiterRank): boolean {
  return a.priority !== b.priority ? a.priority < b.priority : a.arrivedAt < b.arrivedAt
}

/** `Retry-After` in whole seconds, at least 1: a client told "0" would retry at once. */
export function retryAfterSeconds(milliseconds: number): number {
  return Math.max(1, Math.ceil(milliseconds / 1000))
}

/**
 * How long a waiter may still wait: its limit less what it has waited since
 * it first asked (never negative). A request moved between queues keeps the
 * one limit it arrived with.
 */
export function remainingWaitMs(arrivedAt: number, maxWaitMs: number, now: number): number {
  return Math.max(0, arrivedAt + maxWaitMs - now)
}
