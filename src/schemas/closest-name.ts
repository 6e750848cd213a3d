/**
 * The known name an unknown one was most likely meant to be, for a "did you
 * mean" hint on a config key typo (`max_concurency`, `api-key`, `backend`).
 * Pure: the nearest candidate by edit distance, when near enough to be a
 * typo rather than a different word; null otherwise or on a tie.
 */
export function closestName(name: string, candidates: readonly string[]): string | null {
  // A third of the name's length: one slip in a short key, two or three in a long one.
  const allowed = Math.max(1, Math.floor(name.length / 3))
  let best: string | null = null
  let bestDistance = allowed + 1
  let tied = false
  for (const candidate of candidates) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
      tied = false
    } else if (distance === bestDistance) {
      tied = true
    }
  }
  return tied ? null : best
}

/** Levenshtein distance, with a swap of two neighbours counted as one edit (`max_conucrrency`). */
export function editDistance(a: string, b: string): number {
  // Three rows of the usual table: the swap looks two rows back.
  let before = new Array<number>(b.length + 1).fill(0)
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const substitution = a[i - 1] === b[j - 1] ? 0 : 1
      let cost = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + substitution)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) cost = Math.min(cost, before[j - 2]! + 1)
      current.push(cost)
    }
    before = previous
    previous = current
  }
  return previous[b.length]!
}
