/**
 * Smooth weighted round robin (the nginx algorithm): over any cycle of
 * sum(weights) picks, each backend is chosen exactly `weight` times, and
 * picks of a heavy backend are spread out rather than bunched.
 *
 * Pure: the running weights go in and come out; the caller keeps them.
 */
import type { BalancerCandidate } from './balancer.js'

export interface RoundRobinPick {
  /** Index into the candidates. */
  readonly index: number
  /** Running weights to pass to the next call, by candidate name. */
  readonly current: ReadonlyMap<string, number>
}

export function pickSmoothWeighted(
  candidates: readonly BalancerCandidate[],
  current: ReadonlyMap<string, number>,
): RoundRobinPick {
  if (candidates.length === 0) throw new Error('pickSmoothWeighted needs at least one candidate')
  const next = new Map<string, number>()
  let total = 0
  let best = 0
  let bestWeight = -Infinity
  candidates.forEach((candidate, i) => {
    const weight = (current.get(candidate.name) ?? 0) + candidate.weight
    next.set(candidate.name, weight)
    total += candidate.weight
    if (weight > bestWeight) {
      best = i
      bestWeight = weight
    }
  })
  const chosen = candidates[best]!.name
  next.set(chosen, bestWeight - total)
  return { index: best, current: next }
}
