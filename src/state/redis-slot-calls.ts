/**
 * Typed calls to one model's slot scripts (lua/slot-scripts.ts): builds the
 * argument header every script reads and parses the JSON each one answers.
 */
import { modelKeys, priorityPrefix, slotScriptKeys, type ModelKeys } from './redis-keys.js'
import type { RedisLink } from './redis-link.js'
import type { SlotScript } from './lua/slot-scripts.js'

type SlotStatus = 'granted' | 'room' | 'none' | 'queued' | 'rejected' | 'gone' | 'behind' | 'full' | 'released' | 'left' | 'synced' | 'renewed' | 'reconciled'

/** A grant always names its backend (parseReply checks), so callers need no assertion. */
export type SlotReply = SlotReplyFields & ({ readonly status: 'granted'; readonly backend: string } | { readonly status: Exclude<SlotStatus, 'granted'>; readonly backend?: string })

interface SlotReplyFields {
  readonly room: readonly string[]
  readonly seq?: number
  /** Orphaned leases and queue entries removed (reconcile replies). */
  readonly dropped?: number
  /** This replica's waiter turned away to make room (queued replies). */
  readonly evicted?: string
  /** [id, backend, ...] (sync replies). */
  readonly granted: readonly string[]
  readonly gone: readonly string[]
  /** Leases per backend, in settings order, when the script ran. */
  readonly counts: readonly number[]
  /** [id, backend, ...]: slots the script handed to this replica's waiters. */
  readonly handed: readonly string[]
  /** Redis's clock (ms) when the script ran; absent from an older build's scripts. */
  readonly now?: number
}

export interface SlotCallSettings {
  readonly model: string
  readonly backends: readonly string[]
  readonly slotsPerBackend: number
  readonly maxQueue: number
  readonly usable: (backend: string) => boolean
}

export class SlotCalls {
  readonly keys: ModelKeys
  #redisClock: { readonly redisNow: number; readonly localAt: number } | null = null
  readonly #link: RedisLink
  readonly #settings: SlotCallSettings
  readonly #scriptKeys: readonly string[]

  constructor(link: RedisLink, settings: SlotCallSettings) {
    this.#link = link
    this.#settings = settings
    this.keys = modelKeys(link.keyPrefix, settings.model, settings.backends)
    this.#scriptKeys = slotScriptKeys(this.keys)
  }

  acquire(id: string, priority: number, preferred: string, mode: 'queue' | 'try' | 'now', exclude: ReadonlySet<string>): Promise<SlotReply> {
    return this.#call('sluiceSlotAcquire', [id, priorityPrefix(priority), preferred, this.#settings.maxQueue, mode], exclude)
  }

  claim(id: string, preferred: string): Promise<SlotReply> {
    return this.#call('sluiceSlotClaim', [id, preferred])
  }

  release(leaseId: string, backend: string): Promise<SlotReply> {
    return this.#call('sluiceSlotRelease', [leaseId, backend])
  }

  leave(ids: readonly string[]): Promise<SlotReply> {
    return this.#call('sluiceSlotLeave', ids)
  }

  sync(ids: readonly string[]): Promise<SlotReply> {
    return this.#call('sluiceSlotSync', ids)
  }

  renew(leases: ReadonlyMap<string, string>): Promise<SlotReply> {
    return this.#call('sluiceSlotRenew', [...leases].flatMap(([id, backend]) => [backend, id]))
  }

  /** `issuedBeforeUp`: see RedisLink's reconcile; `kept`: the lease and waiter ids this replica holds. */
  reconcile(issuedBeforeUp: number, kept: readonly string[]): Promise<SlotReply> {
    return this.#call('sluiceSlotReconcile', [issuedBeforeUp, ...kept])
  }

  async #call(script: SlotScript, own: readonly (string | number)[], exclude: ReadonlySet<string> = new Set()): Promise<SlotReply> {
    const { model, backends, slotsPerBackend, usable } = this.#settings
    const link = this.#link
    const header = [
      link.replicaId,
      model,
      slotsPerBackend,
      link.timings.leaseTtlMs,
      link.replicaChannelPrefix(),
      this.keys.freedChannel,
      backends.length,
      ...backends,
      ...backends.map((b) => (usable(b) && !exclude.has(b) ? '1' : '0')),
    ]
    const reply = parseReply(await link.run(script, this.#scriptKeys, [...header, ...own]))
    if (typeof reply.now === 'number') this.#redisClock = { redisNow: reply.now, localAt: performance.now() }
    return reply
  }

  /**
   * Redis's clock now, as far as this replica can tell: the latest reply's
   * reading plus the time passed here since (both run at real time). The
   * reply's trip back makes it a little behind Redis, so it errs towards
   * "not expired", by that trip at most (a grant from the heartbeat or a
   * claim is checked in Redis itself: `lease_lapsed`). Null before any
   * reply carried one.
   */
  redisNow(): number | null {
    const clock = this.#redisClock
    return clock === null ? null : clock.redisNow + (performance.now() - clock.localAt)
  }
}

/** cjson writes an empty Lua table as `{}`: every list field is normalised to an array. */
function parseReply(raw: unknown): SlotReply {
  const data = JSON.parse(String(raw)) as Record<string, unknown>
  if (data.status === 'granted' && typeof data.backend !== 'string') throw new Error(`slot script granted no backend: ${String(raw)}`)
  const list = <T>(value: unknown): T[] => (Array.isArray(value) ? (value as T[]) : [])
  return {
    ...(data as object),
    status: data.status as SlotStatus,
    room: list<string>(data.room),
    granted: list<string>(data.granted),
    gone: list<string>(data.gone),
    counts: list<number>(data.counts),
    handed: list<string>(data.handed),
  } as SlotReply
}
