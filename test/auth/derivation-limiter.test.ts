import { describe, expect, it } from 'vitest'
import { BasicUserStore } from '../../src/auth/basic.js'
import { ClientLeftError, DerivationLimiter, DerivationsBusyError } from '../../src/auth/derivation-limiter.js'
import { deferred } from '../support/deferred.js'

/** Work items that run until the test finishes them: which started, in order, and the finisher of each. */
function heldWork() {
  const started: string[] = []
  const finish = new Map<string, () => void>()
  const work = (name: string) => () => {
    started.push(name)
    const done = deferred()
    finish.set(name, done.resolve)
    return done.promise.then(() => name)
  }
  return { started, finish, work }
}

describe('DerivationLimiter', () => {
  // Regression (audit): a flood of failed Basic attempts filled libuv's thread pool (hostname lookups of
  // backends timed out), and every queued derivation ran after its client had gone.
  it('runs at most two at once; one whose client left while it waited never runs', async () => {
    const limiter = new DerivationLimiter(2, 10)
    const { started, finish, work } = heldWork()
    const gone = new AbortController()

    const a = limiter.run(work('a'))
    const b = limiter.run(work('b'))
    const c = limiter.run(work('c'), gone.signal)
    const d = limiter.run(work('d'))
    await Promise.resolve()
    expect(started).toEqual(['a', 'b'])

    gone.abort()
    await expect(c).rejects.toBeInstanceOf(ClientLeftError)
    finish.get('a')!()
    expect(await a).toBe('a')
    await until(() => started.length === 3)
    expect(started).toEqual(['a', 'b', 'd'])
    finish.get('b')!()
    finish.get('d')!()
    expect(await Promise.all([b, d])).toEqual(['b', 'd'])
  })

  it('a slot freed goes to the first in line, not to a newcomer arriving in the same turn', async () => {
    const limiter = new DerivationLimiter(1, 10)
    const order: string[] = []
    const firstDone = deferred()
    const a = limiter.run(async () => {
      await firstDone.promise
      order.push('a')
    })
    const b = limiter.run(async () => void order.push('b'))
    await Promise.resolve()
    firstDone.resolve()
    await a
    // b was handed the slot as a finished: c, arriving now, waits its turn.
    const c = limiter.run(async () => void order.push('c'))
    await Promise.all([b, c])
    expect(order).toEqual(['a', 'b', 'c'])
  })

  it('a client already gone when its turn comes is refused, and the next one runs', async () => {
    const limiter = new DerivationLimiter(1, 10)
    const gone = new AbortController()
    gone.abort()
    await expect(limiter.run(async () => 'x', gone.signal)).rejects.toBeInstanceOf(ClientLeftError)
    expect(await limiter.run(async () => 'y')).toBe('y')
  })

  it('holds at most maxWaiting in line and refuses the next at once; a place freed is taken again', async () => {
    const limiter = new DerivationLimiter(1, 2)
    const { started, finish, work } = heldWork()
    const a = limiter.run(work('a'))
    const b = limiter.run(work('b'))
    const c = limiter.run(work('c'))
    await expect(limiter.run(work('d'))).rejects.toBeInstanceOf(DerivationsBusyError)
    finish.get('a')!()
    expect(await a).toBe('a')
    // b left the line for the slot: one place is free again.
    const e = limiter.run(work('e'))
    await expect(limiter.run(work('f'))).rejects.toBeInstanceOf(DerivationsBusyError)
    for (const name of ['b', 'c', 'e']) {
      await until(() => finish.has(name))
      finish.get(name)!()
    }
    expect(await Promise.all([b, c, e])).toEqual(['b', 'c', 'e'])
    expect(started).toEqual(['a', 'b', 'c', 'e'])
  })
})

describe('BasicUserStore with a derivation limit', () => {
  it('every check still pays one derivation, two at a time', async () => {
    let running = 0
    let most = 0
    let calls = 0
    const derive = async () => {
      calls++
      running++
      most = Math.max(most, running)
      await new Promise((resolve) => setImmediate(resolve))
      running--
      return Buffer.alloc(64)
    }
    const store = new BasicUserStore([], derive)
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => store.verify(`u${i}`, 'pw')))
    expect(results).toEqual(Array(6).fill(null))
    expect(calls).toBe(6)
    expect(most).toBe(2)
  })
})

/** Waits, a microtask turn at a time, until `check` holds (bounded). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((resolve) => setImmediate(resolve))
  expect(check()).toBe(true)
}
