/**
 * What every balancer is given: the candidate backends (healthy, with a free
 * slot), what is known about their load, the request, and a random source.
 * Balancers are pure functions of these; the caller keeps any state.
 */

export interface BalancerCandidate {
  readonly name: string
  readonly weight: number
}

export interface BackendStats {
  /**
   * Requests in flight to the backend as this replica knows them: its own
   * (and a reload's other generations') in memory mode, every replica's in
   * Redis mode (the lease counts of its latest Redis answer).
   */
  readonly inFlight: number
  /** vllm:num_requests_waiting from the backend's /metrics, undefined when unknown or stale. */
  readonly backendWaiting?: number
}

export interface BalancerRequest {
  /** From `affinityKey(body)`; null when the request has no prompt prefix to key on. */
  readonly affinityKey: string | null
}

/** A uniform random number in [0, 1), like `Math.random`. */
export type Rng = () => number
