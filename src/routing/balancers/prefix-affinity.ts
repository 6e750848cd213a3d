/**
 * Prefix affinity: requests that share a prompt prefix go to the same backend,
 * so vLLM's prefix cache is hit, unless that backend is clearly busier than
 * its share ("consistent hashing with bounded loads").
 *
 * The backend is chosen by weighted rendezvous hashing (highest random
 * weight): every candidate gets a score from a stable hash of (key, name) and
 * its weight, and the highest score wins. Removing a backend moves only the
 * keys that were on it; adding one moves only the keys it now wins, about
 * weight/total of them; and each backend wins keys in proportion to its weight.
 * A retry that leaves the failed backend out lands on the next in hash order.
 */
import { createHash } from 'node:crypto'
import type { BackendStats, BalancerCandidate, BalancerRequest, Rng } from './balancer.js'
import { pickLeastLoaded } from './least-loaded.js'

export interface PrefixAffinityOptions {
  /** A backend may carry this multiple of its fair share of in-flight requests... */
  readonly loadFactor: number
  /** ...or its fair share plus this many, whichever is larger. */
  readonly minSlack: number
}

export const DEFAULT_PREFIX_AFFINITY: PrefixAffinityOptions = { loadFactor: 1.5, minSlack: 2 }

interface ChatPrefixSource {
  readonly messages?: unknown
  readonly cache_salt?: unknown
}

/**
 * The key requests sharing a prompt prefix have in common, or null when there
 * is no prompt text to key on.
 *
 * The prefix is the messages up to and including the first user message: the
 * system/developer prompt(s), anything else a chat template renders before
 * the first user turn, and that turn. Later turns are left out, so every turn
 * of a conversation shares a key. Of each message, the role and the text:
 * a string content, or the text parts of a content-part array joined by "\n"
 * (as vLLM flattens them, so `"a\nb"` and parts `a`, `b` share a key); other
 * parts (images, audio) are skipped. At most `maxChars` characters of text
 * count. `cache_salt`, when a string, is part of the key: another salt gives
 * another key, as it gives another prefix cache.
 *
 * The key is the sha256 (hex) of the JSON of [salt, [role, text], ...]: JSON
 * keeps the fields apart, and the digest keeps prompt text out of anything
 * that stores or logs the key.
 */
export function affinityKey(body: ChatPrefixSource, maxChars = 2048): string | null {
  if (!Array.isArray(body.messages)) return null
  const prefix: [string, string][] = []
  let budget = maxChars
  for (const message of body.messages as unknown[]) {
    if (budget <= 0) break
    if (typeof message !== 'object' || message === null) continue
    const { role, content } = message as { role?: unknown; content?: unknown }
    const text = textOf(content).slice(0, budget)
    budget -= text.length
    prefix.push([typeof role === 'string' ? role : '', text])
    if (role === 'user') break
  }
  if (prefix.every(([, text]) => text === '')) return null
  const salt = typeof body.cache_salt === 'string' ? body.cache_salt : null
  return createHash('sha256')
    .update(JSON.stringify([salt, ...prefix]))
    .digest('hex')
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  const texts: string[] = []
  for (const part of content as unknown[]) {
    if (typeof part === 'string') texts.push(part)
    else if (typeof part === 'object' && part !== null) {
      const { type, text } = part as { type?: unknown; text?: unknown }
      if ((type === undefined || type === 'text') && typeof text === 'string') texts.push(text)
    }
  }
  return texts.join('\n')
}

/** A stable number in (0, 1) for (key, name): the first 6 bytes of a sha256. */
function unitHash(key: string, name: string): number {
  // Length-prefixed, so no (key, name) pair can collide with another by concatenation.
  const digest = createHash('sha256').update(`${key.length}:${key}${name}`).digest()
  return (digest.readUIntBE(0, 6) + 0.5) / 2 ** 48
}

/**
 * Indexes into `candidates`, best first, for this key. Weighted rendezvous:
 * score = -weight / ln(h), whose maximum over candidates falls on each one
 * with probability weight / sum of weights.
 */
export function rankByAffinity(candidates: readonly BalancerCandidate[], key: string): number[] {
  const scores = candidates.map((c) => -c.weight / Math.log(unitHash(key, c.name)))
  return candidates.map((_, i) => i).sort((a, b) => scores[b]! - scores[a]! || a - b)
}

/**
 * Index into `candidates`: the first in hash order whose in-flight count is
 * within its bound, else the least loaded. With no key, the least loaded.
 *
 * The bound is max(loadFactor * share, share + minSlack), where share is the
 * candidate's weighted share of all in-flight requests (total * weight / sum
 * of weights). With equal weights the share is the average in-flight count,
 * which is the usual "bounded loads" rule; weighting it lets a heavy backend
 * carry its larger share without being skipped (with the unweighted average,
 * a backend whose weight share exceeds loadFactor / n would spill all the
 * time under load, and its keys lose their cache). The flip side: a backend
 * with more than 1 / loadFactor of the total weight is never over its bound,
 * and only leaves the candidates when its concurrency cap is reached.
 * With minSlack >= 0 some candidate is always within its bound (shares sum
 * to the total, so not every count can exceed its share).
 */
export function pickPrefixAffine(
  candidates: readonly BalancerCandidate[],
  stats: ReadonlyMap<string, BackendStats>,
  request: BalancerRequest,
  rng: Rng,
  options: PrefixAffinityOptions = DEFAULT_PREFIX_AFFINITY,
): number {
  if (candidates.length === 0) throw new Error('pickPrefixAffine needs at least one candidate')
  if (request.affinityKey === null) return pickLeastLoaded(candidates, stats, rng)
  const inFlight = candidates.map((c) => stats.get(c.name)?.inFlight ?? 0)
  const totalInFlight = inFlight.reduce((a, b) => a + b, 0)
  const totalWeight = candidates.reduce((a, c) => a + c.weight, 0)
  const shareOf = (i: number): number =>
    totalWeight > 0 ? (totalInFlight * candidates[i]!.weight) / totalWeight : totalInFlight / candidates.length
  for (const i of rankByAffinity(candidates, request.affinityKey)) {
    const share = shareOf(i)
    if (inFlight[i]! <= Math.max(options.loadFactor * share, share + options.minSlack)) return i
  }
  return pickLeastLoaded(candidates, stats, rng)
}
