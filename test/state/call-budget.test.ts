/**
 * withinBudget without Redis: the call is a promise
 * the test settles, and time is vitest's fake clock (the budget is a timer
 * followed by one setImmediate, both faked).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { withinBudget } from '../../src/state/call-budget.js'
import { RedisUnavailable } from '../../src/state/redis-unavailable.js'

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

describe('withinBudget', () => {
  beforeEach(() => vi.useFakeTimers())
  afterEach(() => vi.useRealTimers())

  it('passes on an answer that comes within the budget, and nothing is undone', async () => {
    const call = deferred<string>()
    const late = vi.fn()
    const budgeted = withinBudget(call.promise, late, 50)
    await vi.advanceTimersByTimeAsync(49)
    call.resolve('granted')
    await expect(budgeted).resolves.toBe('granted')
    await vi.runAllTimersAsync()
    expect(late).not.toHaveBeenCalled()
  })

  it('rejects with RedisUnavailable at the budget, and hands the late answer to be undone', async () => {
    const call = deferred<string>()
    const late = vi.fn()
    const budgeted = withinBudget(call.promise, late, 50)
    const refused = expect(budgeted).rejects.toThrow(new RedisUnavailable('Redis did not answer within 50 ms'))
    await vi.advanceTimersByTimeAsync(51)
    await refused
    call.resolve('granted')
    await vi.runAllTimersAsync()
    expect(late).toHaveBeenCalledWith('granted')
  })

  it("passes on the call's own failure, and a failure after the budget is dropped", async () => {
    const failing = deferred<string>()
    const failed = withinBudget(failing.promise, vi.fn(), 50)
    failing.reject(new Error('NOSCRIPT'))
    await expect(failed).rejects.toThrow('NOSCRIPT')

    const lateFailure = deferred<string>()
    const late = vi.fn()
    const timedOut = withinBudget(lateFailure.promise, late, 50)
    const refused = expect(timedOut).rejects.toBeInstanceOf(RedisUnavailable)
    await vi.advanceTimersByTimeAsync(51)
    await refused
    lateFailure.reject(new Error('connection lost'))
    await vi.runAllTimersAsync()
    expect(late).not.toHaveBeenCalled()
  })
})
