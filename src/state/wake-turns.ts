/**
 * Wake-ups across a reload's generations, run one after another rather
 * than inside each other. Serving one queue can wake another's (its waiter
 * comes first), whose next waiter can wake the first again: with waiters
 * that alternate in priority, thousands of slots freed at once (a raised
 * limit) nested one call per alternation, and a review overflowed the
 * stack. A wake-up asked for while one runs waits its turn; the queue that
 * asked stops serving until then (memory-slots.ts #serveQueue).
 */
const pending: (() => void)[] = []
let waking = false

/** Runs `wake` now, or after the wake-up running now when called from inside one. */
export function inTurn(wake: () => void): void {
  pending.push(wake)
  if (waking) return
  waking = true
  try {
    for (let next = pending.shift(); next !== undefined; next = pending.shift()) next()
  } finally {
    waking = false
  }
}

/**
 * Runs `again` after the wake-ups queued now, when one is running: a queue
 * that stopped serving because another's waiter came first, and whose
 * wake-up of that queue is only queued, serves again once it has run.
 * Outside a wake-up the others already ran (nothing is queued): nothing to do.
 */
export function afterQueuedWakes(again: () => void): void {
  if (waking) pending.push(again)
}
