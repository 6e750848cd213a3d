/**
 * The one call the chat path makes: pick a backend by the model's `balance`
 * strategy. Round robin carries state between calls (returned, for the caller
 * to keep); the other strategies return the state they were given unchanged.
 */
import type { BALANCERS } from '../../config/schema.js'
import type { BackendStats, BalancerCandidate, BalancerRequest, Rng } from './balancer.js'
import { pickLeastLoaded } from './least-loaded.js'
import { pickPrefixAffine } from './prefix-affinity.js'
import { pickSmoothWeighted } from './round-robin.js'

/** The config's `models[].balance` values. */
export type BalanceStrategy = (typeof BALANCERS)[number]

export interface BackendPick {
  /** Index into the candidates. */
  readonly index: number
  /** Round-robin running weights to pass to the next call. */
  readonly roundRobinState: ReadonlyMap<string, number>
}

export function pickBackend(
  strategy: BalanceStrategy,
  candidates: readonly BalancerCandidate[],
  stats: ReadonlyMap<string, BackendStats>,
  request: BalancerRequest,
  rng: Rng,
  roundRobinState: ReadonlyMap<string, number>,
): BackendPick {
  switch (strategy) {
    case 'round_robin': {
      const { index, current } = pickSmoothWeighted(candidates, roundRobinState)
      return { index, roundRobinState: current }
    }
    case 'least_loaded':
      return { index: pickLeastLoaded(candidates, stats, rng), roundRobinState }
    case 'prefix_affinity':
      return { index: pickPrefixAffine(candidates, stats, request, rng), roundRobinState }
    default: {
      const unknown: never = strategy
      throw new Error(`unknown balance strategy "${String(unknown)}"`)
    }
  }
}
