/**
 * This replica's waiters of one model in Redis mode: the ones whose arrival
 * call is still out (`calling`) and the ones in the shared queue
 * (`queued`), the latter in the global order (priority, then the shared
 * arrival counter), so the local head is this replica's best claim. While
 * any exists, a backstop timer ticks (heartbeat and re-check).
 */
import { WaitQueue, type QueueEntry } from '../scheduling/wait-queue.js'
import type { BodyBudget } from '../scheduling/queued-bodies.js'
import type { SlotLease, SlotRequest } from './store.js'

export interface Waiter extends QueueEntry {
  readonly id: string
  readonly request: SlotRequest
  readonly arrivedAt: number
  seq: number
  phase: 'calling' | 'queued' | 'granted' | 'left'
  /** Bytes of its body counted in the body budget while it waits (0: none). */
  heldBytes: number
  resolve(lease: SlotLease): void
  reject(error: unknown): void
  cleanup(): void
}

export interface WaiterEvents {
  /** The waiter's client went away, or its max wait is over: it should leave. */
  leave(waiter: Waiter, cause: 'aborted' | 'timed_out'): void
  /** Every `tickMs` while any waiter exists. */
  tick(): void
}

export class RedisWaiters {
  readonly #events: WaiterEvents
  readonly #tickMs: number
  readonly #budget: BodyBudget | undefined
  readonly #byId = new Map<string, Waiter>()
  readonly #queue = new WaitQueue<Waiter>()
  #ticker: NodeJS.Timeout | null = null

  constructor(events: WaiterEvents, tickMs: number, budget?: BodyBudget) {
    this.#events = events
    this.#tickMs = tickMs
    this.#budget = budget
  }

  /** A new waiter, calling; it leaves on its request's abort or after `waitMs` (what is left of its wait limit). */
  add(id: string, request: SlotRequest, arrivedAt: number, waitMs: number, settle: Pick<Waiter, 'resolve' | 'reject'>): Waiter {
    const onAbort = () => this.#events.leave(waiter, 'aborted')
    const timer = setTimeout(() => this.#events.leave(waiter, 'timed_out'), waitMs)
    const waiter: Waiter = {
      id,
      priority: request.priority,
      seq: 0,
      positions: new Map(),
      request,
      arrivedAt,
      phase: 'calling',
      heldBytes: 0,
      ...settle,
      cleanup: () => {
        clearTimeout(timer)
        request.signal.removeEventListener('abort', onAbort)
      },
    }
    request.signal.addEventListener('abort', onAbort, { once: true })
    this.#byId.set(id, waiter)
    if (this.#ticker === null) {
      this.#ticker = setInterval(() => this.#events.tick(), this.#tickMs)
      this.#ticker.unref()
    }
    return waiter
  }

  get(id: string): Waiter | undefined {
    return this.#byId.get(id)
  }

  all(): Waiter[] {
    return [...this.#byId.values()]
  }

  /** This replica's best queued waiter. */
  head(): Waiter | undefined {
    return this.#queue.peek()
  }

  get depth(): number {
    return this.#queue.size
  }

  /**
   * Counts the waiter's body in the budget before its arrival, so that it may
   * queue; given back when it is forgotten (granted at once included). False
   * when the body would pass the budget: the arrival may then only take a free
   * slot at once (mode 'now'), and no waiter is evicted for it.
   */
  holdBody(waiter: Waiter): boolean {
    const bytes = waiter.request.bodyBytes ?? 0
    if (this.#budget === undefined) return true
    if (!this.#budget.take(bytes)) return false
    waiter.heldBytes = bytes
    return true
  }

  queued(waiter: Waiter, seq: number): void {
    waiter.phase = 'queued'
    waiter.seq = seq
    this.#queue.push(waiter)
  }

  /** Takes a calling or queued waiter out as granted; false when it was not waiting any more. */
  grant(waiter: Waiter): boolean {
    if (waiter.phase !== 'calling' && waiter.phase !== 'queued') return false
    waiter.phase = 'granted'
    this.#forget(waiter)
    return true
  }

  /** Ends a calling or queued waiter with `error`; true when it was queued (its entry must leave Redis). */
  drop(waiter: Waiter, error: unknown): boolean {
    if (waiter.phase !== 'calling' && waiter.phase !== 'queued') return false
    const wasQueued = waiter.phase === 'queued'
    waiter.phase = 'left'
    this.#forget(waiter)
    waiter.reject(error)
    return wasQueued
  }

  dispose(): void {
    this.#stopTicking()
  }

  #forget(waiter: Waiter): void {
    this.#byId.delete(waiter.id)
    waiter.cleanup()
    this.#budget?.release(waiter.heldBytes)
    waiter.heldBytes = 0
    this.#queue.remove(waiter)
    if (this.#byId.size === 0) this.#stopTicking()
  }

  #stopTicking(): void {
    if (this.#ticker === null) return
    clearInterval(this.#ticker)
    this.#ticker = null
  }
}
