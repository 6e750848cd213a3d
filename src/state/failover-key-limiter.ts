/**
 * Redis mode's outage behaviour for keys' limits (DESIGN.md "Shared
 * state"): a ticket comes from the shared (Redis) limiter while Redis is
 * reachable, from this replica's memory limiter when it is not, and is
 * given back to the one that granted it. (failover-model-slots.ts does the
 * same for model slots.)
 */
import type { Clock } from '../context.js'
import type { KeyLimitSettings } from '../config/schema.js'
import { leftOfCarry, type InDoubtCarry } from './in-doubt-carry.js'
import type { RedisLink } from './redis-link.js'
import { LateKeyAdmission, RedisUnavailable } from './redis-unavailable.js'
import type { KeyUsage, MemoryKeyLimiter } from './memory-key-limiter.js'
import type { KeyLimiter, KeyTicket, MinuteUse } from './store.js'

/** The shared key limiter as failover uses it: limits, and taking over what was admitted locally. */
export interface AdoptingKeyLimiter extends KeyLimiter {
  /** Counts a locally admitted share of `keyId` in the shared store until the returned release is called. */
  adopt(keyId: string): () => void
  /** Counts requests and tokens against the key's shared per-minute limits (a carry's id: counted once); rejects with RedisUnavailable. */
  debit(keyId: string, limits: KeyLimitSettings, use: MinuteUse, carryId?: string): Promise<void>
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
  /** Times Redis answered again after an outage (each carried the local use into it). */
  #returns = 0

  /** Per key, a carry sent whose answer never came: sent again, under its id, before newer use is. */
  readonly #inDoubt = new Map<string, InDoubtCarry>()
  readonly #clock: Clock
  /** Requests of a key other generations run (slot-peers.ts): local limits count them too. */
  readonly #elsewhere: (keyId: string) => number

  /** `clock`: the local limiter's (in-doubt carries are drained by the time since they were read). */
  constructor(shared: AdoptingKeyLimiter, local: MemoryKeyLimiter, link: RedisLink, clock: Clock, elsewhere: (keyId: string) => number = () => 0) {
    this.#shared = shared
    this.#local = local
    this.#link = link
    this.#clock = clock
    this.#elsewhere = elsewhere
    link.on('up', this.#takeOverLocalAdmissions)
  }

  /** Requests of the key admitted here (through Redis or locally) and still running. */
  running(keyId: string): number {
    return (this.#heldShared.get(keyId) ?? 0) + this.#local.running(keyId)
  }

  async admit(keyId: string, limits: KeyLimitSettings): Promise<KeyTicket> {
    let late: LateKeyAdmission | null = null
    if (this.#link.up()) {
      try {
        const ticket = this.#chargedLocallyWhileAway(await this.#shared.admit(keyId, limits), keyId, limits)
        return limits.max_concurrency === undefined ? ticket : this.#countedHere(ticket, keyId)
      } catch (error) {
        if (!(error instanceof RedisUnavailable)) throw error
        if (error instanceof LateKeyAdmission) late = error
      }
    }
    // A reload during an outage: the previous generation's requests of the key count too (a chaos
    // audit saw a key at 5 against a max_concurrency of 3, its new local limiter starting from 0).
    const elsewhere = (this.#heldShared.get(keyId) ?? 0) + this.#elsewhere(keyId)
    const returns = this.#returns
    const ticket = this.#chargedSharedOnceBack(await this.#local.admit(keyId, limits, elsewhere), keyId, limits, returns)
    // A late call whose script admitted the request counted it in Redis already (its concurrency place was
    // given back, its request not): enforced here, never carried. One that failed or was refused there is
    // carried like any local request (a diff review: both were taken as counted).
    void late?.countedInRedis.then((counted) => counted && this.#local.markShared(keyId, limits))
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

  /**
   * The tokens of an answer admitted locally go where its request was counted: locally until Redis is back
   * (then the carry took the request there, and they go to Redis directly). An admission that went local
   * with Redis up (its call late: a slow Redis) is counted locally until the next return, like its request;
   * its tokens went to Redis, so the local bucket never filled and a slow replica admitted past
   * tokens_per_minute without end (a limits review: 2,094 tokens used of 100).
   */
  #chargedSharedOnceBack(ticket: KeyTicket, keyId: string, limits: KeyLimitSettings, returnsAtAdmission: number): KeyTicket {
    return {
      release: () => ticket.release(),
      chargeTokens: async (tokens) => {
        if (!this.#link.up() || this.#returns === returnsAtAdmission) return ticket.chargeTokens(tokens)
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
    this.#returns++
    for (const share of this.#heldLocally) share.releaseAdopted ??= this.#shared.adopt(share.keyId)
    this.#carrying = this.#carrying.then(() => this.#carryLocalUse())
  }

  /**
   * A key's use is given back locally only once Redis has counted it. A carry whose answer never came stays
   * local and in doubt: the next return sends what is left of it again under its id first (Redis counts it
   * once), then the key's newer use. Sent whole again, a carry Redis had counted was counted twice (a
   * slow-link review: 100 tokens of an outage debited twice, the key refused early).
   */
  async #carryLocalUse(): Promise<void> {
    await Promise.all([...this.#inDoubt.values()].map((carry) => this.#settle(carry)))
    const carries = this.#local.usage().filter((use) => !this.#inDoubt.has(use.keyId))
    await Promise.all(carries.map((use) => this.#carry(use, { id: this.#link.newId(), use, readAt: this.#clock.now() })))
  }

  /** An in-doubt carry sent again, for what a minute has not refilled of it; failing, it stays in doubt as it was. */
  async #settle(carry: InDoubtCarry): Promise<void> {
    const left = leftOfCarry(carry, this.#clock.now())
    if (left === null) this.#inDoubt.delete(carry.use.keyId)
    else await this.#carry(left, carry)
  }

  async #carry(use: KeyUsage, carry: InDoubtCarry): Promise<void> {
    try {
      await this.#shared.debit(use.keyId, use.limits, use, carry.id)
      this.#inDoubt.delete(use.keyId)
      this.#local.countedElsewhere(use)
    } catch {
      // Still counted locally, and perhaps in Redis too: the next return sends it again under the same id.
      this.#inDoubt.set(use.keyId, carry)
    }
  }
}
