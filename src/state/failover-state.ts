/**
 * Redis mode's outage behaviour (DESIGN.md "Shared state"): each call goes to
 * the shared (Redis) store while Redis is reachable, and to this replica's
 * memory store when it is not, or when that one call failed or ran over its
 * budget. A lease or ticket is given back to the store that granted it, so
 * nothing granted during an outage is counted twice or leaks; waiters queued
 * in Redis when it goes away move to the local queue.
 */
import type { KeyLimitSettings } from '../config/schema.js'
import { RedisUnavailable, type RedisLink } from './redis-link.js'
import type { MemoryKeyLimiter } from './memory-key-limiter.js'
import type { DepartureSignal, KeyLimiter, KeyTicket, ModelSlots, SlotLease, SlotRequest, MinuteUse } from './store.js'

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

export class FailoverModelSlots implements ModelSlots {
  readonly #shared: AdoptingModelSlots
  readonly #local: ModelSlots
  readonly #link: RedisLink
  readonly #admittedLocally = new Set<LocalAdmission>()
  /** The signals of requests waiting in the local queue. */
  readonly #waitingLocally = new Set<UntilRedisReturns>()

  constructor(shared: AdoptingModelSlots, local: ModelSlots, link: RedisLink) {
    this.#shared = shared
    this.#local = local
    this.#link = link
    link.on('up', this.#adoptLocalAdmissions)
    link.on('up', this.#sendLocalWaitersToRedis)
  }

  readonly #sendLocalWaitersToRedis = (): void => {
    for (const signal of [...this.#waitingLocally]) signal.redisReturns()
  }

  async acquire(request: SlotRequest): Promise<SlotLease> {
    for (;;) {
      if (this.#link.up()) {
        try {
          return this.#wakingLocal(await this.#shared.acquire(request))
        } catch (error) {
          if (!(error instanceof RedisUnavailable)) throw error
        }
      }
      const lease = await this.#localUntilRedisReturns(request)
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
      },
    }
  }

  wake(): void {
    this.#shared.wake()
    this.#local.wake()
  }

  queueDepth(): number {
    return this.#shared.queueDepth() + this.#local.queueDepth()
  }

  inFlight(backend: string): number {
    return this.#shared.inFlight(backend) + this.#local.inFlight(backend)
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

/** The shared key limiter as failover uses it: limits, and taking over what was admitted locally. */
export interface AdoptingKeyLimiter extends KeyLimiter {
  /** Counts a locally admitted share of `keyId` in the shared store until the returned release is called. */
  adopt(keyId: string): () => void
  /** Counts requests and tokens against the key's shared per-minute limits; rejects with RedisUnavailable. */
  debit(keyId: string, limits: KeyLimitSettings, use: MinuteUse): Promise<void>
}

/** A concurrency share admitted on local limits and still held; `release` of its shared ticket once adopted. */
interface LocalShare {
  readonly keyId: string
  releaseAdopted: (() => void) | null
}

/**
 * Keys' limits, shared or local. Whatever the local buckets counted while
 * Redis was away (requests admitted, tokens of answers that ended then) is
 * carried into Redis's buckets when it answers again, net of what a minute
 * has refilled since, so the minute around an outage is not allowed twice.
 */
export class FailoverKeyLimiter implements KeyLimiter {
  readonly #shared: AdoptingKeyLimiter
  readonly #local: MemoryKeyLimiter
  readonly #link: RedisLink
  readonly #heldLocally = new Set<LocalShare>()
  /** Per key, the tickets Redis admitted that are still running here (local concurrency counts them, as slots count their leases). */
  readonly #heldShared = new Map<string, number>()
  /** One carry at a time: each reads the local use only after the previous one handed its part over. */
  #carrying: Promise<void> = Promise.resolve()

  constructor(shared: AdoptingKeyLimiter, local: MemoryKeyLimiter, link: RedisLink) {
    this.#shared = shared
    this.#local = local
    this.#link = link
    link.on('up', this.#takeOverLocalAdmissions)
  }

  async admit(keyId: string, limits: KeyLimitSettings): Promise<KeyTicket> {
    if (this.#link.up()) {
      try {
        const ticket = this.#chargedLocallyWhileAway(await this.#shared.admit(keyId, limits), keyId, limits)
        return limits.max_concurrency === undefined ? ticket : this.#countedHere(ticket, keyId)
      } catch (error) {
        if (!(error instanceof RedisUnavailable)) throw error
      }
    }
    const ticket = this.#chargedSharedOnceBack(await this.#local.admit(keyId, limits, this.#heldShared.get(keyId) ?? 0), keyId, limits)
    return limits.max_concurrency === undefined ? ticket : this.#trackedLocal(keyId, ticket)
  }

  /** Resolves when the use counted locally so far has been carried into Redis (or failed to be, and stays local). */
  carried(): Promise<void> {
    return this.#carrying
  }

  /** As for slots: a share held on local limits is carried into Redis when it answers again. */
  #trackedLocal(keyId: string, ticket: KeyTicket): KeyTicket {
    const share: LocalShare = { keyId, releaseAdopted: null }
    this.#heldLocally.add(share)
    if (this.#link.up()) share.releaseAdopted = this.#shared.adopt(keyId)
    return {
      chargeTokens: (tokens) => ticket.chargeTokens(tokens),
      release: () => {
        if (!this.#heldLocally.delete(share)) return
        ticket.release()
        share.releaseAdopted?.()
      },
    }
  }

  /** A ticket Redis admitted, counted here until it is released (an outage meanwhile must not admit past the key's concurrency). */
  #countedHere(ticket: KeyTicket, keyId: string): KeyTicket {
    this.#heldShared.set(keyId, (this.#heldShared.get(keyId) ?? 0) + 1)
    let released = false
    return {
      chargeTokens: (tokens) => ticket.chargeTokens(tokens),
      release: () => {
        if (released) return
        released = true
        const left = (this.#heldShared.get(keyId) ?? 1) - 1
        if (left > 0) this.#heldShared.set(keyId, left)
        else this.#heldShared.delete(keyId)
        ticket.release()
      },
    }
  }

  /** The tokens of an answer admitted through Redis that ends while Redis is away are counted locally, and carried later. */
  #chargedLocallyWhileAway(ticket: KeyTicket, keyId: string, limits: KeyLimitSettings): KeyTicket {
    return {
      release: () => ticket.release(),
      chargeTokens: async (tokens) => {
        try {
          await ticket.chargeTokens(tokens)
        } catch (error) {
          if (!(error instanceof RedisUnavailable)) throw error
          this.#local.charge(keyId, limits, tokens)
        }
      },
    }
  }

  /** The tokens of an answer admitted locally that ends once Redis is back go to Redis directly. */
  #chargedSharedOnceBack(ticket: KeyTicket, keyId: string, limits: KeyLimitSettings): KeyTicket {
    return {
      release: () => ticket.release(),
      chargeTokens: async (tokens) => {
        if (!this.#link.up()) return ticket.chargeTokens(tokens)
        try {
          await this.#shared.debit(keyId, limits, { requests: 0, tokens })
        } catch (error) {
          if (!(error instanceof RedisUnavailable)) throw error
          await ticket.chargeTokens(tokens)
        }
      },
    }
  }

  readonly #takeOverLocalAdmissions = (): void => {
    for (const share of this.#heldLocally) share.releaseAdopted ??= this.#shared.adopt(share.keyId)
    this.#carrying = this.#carrying.then(() => this.#carryLocalUse())
  }

  /** A key's use is given back locally only once Redis has counted it; a failed carry waits for the next return. */
  async #carryLocalUse(): Promise<void> {
    const carries = this.#local.usage().map(async (use) => {
      try {
        await this.#shared.debit(use.keyId, use.limits, use)
        this.#local.giveBack(use)
      } catch {
        // Still counted locally: the next time Redis is back carries it.
      }
    })
    await Promise.all(carries)
  }
}
