/**
 * One model's slots and wait queue, in this process. A released slot goes
 * to the head of the queue synchronously, in the same tick (no polling).
 */
import type { Clock } from '../context.js'
import { backendsWithRoom, comesBefore, decideArrival, peerEvictedInstead, remainingWaitMs, type WaiterRank } from '../scheduling/admission.js'
import { WaitQueue, type QueueEntry } from '../scheduling/wait-queue.js'
import { bodiesRefusal, slotRefusal } from './slot-refusals.js'
import { observedLease } from './observed-lease.js'
import { afterQueuedWakes } from './wake-turns.js'
import { NO_EXCLUSIONS, type AdmissionObserver, type AdmissionRefused, type ModelSlots, type ModelSlotSettings, type SlotLease, type SlotRejection, type SlotRequest } from './store.js'

interface Waiter extends QueueEntry {
  readonly request: SlotRequest
  readonly arrivedAt: number
  resolve(lease: SlotLease): void
  reject(error: unknown): void
  cleanup(): void
}


export class MemoryModelSlots implements ModelSlots {
  readonly #settings: ModelSlotSettings
  readonly #clock: Clock
  readonly #observer: AdmissionObserver
  readonly #inFlight = new Map<string, number>()
  readonly #queue = new WaitQueue<Waiter>()
  #seq = 0
  #closed = false

  constructor(settings: ModelSlotSettings, clock: Clock, observer: AdmissionObserver) {
    this.#settings = settings
    this.#clock = clock
    this.#observer = observer
  }

  acquire(request: SlotRequest): Promise<SlotLease> {
    if (request.signal.aborted) return Promise.reject(request.signal.reason)
    const arrivedAt = request.arrivedAt ?? this.#clock.now()
    if (this.#closed) return this.#drainingAcquire(request, arrivedAt)
    const behindPeer = this.#peerAhead(request.priority, arrivedAt)
    if (this.#queue.size === 0 && !behindPeer) {
      try {
        const lease = this.#grantNow(request.choose, NO_EXCLUSIONS, arrivedAt)
        if (lease !== null) return Promise.resolve(lease)
      } catch (error) {
        return Promise.reject(error)
      }
    }
    return new Promise<SlotLease>((resolve, reject) => {
      this.#enqueue(request, arrivedAt, resolve, reject)
      // Queued behind another generation's waiter: it takes its slot, and what room it leaves is this queue's.
      if (behindPeer) this.#serveQueue()
    })
  }

  /** Also while draining: a retry belongs to a request in flight, which the drain lets finish. */
  async tryAcquire(exclude: ReadonlySet<string>, choose: SlotRequest['choose']): Promise<SlotLease | null> {
    return this.#grantNow(choose, exclude, this.#clock.now(), true)
  }

  /**
   * Draining: only requests that arrived before it get here (app.ts turns
   * later ones away at the door), such as one whose body was still coming.
   * A free slot is theirs; nothing waits, since waiters were turned away.
   */
  #drainingAcquire(request: SlotRequest, arrivedAt: number): Promise<SlotLease> {
    try {
      const lease = this.#grantNow(request.choose, NO_EXCLUSIONS, arrivedAt)
      return lease !== null ? Promise.resolve(lease) : Promise.reject(this.#refusal('shutting_down'))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  wake(): void {
    this.#serveQueue()
  }

  worstWaiter(): WaiterRank | undefined {
    return this.#queue.worst()
  }

  evictWorst(): void {
    const worst = this.#queue.worst()
    if (worst !== undefined) this.#leave(worst, this.#refusal('queue_full'))
  }

  headAhead(rank: WaiterRank): boolean {
    const head = this.#queue.peek()
    return head !== undefined && comesBefore(head, rank) && this.#room(NO_EXCLUSIONS).length > 0
  }

  queueDepth(): number {
    return this.#queue.size
  }

  inFlight(backend: string): number {
    return this.#inFlight.get(backend) ?? 0
  }

  load(backend: string): number {
    return this.inFlight(backend) + (this.#settings.elsewhere?.(backend) ?? 0)
  }

  turnAway(error: unknown): void {
    for (const waiter of this.#queue.drain()) {
      waiter.cleanup()
      waiter.reject(error)
    }
  }

  close(): void {
    this.#closed = true
    this.turnAway(this.#refusal('shutting_down'))
  }

  #enqueue(request: SlotRequest, arrivedAt: number, resolve: Waiter['resolve'], reject: Waiter['reject']): void {
    const bytes = request.bodyBytes ?? 0
    const waiter: Waiter = {
      priority: request.priority,
      seq: this.#seq++,
      positions: new Map(),
      request,
      arrivedAt,
      resolve,
      reject,
      cleanup: () => {
        clearTimeout(timer)
        request.signal.removeEventListener('abort', onAbort)
        this.#settings.bodyBudget?.release(bytes)
      },
    }
    // Full counts every generation's waiters (a reload's two queues are one, in max_size too).
    const decision = decideArrival(this.#queue.size + (this.#settings.peerQueued?.() ?? 0), this.#settings.maxQueue, this.#queue.worst(), waiter)
    const peer = decision.kind === 'queue' ? null : (this.#settings.peerWorst?.() ?? null)
    const evictPeer = peer !== null && peerEvictedInstead(peer.rank, decision.kind === 'evict-and-queue' ? decision.evicted : undefined, waiter)
    if (decision.kind === 'reject' && !evictPeer) {
      reject(this.#refusal('queue_full'))
      return
    }
    const budget = this.#settings.bodyBudget
    if (budget !== undefined && !budget.take(bytes)) {
      reject(bodiesRefusal(budget, bytes))
      return
    }
    if (evictPeer) peer.evict()
    else if (decision.kind === 'evict-and-queue') this.#leave(decision.evicted, this.#refusal('queue_full'))
    const onAbort = () => this.#leave(waiter, request.signal.reason)
    const timer = setTimeout(() => this.#leave(waiter, this.#refusal('queue_timeout')), remainingWaitMs(arrivedAt, this.#settings.maxWaitMs, this.#clock.now()))
    request.signal.addEventListener('abort', onAbort, { once: true })
    this.#queue.push(waiter)
  }

  #leave(waiter: Waiter, error: unknown): void {
    if (!this.#queue.remove(waiter)) return
    waiter.cleanup()
    waiter.reject(error)
  }

  /**
   * Grants to the queue's head while there is room; a head whose grant throws fails with the error, and the next one tries.
   * A head another generation's waiter comes before lets that one be served first (it takes its slot or leaves its queue).
   */
  #serveQueue(): void {
    for (let head = this.#queue.peek(); head !== undefined; head = this.#queue.peek()) {
      if (this.#peerAhead(head.priority, head.arrivedAt)) {
        this.#settings.onFreed?.()
        // That wake-up only queued (one is running, wake-turns.ts): this queue serves again after it.
        if (this.#queue.peek() === head && this.#peerAhead(head.priority, head.arrivedAt)) return afterQueuedWakes(() => this.#serveQueue())
        continue
      }
      let lease: SlotLease | null
      try {
        lease = this.#grantNow(head.request.choose, NO_EXCLUSIONS, head.arrivedAt)
      } catch (error) {
        this.#queue.shift()
        head.cleanup()
        head.reject(error)
        continue
      }
      if (lease === null) break
      this.#queue.shift()
      head.cleanup()
      head.resolve(lease)
    }
  }

  #peerAhead(priority: number, arrivedAt: number): boolean {
    return this.#settings.peerAhead?.({ priority, arrivedAt }) ?? false
  }

  #room(exclude: ReadonlySet<string>): string[] {
    const { backends, slotsPerBackend, usable, elsewhere, limit } = this.#settings
    const taken = (b: string) => this.inFlight(b) + (elsewhere?.(b) ?? 0)
    return backendsWithRoom(backends, taken, (b) => usable(b) && !exclude.has(b), limit ?? (() => slotsPerBackend))
  }

  #grantNow(choose: SlotRequest['choose'], exclude: ReadonlySet<string>, arrivedAt: number, retry = false): SlotLease | null {
    const { model } = this.#settings
    const room = this.#room(exclude)
    if (room.length === 0) return null
    const backend = choose(room)
    this.#inFlight.set(backend, this.inFlight(backend) + 1)
    try {
      return observedLease({ model, backend, arrivedAt, retry }, this.#clock, this.#observer, () => {
        this.#inFlight.set(backend, this.inFlight(backend) - 1)
        this.#serveQueue()
        this.#settings.onFreed?.()
      })
    } catch (error) {
      // The slot was never handed over: it is not taken.
      this.#inFlight.set(backend, this.inFlight(backend) - 1)
      throw error
    }
  }

  #refusal(reason: SlotRejection): AdmissionRefused {
    return slotRefusal(reason, this.#settings.model, this.#settings.maxWaitMs)
  }
}
