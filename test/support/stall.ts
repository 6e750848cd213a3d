/**
 * Waiting for a pipe to stall. A writer blocked once (its first `write` that
 * returned false) says only that the nearest buffer filled: the next hop may
 * still be draining into memory without bound. Stalled means the count of
 * what the writer managed to hand over stopped moving while real I/O went on
 * around it.
 */

/**
 * Resolves with `count()` once it stayed the same over `rounds` consecutive
 * `turn()`s (each a real round trip, so every socket with something to read
 * or write was serviced in between); throws naming `what` if it still moved
 * after `maxTurns`.
 */
export async function untilStalled(count: () => number, turn: () => Promise<unknown>, what: string, rounds = 5, maxTurns = 2000): Promise<number> {
  let last = count()
  let still = 0
  for (let turns = 0; turns < maxTurns; turns++) {
    await turn()
    const now = count()
    still = now === last ? still + 1 : 0
    last = now
    if (still >= rounds) return now
  }
  throw new Error(`${what} was still moving after ${maxTurns} round trips (at ${last})`)
}
