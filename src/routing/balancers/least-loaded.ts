/**
 * Least loaded: the candidate with the fewest requests in flight (as the
 * gateway knows them: every replica's in Redis mode, balancer.ts), ties broken by the backend's own queue (`vllm:num_requests_waiting`
 * from its /metrics), then by weight (higher first), then at random among
 * exact ties so that idle backends share the load instead of the first one
 * taking it all.
 *
 * Choices:
 * - In-flight counts are compared raw, not divided by weight: the order above
 *   is the documented one, and `max_concurrency_per_backend` is the same for
 *   every backend of a model, so a raw count is what the gateway limits.
 *   Weight still matters: it wins ties, which is every pick on an idle model.
 * - An unknown queue (no scrape yet, or stale) counts as 0 against a known
 *   queue, but a known 0 beats it: evidence of an empty queue is better than
 *   no evidence, while a backend whose metrics are missing is not pushed
 *   behind every busy one (the in-flight count, which the gateway always
 *   knows, decides first anyway, so it cannot be starved or flooded).
 * - A candidate missing from `stats` counts as nothing in flight, queue unknown.
 * - `rng` is called once, and only when more than one candidate ties exactly.
 * - The backend's running count and KV-cache usage are not inputs: its queue
 *   is what a new request would wait in (DESIGN.md names only that).
 */
import type { BackendStats, BalancerCandidate, Rng } from './balancer.js'

const NO_STATS: BackendStats = { inFlight: 0 }

/** Negative when `a` is the better pick, positive when `b` is, 0 on an exact tie. */
function compare(a: BalancerCandidate, aStats: BackendStats, b: BalancerCandidate, bStats: BackendStats): number {
  if (aStats.inFlight !== bStats.inFlight) return aStats.inFlight - bStats.inFlight
  const aWaiting = aStats.backendWaiting ?? 0
  const bWaiting = bStats.backendWaiting ?? 0
  if (aWaiting !== bWaiting) return aWaiting - bWaiting
  const aKnown = aStats.backendWaiting !== undefined
  const bKnown = bStats.backendWaiting !== undefined
  if (aKnown !== bKnown) return aKnown ? -1 : 1
  return b.weight - a.weight
}

/** Index into `candidates` of the least loaded one. */
export function pickLeastLoaded(
  candidates: readonly BalancerCandidate[],
  stats: ReadonlyMap<string, BackendStats>,
  rng: Rng,
): number {
  if (candidates.length === 0) throw new Error('pickLeastLoaded needs at least one candidate')
  const statsOf = (c: BalancerCandidate): BackendStats => stats.get(c.name) ?? NO_STATS
  let best: number[] = [0]
  for (let i = 1; i < candidates.length; i++) {
    const leader = candidates[best[0]!]!
    const order = compare(candidates[i]!, statsOf(candidates[i]!), leader, statsOf(leader))
    if (order < 0) best = [i]
    else if (order === 0) best.push(i)
  }
  if (best.length === 1) return best[0]!
  return best[drawIndex(rng, best.length)]!
}

/** An index in [0, n) from `rng`, clamped so a misbehaving source cannot go out of range. */
function drawIndex(rng: Rng, n: number): number {
  const draw = Math.floor(rng() * n)
  return Number.isFinite(draw) ? Math.min(Math.max(draw, 0), n - 1) : 0
}
