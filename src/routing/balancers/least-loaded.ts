/**
 * Least loaded: the candidate whose load is least, load being its requests
 * in flight (as the gateway knows them: every replica's in Redis mode,
 * balancer.ts) plus the backend's own queue (`vllm:num_requests_waiting`
 * from its /metrics), DESIGN.md's "weighs the in-flight count with the
 * backend's queue"; then a known queue before an unknown one, then weight
 * (higher first), then at random among exact ties so that idle backends
 * share the load instead of the first one taking it all.
 *
 * Choices:
 * - A sum, not the queue as a tie-breaker (as before): a backend reporting
 *   50 waiting (other clients, another gateway) got the same share as an
 *   idle one whenever the in-flight counts differed, which is nearly always
 *   under load. This gateway's own requests waiting at the backend are in
 *   both terms; counting them twice passes a backend whose queue grows over
 *   sooner, which is the aim. The queue figure is a few seconds old, the
 *   in-flight count current: a sum lets the current count overtake a stale
 *   queue (an idle backend reported 50 waiting still gets a request once
 *   the other has 50 more in flight), where a stale figure ranked first
 *   would flood or starve a backend until the next scrape.
 * - Loads are compared raw, not divided by weight: `max_concurrency_per_backend`
 *   is the same for every backend of a model, so a raw count is what the
 *   gateway limits. Weight still matters: it wins ties, which is every pick
 *   on an idle model.
 * - An unknown queue (no scrape yet, or stale) counts as 0, but a known 0
 *   beats it at an equal load: evidence of an empty queue is better than
 *   none, while a backend whose metrics are missing is not pushed behind
 *   every busy one.
 * - A candidate missing from `stats` counts as nothing in flight, queue unknown.
 * - `rng` is called once, and only when more than one candidate ties exactly.
 * - The backend's running count and KV-cache usage are not inputs: its queue
 *   is what a new request would wait in (DESIGN.md names only that).
 */
import type { BackendStats, BalancerCandidate, Rng } from './balancer.js'

const NO_STATS: BackendStats = { inFlight: 0 }

/** Negative when `a` is the better pick, positive when `b` is, 0 on an exact tie. */
function compare(a: BalancerCandidate, aStats: BackendStats, b: BalancerCandidate, bStats: BackendStats): number {
  const aLoad = aStats.inFlight + (aStats.backendWaiting ?? 0)
  const bLoad = bStats.inFlight + (bStats.backendWaiting ?? 0)
  if (aLoad !== bLoad) return aLoad - bLoad
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
