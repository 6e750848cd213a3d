/**
 * One replica's side of shared backend health (Redis mode, DESIGN.md
 * "Shared state"): what it tells the other replicas through the health board
 * (a backend it found down or ejected, refreshed at every failed check; the
 * withdrawal when its own check brings the backend back), and what it does
 * with theirs. A verdict on a backend this replica finds healthy is held only
 * once this replica's own check, run as the verdict arrives, fails too
 * (health-state.ts `needsOwnCheck`): a replica that cannot reach a backend
 * (a partition, a firewall rule, a sidecar) would otherwise take it out on
 * every replica for as long as that lasts. A held verdict is merged into the
 * backend's usability (health-state.ts `isUsableWith`) until it lapses or is
 * withdrawn, or this replica's own check passes after it.
 */
import type { Logger } from 'pino'
import type { Clock } from '../context.js'
import type { HealthBoard } from '../state/health-board.js'
import type { Backend } from './backend.js'
import { isDownBeforeConfirmation, isUsable, needsOwnCheck, verdictLapsesAt, type HealthSettings, type HealthState, type SharedVerdict } from './health-state.js'
import type { ModelRoute } from './model-route.js'

/** A verdict its replica stopped refreshing (dead, or Redis away) lapses after this many of its health intervals. */
const VERDICT_INTERVALS = 3

/** What the backend monitor lends: its clock and logger, its checks, its timers, and how it publishes a backend's usability. */
export interface VerdictHost {
  readonly clock: Clock
  readonly logger: Logger
  readonly board: HealthBoard
  /** Whether this generation serves new requests (a retired one shares nothing; it still checks verdicts for its own routing). */
  serving(): boolean
  stopped(): boolean
  /** Runs the backend's health check now: true when it passed. */
  check(route: ModelRoute, backend: Backend): Promise<boolean>
  /** Sets the backend's gauge and wakes or turns away its model's queue; returns whether the backend is usable. */
  publish(route: ModelRoute, backend: Backend): boolean
  after(ms: number, run: () => void): void
}

export class SharedVerdicts {
  readonly #host: VerdictHost
  /** The latest verdict heard on each backend (null: withdrawn). */
  readonly #heard = new WeakMap<Backend, SharedVerdict | null>()
  /** Backends with an own check of theirs for a verdict in flight. */
  readonly #checking = new WeakSet<Backend>()
  /** Orders check starts and holds: a passed check lets a verdict go only if it started after the hold began. */
  #tick = 0
  /** When (in ticks) each backend's verdict began to be held; refreshes of a held verdict keep it. */
  readonly #heldSince = new WeakMap<Backend, number>()
  /** The last verdict set aside on each backend in the current run (logged once, at its start). */
  readonly #lastSetAside = new WeakMap<Backend, SharedVerdict>()
  /** When (in ticks) the latest passed own check on each backend started: a failure that started earlier holds nothing. */
  readonly #passedSince = new WeakMap<Backend, number>()
  /** When (in ticks) the latest failed own check on each backend started: a pass that started earlier lets nothing go. */
  readonly #failedSince = new WeakMap<Backend, number>()

  constructor(host: VerdictHost) {
    this.#host = host
  }

  /** Listens for the other replicas' verdicts on the route's backends. */
  watch(route: ModelRoute): void {
    this.#host.board.watch(
      route.name,
      route.backends.map((b) => b.name),
      (name, verdict) => {
        const backend = route.backends.find((b) => b.name === name)
        if (backend !== undefined) this.#receive(route, backend, verdict)
      },
    )
  }

  /**
   * Tells the board what this replica's own state says: down or ejected
   * (again, which refreshes the verdict), or back up after being neither.
   * A backend down only because it was never seen healthy here is not
   * shared (health-state.ts `isDownBeforeConfirmation`), and its recovery
   * clears nothing: the verdict on the board, if any, is another replica's.
   */
  share(route: ModelRoute, backend: Backend, before: HealthState, settings: HealthSettings, now: number): void {
    const after = backend.health
    if (after === before || !this.#host.serving()) return
    const shared = (state: HealthState) => !isUsable(state, now) && !isDownBeforeConfirmation(state, settings, now)
    if (shared(after)) {
      const expiresAt = Math.max(now + settings.intervalMs * VERDICT_INTERVALS, after.ejectedUntil)
      this.#host.board.publish(route.name, backend.name, { up: after.up, ejectedUntil: after.ejectedUntil, expiresAt })
    } else if (isUsable(after, now) && shared(before)) {
      this.#host.board.clear(route.name, backend.name)
    }
  }

  /** A scheduled check is starting: what it hands `afterOwnCheck` when it ends. */
  checkStarting(): number {
    return ++this.#tick
  }

  /**
   * A scheduled check ended. Passed: a verdict held since before it began no
   * longer holds here, and one held since it began (at once, the backend then
   * not yet confirmed here: a start, a backend a reload added) is checked now.
   * Failed: a verdict in force that was set aside is held now, without
   * waiting for its next refresh.
   */
  afterOwnCheck(route: ModelRoute, backend: Backend, started: number, healthy: boolean): void {
    const held = inForce(backend.shared, this.#host.clock.now()) ? backend.shared : null
    this.#checked(route, backend, started, healthy, held)
  }

  /**
   * Another replica's verdict (or its withdrawal) arrived. A withdrawal, or a
   * verdict on a backend that is out here anyway, applies at once. One on a
   * backend this replica finds healthy is held only if this replica's own
   * check fails too; meanwhile whatever was held stands (a refresh of a
   * verdict in force takes its place, with its new expiry). Each refresh is
   * checked again, so a held verdict is let go once the backend passes here.
   */
  #receive(route: ModelRoute, backend: Backend, verdict: SharedVerdict | null): void {
    if (this.#host.stopped()) return
    this.#heard.set(backend, verdict)
    const now = this.#host.clock.now()
    if (verdict === null || !needsOwnCheck(backend.health, verdict, now)) return this.#hold(route, backend, verdict)
    if (inForce(backend.shared, now)) this.#hold(route, backend, verdict)
    this.#check(route, backend)
  }

  /**
   * Checks the backend for the latest verdict heard, one check at a time:
   * refreshes from several replicas come faster than a check of a backend
   * that hangs can time out, and each check was overtaken by the next.
   */
  #check(route: ModelRoute, backend: Backend): void {
    if (this.#checking.has(backend)) return
    this.#checking.add(backend)
    const started = ++this.#tick
    const settle = (healthy: boolean) => {
      this.#checking.delete(backend)
      if (!this.#host.stopped()) this.#checked(route, backend, started, healthy, this.#heard.get(backend) ?? null)
    }
    this.#host
      .check(route, backend)
      .then(settle, () => settle(false))
      .catch((error: unknown) => {
        this.#host.logger.error({ err: error, model: route.name, backend: backend.name }, 'acting on a shared verdict failed')
      })
  }

  /**
   * An own check ended, about `verdict` (the latest heard, for a check run
   * for a verdict; the one held, for a scheduled check). Failed: the latest
   * verdict heard is held. Passed: `verdict` is set aside, and a held one let
   * go, if the check began after the hold and after the latest failed check
   * (a refresh heard meanwhile changes nothing: refreshes from several
   * replicas may come faster than any check answers); else one more check.
   */
  #checked(route: ModelRoute, backend: Backend, started: number, healthy: boolean, verdict: SharedVerdict | null): void {
    const now = this.#host.clock.now()
    if (!healthy) return this.#failed(route, backend, started, now)
    this.#passed(backend, started)
    if (verdict === null) return
    if (this.#newest(backend, started)) this.#setAside(route, backend)
    else if (needsOwnCheck(backend.health, verdict, now)) this.#check(route, backend)
  }

  /** A pass that began after the hold and after the latest failed own check: it may let the verdict go. */
  #newest(backend: Backend, started: number): boolean {
    return started > (this.#heldSince.get(backend) ?? 0) && started > (this.#failedSince.get(backend) ?? 0)
  }

  /**
   * An own check failed: the latest verdict heard, if in force and not held
   * yet, is held, unless an own check that began later has passed (a hung
   * check answering late must not override a newer pass).
   */
  #failed(route: ModelRoute, backend: Backend, started: number, now: number): void {
    this.#failedSince.set(backend, Math.max(started, this.#failedSince.get(backend) ?? 0))
    const latest = this.#heard.get(backend)
    if (latest === undefined || latest === null || !inForce(latest, now) || backend.shared === latest) return
    if (started > (this.#passedSince.get(backend) ?? 0)) this.#hold(route, backend, latest)
  }

  #passed(backend: Backend, started: number): void {
    this.#passedSince.set(backend, Math.max(started, this.#passedSince.get(backend) ?? 0))
  }

  /**
   * This replica's own check passed after the verdict was heard: its own
   * view wins. Said at info when a held verdict is let go or a run of
   * set-asides starts (the first, or the first since the last one lapsed);
   * each further refresh of the run (one per health interval of the replica
   * that cannot reach the backend) at debug.
   */
  #setAside(route: ModelRoute, backend: Backend): void {
    const now = this.#host.clock.now()
    const letGo = inForce(backend.shared, now)
    const last = this.#lastSetAside.get(backend)
    const fields = { model: route.name, backend: backend.name }
    const message = 'another replica finds this backend down; this replica’s own check passes, so it keeps using it'
    const latest = this.#heard.get(backend) ?? null
    // Said once per run: when a held verdict is let go, or the first of a run (none set aside in force before).
    if (letGo || (inForce(latest, now) && !inForce(last ?? null, now))) this.#host.logger.info(fields, message)
    else this.#host.logger.debug(fields, message)
    if (latest) this.#lastSetAside.set(backend, latest)
    if (backend.shared !== null) this.#hold(route, backend, null)
  }

  /** Merges a verdict (null: none) into the backend's usability, and looks again when it lapses. */
  #hold(route: ModelRoute, backend: Backend, verdict: SharedVerdict | null): void {
    const now = this.#host.clock.now()
    if (verdict === null) this.#heldSince.delete(backend)
    else if (!inForce(backend.shared, now)) this.#heldSince.set(backend, ++this.#tick)
    // Held or withdrawn: a later set-aside starts a new run.
    if (verdict !== null || this.#heard.get(backend) === null) this.#lastSetAside.delete(backend)
    const wasUsable = backend.usable(now)
    backend.shared = verdict
    const usable = this.#host.publish(route, backend)
    if (usable !== wasUsable) this.#host.logger.warn({ model: route.name, backend: backend.name, up: usable, shared: true }, usable ? 'backend up' : 'backend down')
    if (verdict !== null) this.#recheckWhenLapsed(route, backend, verdict)
  }

  /** Publishes again once the verdict has lapsed (timers may fire a little early: check, and wait on if so). */
  #recheckWhenLapsed(route: ModelRoute, backend: Backend, verdict: SharedVerdict): void {
    const wait = verdictLapsesAt(verdict) - this.#host.clock.now()
    if (backend.shared !== verdict) return
    if (wait > 0) this.#host.after(wait + 1, () => this.#recheckWhenLapsed(route, backend, verdict))
    else this.#host.publish(route, backend)
  }
}

function inForce(verdict: SharedVerdict | null, now: number): boolean {
  return verdict !== null && now < verdictLapsesAt(verdict)
}
