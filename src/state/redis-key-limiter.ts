/**
 * Per-key limits counted across every replica (lua/key-scripts.ts): token
 * buckets for requests and tokens per minute, and the key's concurrency as
 * tickets with an expiry, renewed every TTL/3 while held, so the share of a
 * replica that died expires. Admission is one round trip; a release is one
 * ZREM, fired and forgotten.
 */
import type { Clock } from '../context.js'
import type { KeyLimitSettings } from '../config/schema.js'
import { concurrencyRefusal, requestsRefusal, tokensRefusal } from './key-refusals.js'
import { carryMemoryMs } from './in-doubt-carry.js'
import { keyCarryMarker, keyLimitKeys, type KeyLimitKeys } from './redis-keys.js'
import type { RedisLink } from './redis-link.js'
import { LateKeyAdmission, RedisUnavailable } from './redis-unavailable.js'
import { UNLIMITED_TICKET, type KeyLimiter, type KeyTicket, type MinuteUse } from './store.js'


interface AdmitReply {
  readonly status: 'admitted' | 'concurrency' | 'rate_limit_tokens' | 'rate_limit_requests'
  readonly active?: number
  readonly retry?: number
}

export interface RedisKeyLimiterOptions {
  /** The buckets' clock; absent: Redis `TIME` (replicas agree however skewed their clocks). Tests pass a hand-moved one. */
  readonly clock?: Clock
  /** Budget of the admission call; absent: the link's. */
  readonly callBudgetMs?: number
}

export class RedisKeyLimiter implements KeyLimiter {
  readonly #link: RedisLink
  readonly #options: RedisKeyLimiterOptions
  /** Tickets held that count against a concurrency limit: key id → ticket ids. */
  readonly #held = new Map<string, Set<string>>()
  /** Every key this replica put tickets in Redis for: where orphans of a lost answer can be. */
  readonly #ticketed = new Set<string>()
  #renewal: NodeJS.Timeout | null = null

  constructor(link: RedisLink, options: RedisKeyLimiterOptions = {}) {
    this.#link = link
    this.#options = options
    link.on('up', this.#renew)
    link.on('reconcile', this.#reconcile)
  }

  async admit(keyId: string, limits: KeyLimitSettings): Promise<KeyTicket> {
    const { requests_per_minute: rpm, tokens_per_minute: tpm, max_concurrency: concurrency } = limits
    if (rpm === undefined && tpm === undefined && concurrency === undefined) return UNLIMITED_TICKET
    const keys = keyLimitKeys(this.#link.keyPrefix, keyId)
    const ticketId = this.#link.newId()
    if (concurrency !== undefined) this.#ticketed.add(keyId)
    const args = [this.#now(), concurrency ?? 0, rpm ?? 0, tpm ?? 0, ticketId, this.#link.timings.leaseTtlMs]
    const call = this.#link.run('sluiceKeyAdmit', [keys.rate, keys.active], args)
    let counted: (inRedis: boolean) => void = () => undefined
    const countedInRedis = new Promise<boolean>((resolve) => (counted = resolve))
    // A late admission is undone as far as it can be: its concurrency place is given back, its request is
    // not (the caller, admitting it locally, is told it was counted: failover-key-limiter.ts).
    const undo = (late: unknown) => {
      const admitted = parse(late).status === 'admitted'
      if (admitted && concurrency !== undefined) this.#link.zrem(keys.active, ticketId).catch(() => undefined)
      counted(admitted && rpm !== undefined)
    }
    call.catch(() => counted(false))
    let answer: unknown
    try {
      answer = await this.#link.budgeted(call, undo, this.#options.callBudgetMs)
    } catch (error) {
      // Late, or failed: which of the two is known only once the call settles.
      if (error instanceof RedisUnavailable) throw new LateKeyAdmission(error.message, countedInRedis)
      throw error
    }
    const reply = parse(answer)
    switch (reply.status) {
      case 'admitted':
        return this.#ticket(keyId, keys, ticketId, limits)
      case 'concurrency':
        throw concurrencyRefusal(keyId, reply.active ?? concurrency ?? 0, limits, reply.retry ?? 0)
      case 'rate_limit_tokens':
        throw tokensRefusal(keyId, reply.retry ?? 1000, limits)
      case 'rate_limit_requests':
        throw requestsRefusal(keyId, reply.retry ?? 1000, limits)
    }
  }

  /**
   * A concurrency share admitted on this replica's local limits while Redis
   * was away: a ticket in Redis from now on (renewed with the others), so the
   * key's other requests, admitted through Redis again, count it. Returns
   * its release.
   */
  adopt(keyId: string): () => void {
    const ticketId = this.#link.newId()
    this.#hold(keyId, ticketId)
    this.#renew()
    return () => {
      this.#unhold(keyId, ticketId)
      this.#link.zrem(keyLimitKeys(this.#link.keyPrefix, keyId).active, ticketId).catch(() => undefined)
    }
  }

  /**
   * Counts use against the key's per-minute buckets: an answer's tokens, or
   * what this replica admitted on local limits while Redis was away (a
   * carry: `carryId` given, Redis counts each id once, so a carry whose
   * answer was lost can be sent again). Rejects with RedisUnavailable.
   */
  async debit(keyId: string, limits: KeyLimitSettings, use: MinuteUse, carryId?: string): Promise<void> {
    const rpm = limits.requests_per_minute ?? 0
    const tpm = limits.tokens_per_minute ?? 0
    if (!((rpm > 0 && use.requests > 0) || (tpm > 0 && use.tokens > 0))) return
    const prefix = this.#link.keyPrefix
    const keys = keyLimitKeys(prefix, keyId)
    const args = [this.#now(), rpm, tpm, use.requests, use.tokens]
    if (carryId === undefined) await this.#link.run('sluiceKeyDebit', [keys.rate, keys.active], args)
    else await this.#link.run('sluiceKeyDebit', [keys.rate, keys.active, keyCarryMarker(prefix, keyId, carryId)], [...args, carryMemoryMs(limits, use)])
  }

  /** Stops the renewal timer (the connection is closed after this). */
  dispose(): void {
    this.#stopRenewal()
    this.#link.off('up', this.#renew)
    this.#link.off('reconcile', this.#reconcile)
  }

  #ticket(keyId: string, keys: KeyLimitKeys, ticketId: string, limits: KeyLimitSettings): KeyTicket {
    const counted = limits.max_concurrency !== undefined
    if (counted) this.#hold(keyId, ticketId)
    let released = false
    return {
      chargeTokens: (tokens) => this.debit(keyId, limits, { requests: 0, tokens }),
      release: () => {
        if (released) return
        released = true
        if (!counted) return
        this.#unhold(keyId, ticketId)
        this.#link.zrem(keys.active, ticketId).catch(() => undefined)
      },
    }
  }

  #now(): string {
    return this.#options.clock === undefined ? '' : String(this.#options.clock.now())
  }

  #hold(keyId: string, ticketId: string): void {
    this.#ticketed.add(keyId)
    const tickets = this.#held.get(keyId) ?? new Set()
    tickets.add(ticketId)
    this.#held.set(keyId, tickets)
    if (this.#renewal !== null) return
    this.#renewal = setInterval(this.#renew, Math.max(1, Math.floor(this.#link.timings.leaseTtlMs / 3)))
    this.#renewal.unref()
  }

  #unhold(keyId: string, ticketId: string): void {
    const tickets = this.#held.get(keyId)
    tickets?.delete(ticketId)
    if (tickets?.size === 0) this.#held.delete(keyId)
    if (this.#held.size === 0) this.#stopRenewal()
  }

  #stopRenewal(): void {
    if (this.#renewal === null) return
    clearInterval(this.#renewal)
    this.#renewal = null
  }

  /** Redis answers again (RedisLink's 'reconcile'): tickets of lost answers no longer hold a share of a key's concurrency. */
  readonly #reconcile = (issuedBeforeUp: number): void => {
    for (const keyId of this.#ticketed) {
      const keys = keyLimitKeys(this.#link.keyPrefix, keyId)
      const held = this.#held.get(keyId) ?? []
      this.#link.run('sluiceKeyReconcile', [keys.rate, keys.active], [this.#now(), this.#link.replicaId, issuedBeforeUp, ...held]).catch(() => undefined)
    }
  }

  /** One script per key holding tickets; also run when Redis comes back. */
  readonly #renew = (): void => {
    const ttl = this.#link.timings.leaseTtlMs
    for (const [keyId, tickets] of this.#held) {
      const keys = keyLimitKeys(this.#link.keyPrefix, keyId)
      this.#link.run('sluiceKeyRenew', [keys.rate, keys.active], [this.#now(), ttl, ...tickets]).catch(() => undefined)
    }
  }
}

function parse(raw: unknown): AdmitReply {
  return JSON.parse(String(raw)) as AdmitReply
}
