/**
 * One model's slots and wait queue, shared by every replica through Redis
 * (README "Shared state (Redis)"). Each step is one Lua script
 * (redis-slot-calls.ts); this class keeps what this replica needs to answer
 * synchronously (its waiters, its leases, the shared counts last seen) and
 * the timers that keep its entries alive:
 *
 * - arrival: one script takes a free slot at once (empty queue) or queues;
 * - release: one script hands the slot to the global head waiter, whichever
 *   replica holds it (told through its pub/sub channel, or in the answer);
 * - a slot freed without a taker (a backend usable only elsewhere, expired
 *   leases) is announced on the model's channel, and every second or so
 *   (backstop) a replica with waiters re-checks, heartbeats and picks up
 *   grants whose message was lost;
 * - leases are renewed every TTL/3, so a dead replica's slots expire.
 *
 * A call that cannot reach Redis rejects the acquire with RedisUnavailable,
 * and so do waiters when Redis goes away: the caller (failover-model-slots.ts)
 * admits them on local limits.
 */
import type { Clock } from '../context.js'
import { remainingWaitMs } from '../scheduling/admission.js'
import type { RedisLink } from './redis-link.js'
import { RedisUnavailable } from './redis-unavailable.js'
import type { ReplicaMessage } from './replica-message.js'
import { SlotCalls, type SlotReply } from './redis-slot-calls.js'
import { RedisLeases } from './redis-leases.js'
import { RedisWaiters, type Waiter } from './redis-waiters.js'
import { bodiesRefusal, slotRefusal } from './slot-refusals.js'
import { NO_EXCLUSIONS, type AdmissionObserver, type AdmissionRefused, type ModelSlots, type ModelSlotSettings, type SlotLease, type SlotRejection, type SlotRequest } from './store.js'
import { observedLease } from './observed-lease.js'
import { CoalescedRun } from './coalesced-run.js'

const NONE: ReadonlySet<string> = new Set()

export class RedisModelSlots implements ModelSlots {
  readonly #settings: ModelSlotSettings
  readonly #clock: Clock
  readonly #observer: AdmissionObserver
  readonly #link: RedisLink
  readonly #calls: SlotCalls
  readonly #leases: RedisLeases
  readonly #waiters: RedisWaiters
  readonly #serving: CoalescedRun
  /** The waiter a claim is out for: the backstop must not call it gone before the claim's answer is read. */
  #claimingFor: string | null = null
  #closed = false

  constructor(settings: ModelSlotSettings, clock: Clock, observer: AdmissionObserver, link: RedisLink) {
    this.#settings = settings
    this.#clock = clock
    this.#observer = observer
    this.#link = link
    this.#calls = new SlotCalls(link, settings)
    this.#serving = new CoalescedRun(() => this.#link.track(this.#serveQueue()))
    this.#leases = new RedisLeases(settings, this.#calls, link, clock, (reply) => this.#absorb(reply))
    const events = {
      leave: (waiter: Waiter, cause: 'aborted' | 'timed_out') => this.#leave(waiter, cause === 'aborted' ? waiter.request.signal.reason : this.#refusal('queue_timeout')),
      tick: this.#sync,
    }
    this.#waiters = new RedisWaiters(events, link.timings.backstopMs, settings.bodyBudget)
    link.subscribe(this.#calls.keys.freedChannel, (publisher) => {
      if (publisher !== link.replicaId) this.#serve()
    })
    link.listen(settings.model, (message) => this.#onMessage(message))
    link.on('down', this.#onDown)
    link.on('reconcile', this.#reconcile)
    link.on('resync', this.#sync)
  }

  acquire(request: SlotRequest): Promise<SlotLease> {
    if (request.signal.aborted) return Promise.reject(request.signal.reason)
    if (this.#closed) return this.#drainingAcquire(request)
    return new Promise<SlotLease>((resolve, reject) => {
      const now = this.#clock.now()
      const arrivedAt = request.arrivedAt ?? now
      const waiter = this.#waiters.add(this.#link.newId(), request, arrivedAt, remainingWaitMs(arrivedAt, this.#settings.maxWaitMs, now), { resolve, reject })
      // A throw past the call's own handling fails the request rather than the process.
      this.#arrive(waiter).catch((error: unknown) => this.#waiters.drop(waiter, error))
    })
  }

  /** Also while draining: a retry belongs to a request in flight, which the drain lets finish. */
  tryAcquire(exclude: ReadonlySet<string>, choose: SlotRequest['choose']): Promise<SlotLease | null> {
    return this.#tryNow(exclude, choose, this.#clock.now(), true)
  }

  /**
   * Draining: only requests that arrived before it get here (app.ts turns
   * later ones away at the door), such as one whose body was still coming.
   * A free slot is theirs; nothing waits, since waiters were turned away.
   */
  async #drainingAcquire(request: SlotRequest): Promise<SlotLease> {
    const lease = await this.#tryNow(NO_EXCLUSIONS, request.choose, request.arrivedAt ?? this.#clock.now(), false)
    if (lease === null) throw this.#refusal('shutting_down')
    return lease
  }

  async #tryNow(exclude: ReadonlySet<string>, choose: SlotRequest['choose'], arrivedAt: number, retry: boolean): Promise<SlotLease | null> {
    const id = this.#link.newId()
    const attempt = (preferred: string) => this.#link.budgeted(this.#calls.acquire(id, 0, preferred, 'try', exclude), (late) => this.#undoArrival(id, late))
    const reply = await this.#leases.untilChosen(choose, exclude, attempt)
    return reply?.status === 'granted' ? this.#lease(reply.backend, id, arrivedAt, retry) : null
  }

  wake(): void {
    this.#serve()
  }

  queueDepth(): number {
    return this.#waiters.depth
  }

  inFlight(backend: string): number {
    return this.#leases.inFlight(backend)
  }

  load(backend: string): number {
    return this.#leases.load(backend)
  }

  /** Requests this replica admitted on local limits while Redis was away: counted in Redis too from now on. */
  adopt(leases: readonly (readonly [id: string, backend: string])[]): void {
    if (leases.length > 0) this.#leases.adopt(leases)
  }

  /** An adopted request ended: its lease leaves Redis and the slot goes to the global head. */
  releaseAdopted(id: string, backend: string): void {
    this.#leases.remove(id)
    this.#fire(this.#calls.release(id, backend))
  }

  /** Waiters whose arrival call is still out leave Redis when its answer comes (`#arrive`). */
  turnAway(error: unknown): void {
    const queued = this.#waiters.all().filter((w) => this.#waiters.drop(w, error)).map((w) => w.id)
    if (queued.length > 0) this.#fire(this.#calls.leave(queued))
  }

  close(): void {
    this.#closed = true
    this.turnAway(this.#refusal('shutting_down'))
  }

  /** Stops timers and listeners (the connection is closed after this). */
  dispose(): void {
    this.#waiters.dispose()
    this.#leases.dispose()
    this.#link.off('down', this.#onDown)
    this.#link.off('reconcile', this.#reconcile)
    this.#link.off('resync', this.#sync)
  }

  async #arrive(waiter: Waiter): Promise<void> {
    const mode = this.#waiters.holdBody(waiter) ? 'queue' : 'now'
    const attempt = (preferred: string) =>
      this.#link.budgeted(this.#calls.acquire(waiter.id, waiter.priority, preferred, mode, NONE), (late) => this.#undoArrival(waiter.id, late))
    let reply: SlotReply | null
    try {
      reply = await this.#leases.untilChosen(waiter.request.choose, NONE, attempt, () => waiter.phase === 'calling')
    } catch (error) {
      this.#waiters.drop(waiter, error instanceof RedisUnavailable ? error : new RedisUnavailable(String(error)))
      return
    }
    if (reply === null) {
      // Its last answer (`room`) left it queued in Redis.
      this.#fire(this.#calls.leave([waiter.id]))
      return void this.#waiters.drop(waiter, new RedisUnavailable('other replicas kept taking the free slots first'))
    }
    // Left (abort, timeout, eviction) or handed a slot while the call was out.
    if (waiter.phase !== 'calling') {
      if (waiter.phase === 'left') this.#undoArrival(waiter.id, reply)
      return
    }
    if (reply.status === 'granted') this.#grant(waiter, reply.backend)
    else if (reply.status === 'queued') this.#waiters.queued(waiter, reply.seq ?? 0)
    else if (reply.status === 'none' && this.#settings.bodyBudget !== undefined) this.#waiters.drop(waiter, bodiesRefusal(this.#settings.bodyBudget, waiter.request.bodyBytes ?? 0))
    else this.#waiters.drop(waiter, this.#refusal('queue_full'))
  }

  /** An arrival whose answer nobody waits for any more: gives back what it got (`room` leaves it queued). */
  #undoArrival(id: string, reply: SlotReply): void {
    if (reply.status === 'granted') this.#fire(this.#calls.release(id, reply.backend))
    else if (reply.status === 'queued' || reply.status === 'room') this.#fire(this.#calls.leave([id]))
    if (reply.evicted !== undefined) this.#evicted(reply.evicted)
  }

  /**
   * Hands the slot over. Should that throw (the lease's bookkeeping, the
   * observer), the waiter fails with the error and the slot goes back:
   * otherwise the request would never settle and its lease, already in this
   * replica's list, would be renewed for as long as the process runs.
   */
  #grant(waiter: Waiter, backend: string): void {
    if (!this.#waiters.grant(waiter)) return
    let lease: SlotLease
    try {
      lease = this.#lease(backend, waiter.id, waiter.arrivedAt)
    } catch (error) {
      this.#leases.remove(waiter.id)
      this.#fire(this.#calls.release(waiter.id, backend))
      return waiter.reject(error)
    }
    waiter.resolve(lease)
  }

  /** Abort or timeout: a queued entry leaves Redis too (a calling one is undone when its answer comes). */
  #leave(waiter: Waiter, error: unknown): void {
    if (this.#waiters.drop(waiter, error)) this.#fire(this.#calls.leave([waiter.id]))
  }

  #evicted(id: string): void {
    const waiter = this.#waiters.get(id)
    if (waiter !== undefined) this.#waiters.drop(waiter, this.#refusal('queue_full'))
  }

  #lease(backend: string, id: string, arrivedAt: number, retry = false): SlotLease {
    this.#leases.add(id, backend)
    return observedLease({ model: this.#settings.model, backend, arrivedAt, retry }, this.#clock, this.#observer, () => {
      this.#leases.remove(id)
      this.#fire(this.#calls.release(id, backend))
    })
  }


  /**
   * What any answer may carry: shared counts, a waiter of this replica
   * evicted, slots handed to waiters of this replica. Answers come in order,
   * but their callbacks may run out of order: each is applied on its own.
   */
  #absorb(reply: SlotReply): void {
    this.#leases.observeCounts(reply.counts)
    if (reply.evicted !== undefined) this.#evicted(reply.evicted)
    for (let i = 0; i + 1 < reply.handed.length; i += 2) this.#deliver(reply.handed[i]!, reply.handed[i + 1]!)
  }

  /** A slot handed to waiter `id`: it takes it, or (gone meanwhile) passes it on. */
  #deliver(id: string, backend: string): void {
    const waiter = this.#waiters.get(id)
    if (waiter !== undefined) return this.#grant(waiter, backend)
    if (this.#leases.holds(id)) return
    this.#fire(this.#calls.release(id, backend))
  }

  #onMessage(message: ReplicaMessage): void {
    if (message.kind === 'grant' && message.backend !== undefined && !this.#expired(message)) this.#deliver(message.id, message.backend)
    else if (message.kind === 'evict') this.#evicted(message.id)
  }

  /**
   * A grant read after its lease expired in Redis: this replica was frozen
   * (SIGSTOP, a long GC, a paused VM) past it, the lease and the grant are
   * gone there, and the slot may be someone else's. Used, it ran a backend
   * over its slots, the renewal putting the lease back (a Redis review).
   * Ignored, its waiter stays queued here and the heartbeat's answer says it
   * is gone (429 queue_full), as for a waiter dropped while frozen.
   */
  #expired(message: ReplicaMessage): boolean {
    const now = this.#calls.redisNow()
    return message.expires !== undefined && now !== null && now >= message.expires
  }

  /** Fire and forget: a failed call changes nothing here (leases expire by TTL, entries by heartbeat). */
  #fire(call: Promise<SlotReply>): void {
    call.then(
      (reply) => this.#absorb(reply),
      () => undefined,
    )
  }

  /** Claims slots for this replica's best waiters while they are the global head and a backend has room. */
  #serve(): void {
    if (!this.#closed && this.#waiters.depth > 0) this.#serving.request()
  }

  async #serveQueue(): Promise<void> {
    for (let head = this.#waiters.head(); head !== undefined && !this.#closed; head = this.#waiters.head()) {
      if (!(await this.#claimFor(head))) return
    }
  }

  /** True when the head got a slot or left, so the next one may try. */
  async #claimFor(head: Waiter): Promise<boolean> {
    let reply: SlotReply | null
    this.#claimingFor = head.id
    try {
      reply = await this.#leases.untilChosen(head.request.choose, NONE, (preferred) => this.#calls.claim(head.id, preferred), () => head.phase === 'queued')
    } catch {
      return false
    } finally {
      this.#claimingFor = null
    }
    if (reply === null) return false
    if (head.phase !== 'queued') {
      if (head.phase === 'left' && reply.status === 'granted') this.#fire(this.#calls.release(head.id, reply.backend))
      return true
    }
    if (reply.status === 'granted') {
      this.#grant(head, reply.backend)
      return true
    }
    // Not in the queue any more: evicted (its message lost) or dropped while this replica looked dead.
    if (reply.status === 'gone') return this.#waiters.drop(head, this.#refusal('queue_full'))
    return false
  }

  /** Backstop: heartbeat, grants whose message was lost, entries that are gone; then serve. */
  readonly #sync = (): void => {
    const ids = this.#waiters.all().map((w) => w.id)
    if (ids.length === 0 || this.#closed) return
    this.#calls.sync(ids).then(
      (reply) => {
        this.#absorb(reply)
        for (let i = 0; i + 1 < reply.granted.length; i += 2) this.#deliver(reply.granted[i]!, reply.granted[i + 1]!)
        for (const id of reply.gone) {
          const waiter = this.#waiters.get(id)
          if (waiter?.phase === 'queued' && id !== this.#claimingFor) this.#waiters.drop(waiter, this.#refusal('queue_full'))
        }
        this.#serve()
      },
      () => undefined,
    )
  }

  /** Redis answers again (RedisLink's 'reconcile'): leases and queue entries of lost answers are dropped. */
  readonly #reconcile = (issuedBeforeUp: number): void => {
    if (this.#closed) return
    const kept = [...this.#leases.ids(), ...this.#waiters.all().map((waiter) => waiter.id)]
    this.#fire(this.#calls.reconcile(issuedBeforeUp, kept))
  }

  /** Redis went away: waiters are handed back to the caller, which admits them on local limits. */
  readonly #onDown = (): void => {
    for (const waiter of this.#waiters.all()) this.#waiters.drop(waiter, new RedisUnavailable('Redis became unreachable'))
  }

  #refusal(reason: SlotRejection): AdmissionRefused {
    return slotRefusal(reason, this.#settings.model, this.#settings.maxWaitMs)
  }
}
