/**
 * The bytes of request bodies held by requests waiting for a slot, counted
 * across every model and generation of the process. A waiter holds its body
 * (and what was made of it: the parsed object, the upstream bytes) for as
 * long as it waits, and the queues bound only how many wait: at the default
 * 1,000 per model, bodies at the 8 MiB limit (~26 MiB each in memory, a
 * resource audit) could hold ~26 GiB. `server.queued_body_limit_bytes`
 * bounds the bodies instead; a request that would pass it is turned away
 * as from a full queue.
 *
 * Only requests that wait are counted: one that gets a slot at once holds
 * nothing here, so a flood waiting on one model does not refuse another
 * model's requests that have somewhere to run.
 */

/** One configuration's view of the count: its limit, the process's total. */
export interface BodyBudget {
  readonly limit: number
  readonly held: number
  /** Counts `bytes` for a request about to wait; false (nothing counted) when that would pass the limit. */
  take(bytes: number): boolean
  /** The waiter stopped waiting (a slot, a refusal, its client gone). */
  release(bytes: number): void
}

export class QueuedBodies {
  #held = 0

  get held(): number {
    return this.#held
  }

  /** The view a configuration with `limit` admits by; every view shares this count. */
  budget(limit: number): BodyBudget {
    const held = (): number => this.#held
    return {
      limit,
      get held() {
        return held()
      },
      take: (bytes) => {
        if (this.#held + bytes > limit) return false
        this.#held += bytes
        return true
      },
      release: (bytes) => {
        this.#held -= bytes
      },
    }
  }
}
