/**
 * A backend's health as pure transitions. Two sources feed it:
 *
 * - active checks (`health.path` every `interval_ms`): `unhealthy_after`
 *   consecutive failures mark it down (the first failure, for a backend
 *   never shown healthy or while it is ejected); one success marks it up again and ends any
 *   ejection (DESIGN.md: "healthy again after one successful health check");
 * - real traffic (passive): a connect failure ejects it at once; 5xx answers,
 *   timeouts and answers broken after their head eject it after
 *   `unhealthy_after` in a row. An ejection lasts a cool-down that doubles
 *   with each ejection in a row (interval × 2^k, capped at 64 intervals)
 *   unless a passing check ends it first (a failing one takes it down until
 *   one passes; the doubling holds back a backend no check has answered
 *   for within its cool-down); a success on real traffic (a whole
 *   answer) forgets the count. Failures reported while already ejected (the
 *   other requests that were in flight when it broke) are one incident, not
 *   new ejections.
 *
 * A backend takes new requests only when it is up and not ejected.
 *
 * Taking requests and counting as healthy differ at first: a backend starts
 * up (routing is optimistic) but unconfirmed, and counts for `/readyz` and
 * `sluice_backend_up` only once something showed it healthy — a passed check
 * or a successful answer to real traffic. Optimistic routing lasts until the
 * first check answers (it runs at start and settles within milliseconds),
 * and a failed one takes an unconfirmed backend down at once. Refusing
 * traffic until then would turn every restart (and every backend a reload
 * adds) into a burst of 503s, while a dead backend tried meanwhile costs
 * what any passive failure costs (a retry elsewhere or a 502, then an
 * ejection). Readiness and the gauge are what operators and load balancers
 * act on, so they claim nothing no check has shown. A reload
 * carries a known backend's state over (model-route.ts `healthKnownTo`).
 *
 * In Redis mode other replicas add a shared verdict (a backend one of them
 * found down or ejected, state/health-board.ts): the backend is usable only
 * when neither this replica's state nor a verdict it holds says no. A
 * verdict against a backend this replica finds healthy is held only once
 * this replica's own check, run on receipt, fails too (`needsOwnCheck`).
 */

export interface HealthState {
  readonly up: boolean
  /** Something has shown the backend healthy: a passed check or a successful answer. */
  readonly confirmed: boolean
  readonly activeFailures: number
  readonly passiveFailures: number
  /** Ejections in a row, for the growing cool-down. */
  readonly ejections: number
  /** Ms since the epoch until which the backend takes no new requests. */
  readonly ejectedUntil: number
}

/** A replica's published finding that a backend is down or ejected, in force until `expiresAt`. */
export interface SharedVerdict {
  readonly up: boolean
  readonly ejectedUntil: number
  /** Ms since the epoch: a verdict its replica stopped refreshing (dead, or Redis away) lapses then. */
  readonly expiresAt: number
}

export interface HealthSettings {
  readonly unhealthyAfter: number
  readonly intervalMs: number
}

/** Up (routing may try it) but unconfirmed (not ready, `sluice_backend_up` 0) until a check or an answer shows it healthy. */
export const INITIAL_HEALTH: HealthState = { up: true, confirmed: false, activeFailures: 0, passiveFailures: 0, ejections: 0, ejectedUntil: 0 }

export type PassiveFailure = 'connect' | 'status' | 'timeout'

const MAX_COOL_DOWN_INTERVALS = 64

export function isUsable(state: HealthState, now: number): boolean {
  return state.up && now >= state.ejectedUntil
}

/** The merge rule: this replica's own state, and a shared verdict that has not lapsed. */
export function isUsableWith(state: HealthState, shared: SharedVerdict | null, now: number): boolean {
  if (!isUsable(state, now)) return false
  if (shared === null || now >= shared.expiresAt) return true
  return shared.up && now >= shared.ejectedUntil
}

/** Counts for readiness and `sluice_backend_up`: usable, and shown healthy at least once. */
export function isConfirmedWith(state: HealthState, shared: SharedVerdict | null, now: number): boolean {
  return state.confirmed && isUsableWith(state, shared, now)
}

/**
 * Whether another replica's verdict must first be borne out by this
 * replica's own check: it would take out a backend this replica has seen
 * healthy and still finds usable. One replica's broken network path (a
 * partition, a sidecar, a firewall rule) would otherwise take a healthy
 * backend out on every replica for as long as it lasts. Otherwise (the
 * backend already out here, or never seen healthy) it applies at once.
 */
export function needsOwnCheck(state: HealthState, shared: SharedVerdict, now: number): boolean {
  return state.confirmed && isUsable(state, now) && !isUsableWith(state, shared, now)
}

/** When a shared verdict stops counting (its ejection ends or it expires). */
export function verdictLapsesAt(shared: SharedVerdict): number {
  return shared.up ? Math.min(shared.ejectedUntil, shared.expiresAt) : shared.expiresAt
}

/**
 * `unhealthy_after` failures in a row take a backend down; one that has never
 * been shown healthy, or that real traffic has ejected, goes down at its
 * first failed check. The tolerance is
 * for a backend known to work that missed a probe; one never seen working
 * and now failing its check would otherwise keep getting requests (502s)
 * while `/readyz` already reports it, for up to `unhealthy_after` intervals.
 */
export function afterActiveCheck(state: HealthState, ok: boolean, settings: HealthSettings, now: number): HealthState {
  if (ok) return { ...state, up: true, confirmed: true, activeFailures: 0, ejectedUntil: 0 }
  const activeFailures = state.activeFailures + 1
  // Ejected by real traffic and now failing its check too: down until a check passes. Left up, it took
  // requests again when the ejection ran out, and /readyz said ready, with every check since failing (an ops review).
  const ejected = now < state.ejectedUntil
  return { ...state, activeFailures, up: state.up && state.confirmed && !ejected && activeFailures < settings.unhealthyAfter }
}

/**
 * Down only by the rule for a backend never seen healthy (fewer failed checks
 * than `unhealthy_after`, no ejection): a finding for this replica alone. In
 * Redis mode it is not shared, since other replicas may have seen the backend
 * healthy, and one failed first probe of a starting replica (its network or a
 * sidecar not ready yet) would otherwise take the backend out on all of them.
 */
export function isDownBeforeConfirmation(state: HealthState, settings: HealthSettings, now: number): boolean {
  return !state.up && !state.confirmed && state.activeFailures < settings.unhealthyAfter && now >= state.ejectedUntil
}

/** A successful answer confirms the backend; it does not lift a down verdict (only a passed check does). */
export function afterPassiveSuccess(state: HealthState): HealthState {
  if (state.confirmed && state.passiveFailures === 0 && state.ejections === 0) return state
  return { ...state, confirmed: true, passiveFailures: 0, ejections: 0 }
}

export function afterPassiveFailure(state: HealthState, failure: PassiveFailure, settings: HealthSettings, now: number): HealthState {
  if (now < state.ejectedUntil) return state
  const passiveFailures = state.passiveFailures + 1
  const eject = failure === 'connect' || passiveFailures >= settings.unhealthyAfter
  if (!eject) return { ...state, passiveFailures }
  const coolDown = settings.intervalMs * Math.min(2 ** state.ejections, MAX_COOL_DOWN_INTERVALS)
  return { ...state, passiveFailures: 0, ejections: state.ejections + 1, ejectedUntil: Math.max(state.ejectedUntil, now + coolDown) }
}
