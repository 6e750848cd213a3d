/**
 * Model routes without HTTP: which health a backend starts from (inherited
 * across a reload, or fresh), and the two questions asked of a model's
 * backends — may a request be tried (routing), and has one been shown
 * healthy (readiness). The pools are created but never connect.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { afterActiveCheck, afterPassiveFailure, INITIAL_HEALTH, type HealthSettings } from '../../src/routing/health-state.js'
import { buildModelRoutes, healthKnownTo, type ModelRoute } from '../../src/routing/model-route.js'
import { configFrom } from '../support/gateway.js'

const settings: HealthSettings = { unhealthyAfter: 1, intervalMs: 1000 }
const T0 = 1_700_000_000_000
const built: Map<string, ModelRoute>[] = []

afterEach(async () => {
  await Promise.all(built.splice(0).flatMap((routes) => [...routes.values()].map((route) => route.close())))
})

type BackendEntry = { readonly name: string; readonly url: string }

function routes(models: Record<string, readonly BackendEntry[]>, known?: Parameters<typeof buildModelRoutes>[1]): Map<string, ModelRoute> {
  const config = configFrom({ models: Object.entries(models).map(([name, backends]) => ({ name, backends })) })
  const result = buildModelRoutes(config.models, known)
  built.push(result)
  return result
}

const A: BackendEntry = { name: 'a', url: 'http://127.0.0.1:8001' }
const B: BackendEntry = { name: 'b', url: 'http://127.0.0.1:8002' }

describe('health inherited from the generations serving now', () => {
  it('without one, every backend starts from the initial health', () => {
    const fresh = routes({ m: [A, B] })
    for (const backend of fresh.get('m')!.backends) expect(backend.health).toBe(INITIAL_HEALTH)
  })

  it('the same backend (model, name and URL) starts from its health there', () => {
    const old = routes({ m: [A] })
    const down = afterActiveCheck(INITIAL_HEALTH, false, settings, T0)
    old.get('m')!.backend('a').health = down

    const fresh = routes({ m: [A] }, healthKnownTo([old]))
    expect(fresh.get('m')!.backend('a').health).toBe(down)
  })

  it('a renamed backend, one moved to another URL, or the same one under another model starts fresh', () => {
    const old = routes({ m: [A] })
    old.get('m')!.backend('a').health = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)

    const fresh = routes({ m: [{ ...A, name: 'renamed' }, { ...A, url: 'http://127.0.0.1:9999' }], other: [A] }, healthKnownTo([old]))
    expect(fresh.get('m')!.backend('renamed').health).toBe(INITIAL_HEALTH)
    expect(fresh.get('m')!.backends.find((b) => b.name === 'a')!.health).toBe(INITIAL_HEALTH)
    expect(fresh.get('other')!.backend('a').health).toBe(INITIAL_HEALTH)
  })

  it('the first generation listed (the serving one) wins over older ones', () => {
    const older = routes({ m: [A] })
    const serving = routes({ m: [A] })
    older.get('m')!.backend('a').health = afterActiveCheck(INITIAL_HEALTH, false, settings, T0)
    const confirmed = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    serving.get('m')!.backend('a').health = confirmed

    expect(routes({ m: [A] }, healthKnownTo([serving, older])).get('m')!.backend('a').health).toBe(confirmed)
  })
})

describe('usable (routing) and confirmed (readiness)', () => {
  it('a fresh model may be tried but is not ready', () => {
    const route = routes({ m: [A, B] }).get('m')!
    expect(route.hasUsableBackend(T0)).toBe(true)
    expect(route.hasConfirmedBackend(T0)).toBe(false)
  })

  it('one confirmed, usable backend makes the model ready', () => {
    const route = routes({ m: [A, B] }).get('m')!
    route.backend('b').health = afterActiveCheck(INITIAL_HEALTH, true, settings, T0)
    expect(route.hasConfirmedBackend(T0)).toBe(true)
  })

  it('a confirmed backend that is ejected does not make the model ready until its ejection ends', () => {
    const route = routes({ m: [A] }).get('m')!
    const ejected = afterPassiveFailure(afterActiveCheck(INITIAL_HEALTH, true, settings, T0), 'connect', settings, T0)
    route.backend('a').health = ejected
    expect(route.hasConfirmedBackend(T0)).toBe(false)
    expect(route.hasConfirmedBackend(ejected.ejectedUntil)).toBe(true)
  })
})
