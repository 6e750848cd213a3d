/**
 * A Redis call within a time budget (admission must not wait on a slow
 * Redis): the returned promise rejects with RedisUnavailable when the call
 * fails or is late, and a late answer goes to `onLate` to be undone.
 */
import { RedisUnavailable } from './redis-unavailable.js'

export function withinBudget<T>(call: Promise<T>, onLate: (value: T) => void, budgetMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let state: 'waiting' | 'answered' | 'late' = 'waiting'
    // setImmediate runs after this turn's I/O: an answer already waiting on the socket (a busy
    // event loop, not a slow Redis) is read before the call is declared late.
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (state !== 'waiting') return
          state = 'late'
          reject(new RedisUnavailable(`Redis did not answer within ${budgetMs} ms`))
        }),
      budgetMs,
    )
    call.then(
      (value) => {
        if (state === 'late') return onLate(value)
        state = 'answered'
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        if (state === 'late') return
        state = 'answered'
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
