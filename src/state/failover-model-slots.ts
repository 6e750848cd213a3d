/**
 * Redis mode's outage behaviour for model slots (DESIGN.md "Shared state"):
 * each admission goes to the shared (Redis) store while Redis is reachable,
 * and to this replica's memory store when it is not, or when that one call
 * failed or ran over its budget. A lease is given back to the store that
 * granted it, so nothing granted during an outage is counted twice or leaks;
 * waiters queued in Redis when it goes away move to the local queue.
 * (failover-key-limiter.ts does the same for keys' limits.)
 */
import type { RedisLink } from './redis-link.js'
import { RedisUnavailable } from './redis-unavailable.js'
import type { DepartureSignal, ModelSlots, SlotLease, SlotRequest } from './store.js'
import type { Clock } from '../context.js'
import type { WaiterRank } from '../scheduling/admission.js'

const SYSTEM_CLOCK: Clock = { now: () => Date.now() }

/** The shared store as failover uses it: slots, and taking over requests admitted locally once Redis is back. */
export interface AdoptingModelSlots extends ModelSlots {
  adopt(leases: readonly (readonly [id: string, backend: string])[]): void
  releaseAdopted(id: string, backend: string): void
}

/** A local waiter's departure signal: its client left, or Redis answered again (it then queues there instead). */
class UntilRedisReturns implements DepartureSignal {
  aborted = false
  reason: unknown = undefined
  redisReturned = false
  readonly #client: DepartureSignal
  readonly #listeners = new Set<() => void>()

  constructor(client: DepartureSignal) {
    this.#client = client
    if (client.aborted) this.#abort(client.reason)
    client.addEventListener('abort', this.#onClient)
  }

  /** Redis answers again: the local wait ends. */
  redisReturns(): void {
    this.redisReturned = true
    this.#abort(new RedisUnavailable('Redis answers again: the request queues there'))
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) this.#listeners.add(listener)
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    this.#listeners.delete(listener)
  }

  dispose(): void {
    this.#client.removeEventListener('abort', this.#onClient)
  }

  readonly #onClient = (): void => this.#abort(this.#client.reason)

  #abort(reason: unknown): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    for (const listener of this.#listeners) listener()
    this.#listeners.clear()
  }
}

/** A request admitted on local limits and still running; `adopted` names its lease in Redis once it has one. */
interface LocalAdmission {
  readonly backend: string
  adopted: string | null
}

/** What a FailoverModelSlots tells its owner, and the clock it reads. */
export interface FailoverHooks {
  /** A Redis lease ended while Redis is away: other generations' local queues may have room now. [nothing] */
  readonly freedWhileAway?: () => void
  /** A request was admitted on local limits (Redis away, or its call over budget): `sluice_redis_local_admissions_total`. [nothing] */
  readonly admittedLocally?: () => void
  /** The stores' clock: a request's arrival is read once, on it. [system] */
  readonly clock?: Clock
}

export class FailoverModelSlots implements ModelSlots {
  readonly #shared: AdoptingModelSlots
  readonly #local: ModelSlots
  readonly #link: RedisLink
  readonly #admittedLocally = new Set<LocalAdmission>()
  /** The signals of requests waiting in the local queue. */
  readonly #waitingLocally = new Set<UntilRedisReturns>()

  readonly #freedWhileAway: () => void
  readonly #admittedLocallyHook: () => void
  readonly #clock: Clock

  constructor(shared: AdoptingModelSlots, local: ModelSlots, link: RedisLink, hooks: FailoverHooks = {}) {
    this.#shared = shared
    this.#local = local
    this.#link = link
    this.#freedWhileAway = hooks.freedWhileAway ?? (() => undefined)
    this.#admittedLocallyHook = hooks.admittedLocally ?? (() => undefined)
    this.#clock = hooks.clock ?? SYSTEM_CLOCK
    link.on('up', this.#adoptLocalAdmissions)
    link.on('up', this.#sendLocalWaitersToRedis)
  }

  readonly #sendLocalWaitersToRedis = (): void => {
    for (const signal of [...this.#waitingLocally]) signal.redisReturns()
  }

  async acquire(request: SlotRequest): Promise<SlotLease> {
    // One wait limit and one wait in all, however often an outage moves the request between the queues
    // (each move once restarted it: a Redis that kept flapping held a waiter past max_wait_ms without end).
    const pinned = request.arrivedAt === undefined ? { ...request, arrivedAt: this.#clock.now() } : request
    for (;;) {
      if (this.#link.up()) {
        try {
          return this.#wakingLocal(await this.#shared.acquire(pinned))
        } catch (error) {
          if (!(error instanceof RedisUnavailable)) throw error
        }
      }
      const lease = await this.#localUntilRedisReturns(pinned)
      if (lease !== null) return this.#trackedLocal(lease)
    }
  }

  /**
   * Waits in the local queue while Redis is away, and leaves it (null) when
   * Redis answers again: the request then queues in Redis, behind every
   * replica's waiters. Served on local counts after the return, a local
   * waiter once took a slot Redis had just handed to another replica's
   * waiter (two requests on a one-slot backend).
   */
  async #localUntilRedisReturns(request: SlotRequest): Promise<SlotLease | null> {
    const signal = new UntilRedisReturns(request.signal)
    this.#waitingLocally.add(signal)
    try {
      return await this.#local.acquire({ ...request, signal })
    } catch (error) {
      if (signal.redisReturned && !request.signal.aborted) return null
      throw error
    } finally {
      this.#waitingLocally.delete(signal)
      signal.dispose()
    }
  }

  async tryAcquire(exclude: ReadonlySet<string>, choose: SlotRequest['choose']): Promise<SlotLease | null> {
    if (this.#link.up()) {
      try {
        const lease = await this.#shared.tryAcquire(exclude, choose)
        return lease === null ? null : this.#wakingLocal(lease)
      } catch (error) {
        if (!(error instanceof RedisUnavailable)) throw error
      }
    }
    const lease = await this.#local.tryAcquire(exclude, choose)
    return lease === null ? null : this.#trackedLocal(lease)
  }

  /**
   * A local lease, remembered while it runs: when Redis comes back, the
   * other replicas must see it (their admissions go through Redis again, and
   * Redis knows nothing of what was admitted here meanwhile).
   */
  #trackedLocal(lease: SlotLease): SlotLease {
    this.#admittedLocallyHook()
    const admission: LocalAdmission = { backend: lease.backend, adopted: null }
    this.#admittedLocally.add(admission)
    // Up but slow (the call ran over its budget): Redis hears of it now, not at the next outage's end.
    if (this.#link.up()) this.#adopt([admission])
    return {
      backend: lease.backend,
      waitedMs: lease.waitedMs,
      release: () => {
        if (!this.#admittedLocally.delete(admission)) return
        lease.release()
        if (admission.adopted !== null) this.#shared.releaseAdopted(admission.adopted, admission.backend)
      },
    }
  }

  /** Redis answers again: every local admission still running gets a lease there, until it ends. */
  readonly #adoptLocalAdmissions = (): void => {
    this.#adopt([...this.#admittedLocally].filter((admission) => admission.adopted === null))
  }

  #adopt(admissions: readonly LocalAdmission[]): void {
    for (const admission of admissions) admission.adopted = this.#link.newId()
    this.#shared.adopt(admissions.map((admission) => [admission.adopted!, admission.backend] as const))
  }

  /** A shared lease ending frees a local slot too (local limits count it): the local queue may move. */
  #wakingLocal(lease: SlotLease): SlotLease {
    return {
      backend: lease.backend,
      waitedMs: lease.waitedMs,
      release: () => {
        lease.release()
        this.#local.wake()
        if (!this.#link.up()) this.#freedWhileAway()
      },
    }
  }

  wake(): void {
    this.#shared.wake()
    this.#local.wake()
  }

  /**
   * A reload's generations serve and bound their local queues as one while
   * Redis is away (generation-peers.ts), so they ask each other about them.
   * The local queue is empty while Redis is up (its waiters move there), and
   * Redis orders the shared queue itself.
   */
  headAhead(rank: WaiterRank): boolean {
    return this.#local.headAhead?.(rank) === true
  }

  worstWaiter(): WaiterRank | undefined {
    return this.#local.worstWaiter?.()
  }

  evictWorst(): void {
    this.#local.evictWorst?.()
  }

  queueDepth(): number {
    return this.#shared.queueDepth() + this.#local.queueDepth()
  }

  inFlight(backend: string): number {
    return this.#shared.inFlight(backend) + this.#local.inFlight(backend)
  }

  /**
   * Every replica's while Redis answers, and never less than this replica's
   * own (requests admitted on local limits while Redis is slow, not yet in
   * any count it answered); this replica's own (all of them: the local store
   * counts its Redis leases too) while Redis does not answer.
   */
  load(backend: string): number {
    return this.#link.up() ? Math.max(this.#shared.load(backend), this.inFlight(backend)) : this.#local.load(backend)
  }

  turnAway(error: unknown): void {
    this.#shared.turnAway(error)
    this.#local.turnAway(error)
  }

  close(): void {
    this.#shared.close()
    this.#local.close()
  }
}
