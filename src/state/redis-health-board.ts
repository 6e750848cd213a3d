/**
 * The health board shared through Redis: a replica that finds a backend down
 * or ejects it writes its verdict into the model's health hash and announces
 * it on the model's health channel; every replica applies what it hears, and
 * reads the whole hash again whenever it (re)connects, since messages sent
 * while it was away are lost. A verdict carries its own expiry (its
 * replica's clock), so one from a replica that died lapses by itself.
 *
 * Redis unreachable: nothing is written, verdicts held are dropped, and each
 * replica goes by its own checks (no error reaches a request).
 *
 * A verdict names its gateway (`by`, the same for all of a gateway's
 * generations: server.ts), and a gateway does not hear its own: one that
 * found a backend down, and then saw it recover, took its own echoed
 * verdict for another replica's, and so did a reload's new generation with
 * its predecessor's. Replicas of an older release ignore the field.
 */
import type { Logger } from 'pino'
import type { Clock } from '../context.js'
import type { SharedVerdict } from '../routing/health-state.js'
import type { HealthBoard } from './health-board.js'
import { modelKeys } from './redis-keys.js'
import type { RedisLink } from './redis-link.js'

type OnVerdict = (backend: string, verdict: SharedVerdict | null) => void

interface Watched {
  readonly keys: readonly [hash: string, channel: string]
  readonly backends: readonly string[]
  readonly onVerdict: OnVerdict
}

export class RedisHealthBoard implements HealthBoard {
  readonly #link: RedisLink
  readonly #clock: Clock
  readonly #logger: Logger
  /** What this gateway's verdicts carry as `by`: the same for all its generations. */
  readonly #signer: string
  readonly #watched = new Map<string, Watched>()
  /** Publishes and withdrawals issued per backend (`entryOf`), in order. */
  readonly #issued = new Map<string, number>()
  /**
   * Withdrawals that did not reach Redis, with their number in `#issued`:
   * made again when it answers, unless a newer call on the backend was
   * issued since (its failure may be known only after that call). Lost,
   * this gateway's down verdict would stand until it lapsed (3 intervals),
   * and a replica not yet sure of the backend would take it.
   */
  readonly #lostClears = new Map<string, number>()
  /**
   * Messages heard so far, and that count at each backend's latest
   * (`entryOf`). A read of the hash and the channel's messages come
   * on two connections, so a read answered after a message it may predate
   * leaves that backend to the message (and to any that follow it).
   */
  #messages = 0
  readonly #lastMessage = new Map<string, number>()

  constructor(link: RedisLink, clock: Clock, logger: Logger, signer: string) {
    this.#link = link
    this.#clock = clock
    this.#logger = logger
    this.#signer = signer
    link.on('up', this.#readAll)
    link.on('up', this.#clearAgain)
    link.on('resync', this.#readAll)
    link.on('down', this.#forgetAll)
  }

  publish(model: string, backend: string, verdict: SharedVerdict): void {
    const keepMs = Math.max(1, Math.ceil(verdict.expiresAt - this.#clock.now()))
    this.#issue(entryOf(model, backend))
    const signed = { ...verdict, by: this.#signer }
    const message = JSON.stringify({ backend, verdict: signed })
    this.#call(model, 'sluiceHealthPublish', this.#keysOf(model), [backend, JSON.stringify(signed), keepMs, message])
  }

  clear(model: string, backend: string): void {
    const entry = entryOf(model, backend)
    const issued = this.#issue(entry)
    const lost = (): void => void this.#lostClears.set(entry, issued)
    this.#call(model, 'sluiceHealthClear', this.#keysOf(model), [backend, JSON.stringify({ backend, verdict: null }), this.#signer], lost)
  }

  watch(model: string, backends: readonly string[], onVerdict: OnVerdict): void {
    const watched: Watched = { keys: this.#keysOf(model), backends, onVerdict }
    this.#watched.set(model, watched)
    this.#link.subscribe(watched.keys[1], (raw) => {
      const message = parseMessage(raw, this.#signer)
      if (message === null || !backends.includes(message.backend)) return
      this.#lastMessage.set(entryOf(model, message.backend), ++this.#messages)
      onVerdict(message.backend, message.verdict)
    })
    if (this.#link.up()) void this.#read(model, watched)
  }

  close(): void {
    this.#link.off('up', this.#readAll)
    this.#link.off('up', this.#clearAgain)
    this.#link.off('resync', this.#readAll)
    this.#link.off('down', this.#forgetAll)
    this.#watched.clear()
  }

  #keysOf(model: string): readonly [string, string] {
    const keys = modelKeys(this.#link.keyPrefix, model, [])
    return [keys.health, keys.healthChannel]
  }

  #call(model: string, script: 'sluiceHealthPublish' | 'sluiceHealthClear', keys: readonly string[], args: readonly (string | number)[], lost: () => void = () => undefined): void {
    if (!this.#link.up()) return lost()
    this.#link.run(script, keys, args).catch((error: unknown) => {
      lost()
      this.#logger.debug({ err: this.#link.loggable(error), model }, 'shared health not written')
    })
  }

  #issue(entry: string): number {
    const issued = (this.#issued.get(entry) ?? 0) + 1
    this.#issued.set(entry, issued)
    return issued
  }

  readonly #clearAgain = (): void => {
    const again = [...this.#lostClears]
    this.#lostClears.clear()
    for (const [entry, issued] of again) {
      const [model, backend] = entry.split('\0') as [string, string]
      if (this.#issued.get(entry) === issued && this.#watched.has(model)) this.clear(model, backend)
    }
  }

  readonly #readAll = (): void => {
    for (const [model, watched] of this.#watched) void this.#read(model, watched)
  }

  /** Applies the whole hash (a backend without a field has no verdict in force), except to a backend a message came for meanwhile. */
  async #read(model: string, watched: Watched): Promise<void> {
    const issued = this.#messages
    let flat: unknown
    try {
      flat = await this.#link.run('sluiceHealthRead', watched.keys.slice(0, 1), [])
    } catch (error) {
      this.#logger.debug({ err: this.#link.loggable(error), model }, 'shared health not read')
      return
    }
    if (this.#watched.get(model) !== watched || !Array.isArray(flat)) return
    const found = new Map<string, SharedVerdict>()
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const verdict = parseVerdict(flat[i + 1], this.#signer)
      if (typeof flat[i] === 'string' && verdict !== null) found.set(flat[i] as string, verdict)
    }
    for (const backend of watched.backends) {
      if ((this.#lastMessage.get(entryOf(model, backend)) ?? 0) <= issued) watched.onVerdict(backend, found.get(backend) ?? null)
    }
  }

  readonly #forgetAll = (): void => {
    for (const watched of this.#watched.values()) for (const backend of watched.backends) watched.onVerdict(backend, null)
  }
}

/** The key of a model's backend in this board's maps. */
function entryOf(model: string, backend: string): string {
  return `${model}\0${backend}`
}

/**
 * A change announced on the channel (null: unreadable). This replica's own
 * verdict reads as none: it replaced whatever another replica's was.
 */
function parseMessage(raw: string, self: string): { backend: string; verdict: SharedVerdict | null } | null {
  try {
    const data = JSON.parse(raw) as { backend?: unknown; verdict?: unknown }
    if (typeof data.backend !== 'string') return null
    if (data.verdict === null || isOwn(data.verdict, self)) return { backend: data.backend, verdict: null }
    const verdict = verdictFrom(data.verdict, self)
    return verdict === null ? null : { backend: data.backend, verdict }
  } catch {
    return null
  }
}

/** A verdict in the hash (null: unreadable, or this replica's own: no other replica's verdict stands there). */
function parseVerdict(raw: unknown, self: string): SharedVerdict | null {
  if (typeof raw !== 'string') return null
  try {
    return verdictFrom(JSON.parse(raw), self)
  } catch {
    return null
  }
}

function isOwn(data: unknown, self: string): boolean {
  return typeof data === 'object' && data !== null && (data as Record<string, unknown>).by === self
}

function verdictFrom(data: unknown, self: string): SharedVerdict | null {
  if (typeof data !== 'object' || data === null) return null
  const { up, ejectedUntil, expiresAt, by } = data as Record<string, unknown>
  if (typeof up !== 'boolean' || typeof ejectedUntil !== 'number' || typeof expiresAt !== 'number' || by === self) return null
  return { up, ejectedUntil, expiresAt }
}
