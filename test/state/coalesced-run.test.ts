import { describe, expect, it } from 'vitest'
import { CoalescedRun } from '../../src/state/coalesced-run.js'
import { deferred } from '../support/deferred.js'

/** A run whose passes each wait for the test to end them. */
function steppedRun() {
  const passes: { end: () => void }[] = []
  let started = deferred()
  const run = new CoalescedRun(async () => {
    const pass = deferred()
    passes.push({ end: pass.resolve })
    started.resolve()
    await pass.promise
  })
  return {
    run,
    passes,
    /** Resolves when the next pass has started. */
    nextStart: () => {
      started = deferred()
      return started.promise
    },
  }
}

/** Every pending promise callback has run (setImmediate comes after the microtask queue drains). */
const drained = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('CoalescedRun', () => {
  it('runs at once when idle', () => {
    const { run, passes } = steppedRun()
    run.request()
    expect(passes).toHaveLength(1)
  })

  it('asked for any number of times during a pass, runs exactly once more after it', async () => {
    const { run, passes, nextStart } = steppedRun()
    run.request()
    run.request()
    run.request()
    run.request()
    expect(passes).toHaveLength(1)
    const second = nextStart()
    passes[0]!.end()
    await second
    expect(passes).toHaveLength(2)
    passes[1]!.end()
    await drained()
    expect(passes).toHaveLength(2)
  })

  it('after a pass that nobody asked again for, the next request runs at once', async () => {
    const { run, passes } = steppedRun()
    run.request()
    passes[0]!.end()
    await drained()
    run.request()
    expect(passes).toHaveLength(2)
  })
})
