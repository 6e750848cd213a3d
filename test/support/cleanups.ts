/** Teardown a test registers as it starts things, run in reverse order after each test. */
import { afterEach } from 'vitest'

export interface Cleanups {
  push(...cleanups: (() => Promise<unknown> | unknown)[]): void
}

/** Call at module level: registers the afterEach that runs what tests pushed, last first. */
export function cleanupsAfterEach(): Cleanups {
  const pending: (() => Promise<unknown> | unknown)[] = []
  afterEach(async () => {
    while (pending.length > 0) await pending.pop()!()
  })
  return { push: (...cleanups) => void pending.push(...cleanups) }
}
