/**
 * This replica's view of one model's slots in Redis: the leases it holds
 * (renewed together, one script every TTL/3), its in-flight count per
 * backend, and the shared lease counts as last seen, which let the
 * balancer choose among backends believed to have room before the first
 * round trip (the script checks again), and the rounds of choosing when the
 * script answers that other backends have room.
 */
import type { Clock } from '../context.js'
import type { RedisLink } from './redis-link.js'
import type { SlotCalls, SlotReply } from './redis-slot-calls.js'
import type { ModelSlotSettings, SlotRequest } from './store.js'

/** Rounds of "these backends have room, choose one" before giving up on a race that never ends. */
const MAX_ROOM_ROUNDS = 8
/**
 * Shared counts older than this are not weighed by the balancer: a replica
 * that has not heard from Redis for a while (idle, or only long requests
 * renewed every TTL/3) would balance on requests long gone.
 */
export const FRESH_COUNTS_MS = 1000

export class RedisLeases {
  readonly #settings: ModelSlotSettings
  readonly #calls: SlotCalls
  readonly #link: RedisLink
  readonly #absorb: (reply: SlotReply) => void
  readonly #clock: Clock
  /** When `#shared` was last set from an answer. */
  #countsAt = Number.NEGATIVE_INFINITY
  /** Lease id → backend. */
  readonly #held = new Map<string, string>()
  /**
   * Leases put in Redis for requests this replica admitted on local limits
   * during an outage: renewed with the others, but not in `#inFlight` (the
   * local store counts those requests already).
   */
  readonly #adopted = new Set<string>()
  readonly #inFlight = new Map<string, number>()
  /** Leases per backend across replicas, from the latest answer. */
  readonly #shared = new Map<string, number>()
  /** This replica's claims still on the wire, per backend (not yet in `#shared`). */
  readonly #claiming = new Map<string, number>()
  #renewal: NodeJS.Timeout | null = null

  constructor(settings: ModelSlotSettings, calls: SlotCalls, link: RedisLink, clock: Clock, absorb: (reply: SlotReply) => void) {
    this.#settings = settings
    this.#clock = clock
    this.#calls = calls
    this.#link = link
    this.#absorb = absorb
    link.on('up', this.#renew)
  }

  inFlight(backend: string): number {
    return this.#inFlight.get(backend) ?? 0
  }

  holds(id: string): boolean {
    return this.#held.has(id)
  }

  /** The ids of every lease held (adopted ones included). */
  ids(): string[] {
    return [...this.#held.keys()]
  }

  add(id: string, backend: string): void {
    this.#held.set(id, backend)
    this.#inFlight.set(backend, this.inFlight(backend) + 1)
    this.#startRenewal()
  }

  /** Writes leases for requests admitted locally into Redis now, and keeps renewing them until removed. */
  adopt(leases: readonly (readonly [id: string, backend: string])[]): void {
    for (const [id, backend] of leases) {
      this.#held.set(id, backend)
      this.#adopted.add(id)
    }
    this.#startRenewal()
    this.#renew()
  }

  remove(id: string): void {
    const backend = this.#held.get(id)
    if (backend === undefined) return
    this.#held.delete(id)
    if (!this.#adopted.delete(id)) this.#inFlight.set(backend, this.inFlight(backend) - 1)
    if (this.#held.size === 0) this.#stopRenewal()
  }

  observeCounts(counts: readonly number[]): void {
    if (counts.length > 0) this.#countsAt = this.#clock.now()
    this.#settings.backends.forEach((backend, i) => {
      const count = counts[i]
      if (count !== undefined) this.#shared.set(backend, count)
    })
  }

  /**
   * Every replica's requests on `backend`: the lease count of the latest
   * answer and this replica's claims on the wire, or this replica's own if
   * that is more (an answer not yet seen since it took a slot). With no
   * answer for `FRESH_COUNTS_MS`, this replica's own and its claims.
   */
  load(backend: string): number {
    const own = this.inFlight(backend)
    if (this.#clock.now() - this.#countsAt > FRESH_COUNTS_MS) return own + (this.#claiming.get(backend) ?? 0)
    return Math.max(this.#believed(backend), own)
  }

  /** The balancer's pick among backends believed to have room, or '' when none seems to (the script decides). */
  prefer(choose: SlotRequest['choose'], exclude: ReadonlySet<string>): string {
    const { backends, usable, slotsPerBackend } = this.#settings
    const room = backends.filter((b) => usable(b) && !exclude.has(b) && this.#believed(b) < slotsPerBackend)
    return room.length === 0 ? '' : choose(room)
  }

  /**
   * Calls `attempt(preferred)` until the answer is not "these backends have
   * room: choose one" (the balancer then chooses among them), at most a few
   * rounds (null: other replicas kept taking the chosen slot first). Every
   * answer is absorbed on the way.
   */
  async untilChosen(
    choose: SlotRequest['choose'],
    exclude: ReadonlySet<string>,
    attempt: (preferred: string) => Promise<SlotReply>,
    wanted: () => boolean = () => true,
  ): Promise<SlotReply | null> {
    let preferred = this.prefer(choose, exclude)
    for (let round = 0; round < MAX_ROOM_ROUNDS; round++) {
      const reply = await this.claiming(preferred, attempt(preferred))
      this.#absorb(reply)
      if (reply.status !== 'room' || !wanted()) return reply
      preferred = choose(reply.room)
    }
    return null
  }

  #believed(backend: string): number {
    return (this.#shared.get(backend) ?? 0) + (this.#claiming.get(backend) ?? 0)
  }

  /** Counts `preferred` as being claimed until `call` answers. */
  async claiming<T>(preferred: string, call: Promise<T>): Promise<T> {
    if (preferred === '') return call
    this.#claiming.set(preferred, (this.#claiming.get(preferred) ?? 0) + 1)
    try {
      return await call
    } finally {
      this.#claiming.set(preferred, (this.#claiming.get(preferred) ?? 1) - 1)
    }
  }

  dispose(): void {
    this.#stopRenewal()
    this.#link.off('up', this.#renew)
  }

  #startRenewal(): void {
    if (this.#renewal !== null) return
    this.#renewal = setInterval(this.#renew, Math.max(1, Math.floor(this.#link.timings.leaseTtlMs / 3)))
    this.#renewal.unref()
  }

  #stopRenewal(): void {
    if (this.#renewal === null) return
    clearInterval(this.#renewal)
    this.#renewal = null
  }

  /** Also run when Redis comes back, so leases that expired meanwhile are counted again. */
  readonly #renew = (): void => {
    if (this.#held.size === 0) return
    this.#calls.renew(new Map(this.#held)).then(this.#absorb, () => undefined)
  }
}
