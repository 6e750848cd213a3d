import { describe, expect, it } from 'vitest'
import {
  afterActiveCheck,
  afterPassiveFailure,
  afterPassiveSuccess,
  INITIAL_HEALTH,
  isConfirmedWith,
  isDownBeforeConfirmation,
  isUsable,
  isUsableWith,
  needsOwnCheck,
  verdictLapsesAt,
  type HealthSettings,
  type HealthState,
  type PassiveFailure,
  type SharedVerdict,
} from '../../src/routing/health-state.js'

const settings: HealthSettings = { unhealthyAfter: 3, intervalMs: 1000 }
const T0 = 1_700_000_000_000

function activeChecks(state: HealthState, results: readonly boolean[], s: HealthSettings = settings, now = T0): HealthState {
  return results.reduce((current, ok) => afterActiveCheck(current, ok, s, now), state)
}

function passiveFailures(state: HealthState, failure: PassiveFailure, count: number, now: number, s: HealthSettings = settings): HealthState {
  let current = state
  for (let i = 0; i < count; i++) current = afterPassiveFailure(current, failure, s, now)
  return current
}

describe('isUsable', () => {
  it('is true for a fresh backend', () => {
    expect(isUsable(INITIAL_HEALTH, T0)).toBe(true)
  })

  it('is false when down, even with no ejection', () => {
    expect(isUsable({ ...INITIAL_HEALTH, up: false }, T0)).toBe(false)
  })

  it('is false until the ejection ends, true from its last millisecond on', () => {
    const ejected: HealthState = { ...INITIAL_HEALTH, ejectedUntil: T0 + 500 }
    expect(isUsable(ejected, T0)).toBe(false)
    expect(isUsable(ejected, T0 + 499)).toBe(false)
    expect(isUsable(ejected, T0 + 500)).toBe(true)
  })

  it('is false when down and past its ejection', () => {
    expect(isUsable({ ...INITIAL_HEALTH, up: false, ejectedUntil: T0 - 1 }, T0)).toBe(false)
  })
})

describe('active health checks', () => {
  /** A backend a check has shown healthy: `unhealthy_after` applies to it. */
  const seenHealthy = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)

  it('keep a backend seen healthy up through unhealthy_after - 1 failed checks and take it down at unhealthy_after', () => {
    const twoFailed = activeChecks(seenHealthy, [false, false])
    expect(twoFailed.up).toBe(true)
    expect(twoFailed.activeFailures).toBe(2)
    expect(isUsable(twoFailed, T0)).toBe(true)

    const threeFailed = afterActiveCheck(twoFailed, false, settings, T0)
    expect(threeFailed.up).toBe(false)
    expect(isUsable(threeFailed, T0)).toBe(false)
  })

  it('take a backend never shown healthy down at its first failed check', () => {
    const failedFirst = afterActiveCheck(INITIAL_HEALTH, false, settings, T0)
    expect(failedFirst.up).toBe(false)
    expect(isUsable(failedFirst, T0)).toBe(false)
    // A passive failure before the check does not confirm it either.
    const ejectedThenFailed = afterActiveCheck(afterPassiveFailure(INITIAL_HEALTH, 'status', settings, T0), false, settings, T0)
    expect(ejectedThenFailed.up).toBe(false)
  })

  it('apply unhealthy_after to a backend confirmed by real traffic, not by a check', () => {
    const answered = afterPassiveSuccess(INITIAL_HEALTH)
    expect(activeChecks(answered, [false, false]).up).toBe(true)
    expect(activeChecks(answered, [false, false, false]).up).toBe(false)
  })

  it('go down on the first failure with unhealthy_after 1', () => {
    expect(afterActiveCheck(seenHealthy, false, { unhealthyAfter: 1, intervalMs: 100 }, T0).up).toBe(false)
  })

  it('count failures in a row only: a success in between starts over', () => {
    const state = activeChecks(INITIAL_HEALTH, [true, false, false, true, false, false])
    expect(state.up).toBe(true)
    expect(state.activeFailures).toBe(2)
  })

  it('bring a down backend up after one successful check', () => {
    for (const start of [INITIAL_HEALTH, seenHealthy]) {
      const down = activeChecks(start, [false, false, false, false, false])
      expect(down.up).toBe(false)

      const up = afterActiveCheck(down, true, settings, T0)
      expect(up.up).toBe(true)
      expect(up.activeFailures).toBe(0)
      expect(isUsable(up, T0)).toBe(true)
    }
  })

  it('stay down while further checks fail', () => {
    const down = activeChecks(seenHealthy, [false, false, false, false, false, false, false])
    expect(down.up).toBe(false)
  })

  it('do not touch the passive state', () => {
    const ejected = afterPassiveFailure(INITIAL_HEALTH, 'connect', settings, T0)
    const checked = afterActiveCheck(ejected, false, settings, T0)
    expect(checked.ejections).toBe(ejected.ejections)
    expect(checked.ejectedUntil).toBe(ejected.ejectedUntil)
  })

  // Regression: a success used to leave a passive ejection (up to 64 intervals) in place.
  it('a successful check makes an ejected backend usable again (DESIGN: healthy after one successful check)', () => {
    const ejected = passiveFailures(INITIAL_HEALTH, 'connect', 7, T0)
    expect(isUsable(ejected, T0 + settings.intervalMs / 2)).toBe(false)

    const checked = afterActiveCheck(ejected, true, settings, T0)
    expect(isUsable(checked, T0 + settings.intervalMs / 2)).toBe(true)
  })

  // Regression (ops review, session 26): a dead backend took requests again, and counted for /readyz,
  // when its ejection ran out, though the check run during the ejection had failed.
  it('a failed check while ejected takes the backend down past the ejection, until a check passes', () => {
    const ejected = afterPassiveFailure(seenHealthy, 'connect', settings, T0)
    const failed = afterActiveCheck(ejected, false, settings, T0 + settings.intervalMs / 2)
    expect(isUsable(failed, ejected.ejectedUntil)).toBe(false)
    expect(isUsable(failed, ejected.ejectedUntil + 10 * settings.intervalMs)).toBe(false)
    expect(isUsable(afterActiveCheck(failed, true, settings, ejected.ejectedUntil), ejected.ejectedUntil)).toBe(true)
    // Once the ejection is over, one failed check is again only one of unhealthy_after.
    const lapsed = afterActiveCheck(ejected, false, settings, ejected.ejectedUntil)
    expect(isUsable(lapsed, ejected.ejectedUntil)).toBe(true)
  })
})

describe('passive failures', () => {
  it('a connect failure ejects at once, for one interval, and leaves the backend up', () => {
    const state = afterPassiveFailure(INITIAL_HEALTH, 'connect', settings, T0)
    expect(state.up).toBe(true)
    expect(state.ejections).toBe(1)
    expect(state.ejectedUntil).toBe(T0 + settings.intervalMs)
    expect(isUsable(state, T0)).toBe(false)
    expect(isUsable(state, T0 + settings.intervalMs - 1)).toBe(false)
    expect(isUsable(state, T0 + settings.intervalMs)).toBe(true)
  })

  for (const failure of ['status', 'timeout'] as const) {
    it(`${failure} failures eject only after unhealthy_after in a row`, () => {
      const below = passiveFailures(INITIAL_HEALTH, failure, settings.unhealthyAfter - 1, T0)
      expect(below.passiveFailures).toBe(settings.unhealthyAfter - 1)
      expect(below.ejections).toBe(0)
      expect(isUsable(below, T0)).toBe(true)

      const at = afterPassiveFailure(below, failure, settings, T0)
      expect(at.ejections).toBe(1)
      expect(at.passiveFailures).toBe(0)
      expect(at.ejectedUntil).toBe(T0 + settings.intervalMs)
      expect(isUsable(at, T0)).toBe(false)
      expect(at.up).toBe(true)
    })
  }

  it('status failures eject at once with unhealthy_after 1', () => {
    const state = afterPassiveFailure(INITIAL_HEALTH, 'status', { unhealthyAfter: 1, intervalMs: 200 }, T0)
    expect(state.ejectedUntil).toBe(T0 + 200)
  })

  it('a success between failures starts the count over', () => {
    let state = passiveFailures(INITIAL_HEALTH, 'status', 2, T0)
    state = afterPassiveSuccess(state)
    state = passiveFailures(state, 'status', 2, T0)
    expect(state.ejections).toBe(0)
    expect(isUsable(state, T0)).toBe(true)
  })

  it('the cool-down doubles with each ejection in a row: 1, 2, 4, 8 intervals', () => {
    let state = INITIAL_HEALTH
    let now = T0
    const coolDowns: number[] = []
    for (let i = 0; i < 4; i++) {
      state = afterPassiveFailure(state, 'connect', settings, now)
      coolDowns.push(state.ejectedUntil - now)
      now = state.ejectedUntil // the next failure comes when the backend is tried again
    }
    expect(coolDowns).toEqual([1000, 2000, 4000, 8000])
  })

  it('the cool-down is capped at 64 intervals', () => {
    let state = INITIAL_HEALTH
    let now = T0
    const coolDowns: number[] = []
    for (let i = 0; i < 12; i++) {
      state = afterPassiveFailure(state, 'connect', settings, now)
      coolDowns.push(state.ejectedUntil - now)
      now = state.ejectedUntil
    }
    expect(coolDowns.slice(0, 8)).toEqual([1, 2, 4, 8, 16, 32, 64, 64].map((k) => k * settings.intervalMs))
    expect(Math.max(...coolDowns)).toBe(64 * settings.intervalMs)
  })

  it('never shortens an ejection that is already longer', () => {
    const long: HealthState = { ...INITIAL_HEALTH, ejections: 0, ejectedUntil: T0 + 60_000 }
    expect(afterPassiveFailure(long, 'connect', settings, T0).ejectedUntil).toBe(T0 + 60_000)
  })

  it('a success forgets the ejections: the next cool-down is one interval again', () => {
    let state = passiveFailures(INITIAL_HEALTH, 'connect', 1, T0)
    state = passiveFailures(state, 'connect', 1, state.ejectedUntil)
    state = passiveFailures(state, 'connect', 1, state.ejectedUntil)
    expect(state.ejections).toBe(3)

    const later = state.ejectedUntil
    const forgotten = afterPassiveSuccess(state)
    expect(forgotten.ejections).toBe(0)
    expect(forgotten.passiveFailures).toBe(0)

    const again = afterPassiveFailure(forgotten, 'connect', settings, later)
    expect(again.ejectedUntil - later).toBe(settings.intervalMs)
  })

  it('a success on a clean, confirmed state returns the same object (no needless writes)', () => {
    const confirmed = afterPassiveSuccess(INITIAL_HEALTH)
    expect(afterPassiveSuccess(confirmed)).toBe(confirmed)
  })

  it('transitions never mutate their input', () => {
    const before = { ...INITIAL_HEALTH }
    afterPassiveFailure(INITIAL_HEALTH, 'connect', settings, T0)
    afterActiveCheck(INITIAL_HEALTH, false, settings, T0)
    expect(INITIAL_HEALTH).toEqual(before)
  })
})

describe('isDownBeforeConfirmation: a finding for this replica alone (not shared in Redis mode)', () => {
  it('holds for a backend never seen healthy, down by fewer failed checks than unhealthy_after', () => {
    expect(isDownBeforeConfirmation(activeChecks(INITIAL_HEALTH, [false]), settings, T0)).toBe(true)
    expect(isDownBeforeConfirmation(activeChecks(INITIAL_HEALTH, [false, false]), settings, T0)).toBe(true)
  })

  it('does not hold from unhealthy_after failed checks on, for a backend seen healthy, nor while ejected', () => {
    expect(isDownBeforeConfirmation(activeChecks(INITIAL_HEALTH, [false, false, false]), settings, T0)).toBe(false)
    expect(isDownBeforeConfirmation(activeChecks(INITIAL_HEALTH, [true, false, false, false]), settings, T0)).toBe(false)
    const ejectedThenFailed = afterActiveCheck(afterPassiveFailure(INITIAL_HEALTH, 'connect', settings, T0), false, settings, T0)
    expect(isDownBeforeConfirmation(ejectedThenFailed, settings, T0)).toBe(false)
    expect(isDownBeforeConfirmation(ejectedThenFailed, settings, ejectedThenFailed.ejectedUntil)).toBe(true)
  })

  it('does not hold for a backend that is usable', () => {
    expect(isDownBeforeConfirmation(INITIAL_HEALTH, settings, T0)).toBe(false)
    expect(isDownBeforeConfirmation(activeChecks(INITIAL_HEALTH, [false, true]), settings, T0)).toBe(false)
  })
})

describe('confirmation: what readiness and sluice_backend_up count', () => {
  const confirmed = (state: HealthState, now = T0) => isConfirmedWith(state, null, now)

  it('a fresh backend takes requests (routing is optimistic) but is not confirmed', () => {
    expect(INITIAL_HEALTH.confirmed).toBe(false)
    expect(isUsable(INITIAL_HEALTH, T0)).toBe(true)
    expect(confirmed(INITIAL_HEALTH)).toBe(false)
  })

  it('one passed check confirms it', () => {
    const checked = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    expect(checked.confirmed).toBe(true)
    expect(confirmed(checked)).toBe(true)
  })

  it('one successful answer to real traffic confirms it', () => {
    expect(confirmed(afterPassiveSuccess(INITIAL_HEALTH))).toBe(true)
  })

  it('failed checks never confirm it, before or after it goes down', () => {
    for (let failed = 1; failed <= settings.unhealthyAfter + 1; failed++) {
      expect(confirmed(activeChecks(INITIAL_HEALTH, Array<boolean>(failed).fill(false)))).toBe(false)
    }
  })

  it('a passive failure neither confirms it nor forgets a confirmation', () => {
    expect(afterPassiveFailure(INITIAL_HEALTH, 'status', settings, T0).confirmed).toBe(false)
    const checked = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    expect(afterPassiveFailure(checked, 'connect', settings, T0).confirmed).toBe(true)
  })

  it('a confirmed backend stops counting while down or ejected, and counts again when usable', () => {
    const checked = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    const down = activeChecks(checked, [false, false, false])
    expect(confirmed(down)).toBe(false)
    expect(confirmed(afterActiveCheck(down, true, settings, T0))).toBe(true)

    const ejected = afterPassiveFailure(checked, 'connect', settings, T0)
    expect(confirmed(ejected, T0)).toBe(false)
    expect(confirmed(ejected, ejected.ejectedUntil)).toBe(true)
  })

  it('a successful answer confirms but does not bring a down backend back (only a check does)', () => {
    const down = activeChecks(INITIAL_HEALTH, [false, false, false])
    const answered = afterPassiveSuccess(down)
    expect(answered.confirmed).toBe(true)
    expect(answered.up).toBe(false)
    expect(confirmed(answered)).toBe(false)
  })

  it('a shared verdict in force makes a confirmed backend not count', () => {
    const checked = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    const down: SharedVerdict = { up: false, ejectedUntil: 0, expiresAt: T0 + 3000 }
    expect(isConfirmedWith(checked, down, T0)).toBe(false)
    expect(isConfirmedWith(checked, down, T0 + 3000)).toBe(true)
  })
})

describe('one incident, one ejection', () => {
  it('failures reported while already ejected neither extend the cool-down nor count as new ejections', () => {
    const first = afterPassiveFailure(INITIAL_HEALTH, 'connect', settings, T0)
    const burst = [1, 2, 3].reduce((state, i) => afterPassiveFailure(state, 'connect', settings, T0 + i), first)
    expect(burst).toEqual(first)
    // Once the cool-down is over, a new failure is a new ejection, twice as long.
    const again = afterPassiveFailure(burst, 'connect', settings, first.ejectedUntil)
    expect(again.ejections).toBe(2)
    expect(again.ejectedUntil).toBe(first.ejectedUntil + 2 * settings.intervalMs)
  })
})

describe('merging a shared verdict (Redis mode)', () => {
  const down: SharedVerdict = { up: false, ejectedUntil: 0, expiresAt: T0 + 3000 }
  const ejected: SharedVerdict = { up: true, ejectedUntil: T0 + 2000, expiresAt: T0 + 3000 }

  it('without a verdict, is this replica’s own view', () => {
    expect(isUsableWith(INITIAL_HEALTH, null, T0)).toBe(true)
    expect(isUsableWith(activeChecks(INITIAL_HEALTH, [false, false, false]), null, T0)).toBe(false)
  })

  it('a verdict in force makes a backend this replica finds healthy unusable', () => {
    expect(isUsableWith(INITIAL_HEALTH, down, T0)).toBe(false)
    expect(isUsableWith(INITIAL_HEALTH, ejected, T0 + 1999)).toBe(false)
  })

  it('a verdict never makes a backend this replica finds down usable', () => {
    const upVerdict: SharedVerdict = { up: true, ejectedUntil: 0, expiresAt: T0 + 3000 }
    expect(isUsableWith(activeChecks(INITIAL_HEALTH, [false, false, false]), upVerdict, T0)).toBe(false)
    expect(isUsableWith(passiveFailures(INITIAL_HEALTH, 'connect', 1, T0), upVerdict, T0)).toBe(false)
  })

  it('a verdict lapses at its expiry, and an ejection verdict when its ejection ends', () => {
    expect(isUsableWith(INITIAL_HEALTH, down, T0 + 3000)).toBe(true)
    expect(isUsableWith(INITIAL_HEALTH, ejected, T0 + 2000)).toBe(true)
    expect(verdictLapsesAt(down)).toBe(T0 + 3000)
    expect(verdictLapsesAt(ejected)).toBe(T0 + 2000)
  })
})

describe('needsOwnCheck: another replica’s verdict is held only once this replica’s own check fails too', () => {
  const down: SharedVerdict = { up: false, ejectedUntil: 0, expiresAt: T0 + 3000 }
  const ejected: SharedVerdict = { up: true, ejectedUntil: T0 + 2000, expiresAt: T0 + 3000 }
  const seenHealthy = activeChecks(INITIAL_HEALTH, [true])

  it('holds for a verdict in force against a backend this replica has seen healthy and finds usable', () => {
    expect(needsOwnCheck(seenHealthy, down, T0)).toBe(true)
    expect(needsOwnCheck(seenHealthy, ejected, T0)).toBe(true)
    expect(needsOwnCheck(activeChecks(INITIAL_HEALTH, [true, false, false]), down, T0)).toBe(true)
  })

  it('does not hold for a backend never seen healthy here: the verdict applies at once', () => {
    expect(needsOwnCheck(INITIAL_HEALTH, down, T0)).toBe(false)
  })

  it('does not hold for a backend already out here, down or ejected', () => {
    expect(needsOwnCheck(activeChecks(INITIAL_HEALTH, [true, false, false, false]), down, T0)).toBe(false)
    const ownEjection = afterPassiveFailure(seenHealthy, 'connect', settings, T0)
    expect(needsOwnCheck(ownEjection, down, T0)).toBe(false)
    expect(needsOwnCheck(ownEjection, down, ownEjection.ejectedUntil)).toBe(true)
  })

  it('does not hold for a verdict that would change nothing: lapsed, or its ejection over', () => {
    expect(needsOwnCheck(seenHealthy, down, T0 + 3000)).toBe(false)
    expect(needsOwnCheck(seenHealthy, ejected, T0 + 2000)).toBe(false)
  })
})
