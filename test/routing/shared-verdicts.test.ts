/**
 * SharedVerdicts as a state machine, without HTTP: the host's checks are
 * promises the test settles in the order it wants, its clock is the test's,
 * and the order of events (a verdict heard, a check started or answered, a
 * scheduled check's outcome) is exact. The monitor-level behaviour over a
 * real backend is in monitor-heard-verdicts.test.ts. Each case here is a
 * regression a review found with a scratch test (2026-11-25).
 */
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import type { Backend } from '../../src/routing/backend.js'
import { afterActiveCheck, type SharedVerdict } from '../../src/routing/health-state.js'
import { buildModelRoutes, type ModelRoute } from '../../src/routing/model-route.js'
import { SharedVerdicts } from '../../src/routing/shared-verdicts.js'
import type { HealthBoard } from '../../src/state/health-board.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { configFrom } from '../support/gateway.js'

const cleanups = cleanupsAfterEach()
const T0 = 1_700_000_000_000
const SETS_ASIDE = 'another replica finds this backend down; this replica’s own check passes, so it keeps using it'
const INFO = 30

function harness(options: { serving?: boolean } = {}) {
  let now = T0
  let deliver: ((backend: string, verdict: SharedVerdict | null) => void) | undefined
  const board: HealthBoard = { publish: () => undefined, clear: () => undefined, watch: (_m, _b, onVerdict) => void (deliver = onVerdict), close: () => undefined }
  const checks: ((healthy: boolean) => void)[] = []
  let turnedAway = 0
  const lines: { level: number; msg: string }[] = []
  const log = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      for (const line of chunk.toString('utf8').trim().split('\n')) lines.push(JSON.parse(line) as { level: number; msg: string })
      done()
    },
  })
  const config = configFrom({ models: [{ name: 'm', health: { interval_ms: 1000, unhealthy_after: 3 }, backends: [{ url: 'http://127.0.0.1:9', name: 'b0' }] }] })
  const route: ModelRoute = buildModelRoutes(config.models).get('m')!
  cleanups.push(() => route.close())
  const backend: Backend = route.backends[0]!
  // Seen healthy here: a passed check.
  backend.health = afterActiveCheck(backend.health, true, { unhealthyAfter: 3, intervalMs: 1000 }, now)
  const verdicts = new SharedVerdicts({
    clock: { now: () => now },
    logger: createLogger('debug', log),
    board,
    serving: () => options.serving ?? true,
    stopped: () => false,
    check: () => new Promise<boolean>((resolve) => checks.push(resolve)),
    publish: (r, b) => {
      const usable = b.usable(now)
      if (!usable && !r.hasUsableBackend(now)) turnedAway++
      return usable
    },
    after: () => undefined,
  })
  verdicts.watch(route)
  return {
    verdicts,
    route,
    backend,
    hear: (verdict: SharedVerdict | null) => deliver!('b0', verdict),
    /** Answers the oldest own check still out. */
    answer: async (healthy: boolean) => {
      checks.shift()!(healthy)
      // The answer's callbacks are promise reactions: let them run.
      for (let i = 0; i < 5; i++) await Promise.resolve()
    },
    checksOut: () => checks.length,
    /** A scheduled check: its ticket at the start, its outcome applied at the end (as backend-monitor.ts does). */
    scheduled: () => {
      const ticket = verdicts.checkStarting()
      return (healthy: boolean) => {
        backend.health = afterActiveCheck(backend.health, healthy, { unhealthyAfter: 3, intervalMs: 1000 }, now)
        verdicts.afterOwnCheck(route, backend, ticket, healthy)
      }
    },
    usable: () => backend.usable(now),
    advance: (ms: number) => void (now += ms),
    now: () => now,
    infoSetAsides: () => lines.filter((line) => line.level >= INFO && line.msg === SETS_ASIDE).length,
    turnedAway: () => turnedAway,
  }
}

const down = (now: number, ms = 60_000): SharedVerdict => ({ up: false, ejectedUntil: 0, expiresAt: now + ms })

describe('SharedVerdicts', () => {
  it('a verdict set aside is held once a scheduled check fails here too, without waiting for its next refresh', async () => {
    const h = harness()
    h.hear(down(h.now()))
    await h.answer(true)
    expect(h.usable()).toBe(true)
    h.scheduled()(false)
    expect(h.usable()).toBe(false)
  })

  it('a failed check that began before a passed one holds nothing', async () => {
    const h = harness()
    h.hear(down(h.now()))
    // The verification check is out; a scheduled check begins after it and passes first.
    const scheduled = h.scheduled()
    scheduled(true)
    await h.answer(false)
    expect(h.usable()).toBe(true)
  })

  // Regression (review): a slow pass let the held verdict go though a check begun after it had failed.
  it('a passed check that began before a failed one lets nothing go', async () => {
    const h = harness()
    h.hear(down(h.now()))
    await h.answer(false)
    // A refresh: held at once, and checked; a scheduled check begins after that check, and fails first.
    h.hear(down(h.now(), 61_000))
    const scheduled = h.scheduled()
    scheduled(false)
    await h.answer(true)
    expect(h.usable()).toBe(false)
  })

  it('a failed check that began after the last passed one holds the verdict', async () => {
    const h = harness()
    h.scheduled()(true)
    h.hear(down(h.now()))
    await h.answer(false)
    expect(h.usable()).toBe(false)
  })

  it('a retired generation checks a verdict too: it does not take a backend it finds healthy out, nor turn its waiters away', async () => {
    const h = harness({ serving: false })
    h.hear(down(h.now()))
    expect(h.checksOut()).toBe(1)
    await h.answer(true)
    expect(h.usable()).toBe(true)
    expect(h.turnedAway()).toBe(0)
  })

  it('no set-aside line for a held verdict that lapsed unwithdrawn', async () => {
    const h = harness()
    h.hear(down(h.now(), 1000))
    await h.answer(false)
    expect(h.usable()).toBe(false)
    h.advance(1000)
    h.scheduled()(true)
    expect(h.usable()).toBe(true)
    expect(h.infoSetAsides()).toBe(0)
  })

  it('verdicts that arrive lapsed (a publisher whose clock is behind) give no set-aside line per refresh', async () => {
    const h = harness()
    for (let refresh = 0; refresh < 4; refresh++) {
      h.hear(down(h.now(), -1000))
      h.scheduled()(true)
    }
    expect(h.checksOut()).toBe(0)
    expect(h.usable()).toBe(true)
    expect(h.infoSetAsides()).toBe(0)
  })

  it('one check at a time: refreshes while it is out start none, and its failure holds the latest', async () => {
    const h = harness()
    const first = down(h.now())
    h.hear(first)
    h.hear(down(h.now(), 61_000))
    const latest = down(h.now(), 62_000)
    h.hear(latest)
    expect(h.checksOut()).toBe(1)
    await h.answer(false)
    expect(h.backend.shared).toBe(latest)
  })
})
