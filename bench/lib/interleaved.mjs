// Measures several targets in turns: every round gives each target one short
// slice of the machine, and a target's figures are its slices together. The
// host behind this project's 2-core VM changes speed by up to ~1.5x within a
// minute (the same gateway's scavenges took 1.9 ms, then 2.9 ms, with nothing
// else changed), so targets measured one after the other for 10 s each were
// compared across different machines; in turns, each sees the same drift.
export async function inTurns({ targets, rounds, slice }) {
  const slices = Object.fromEntries(Object.keys(targets).map((name) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const [name, measure] of Object.entries(targets)) slices[name].push(await measure(slice))
  }
  return slices
}

/** The p-th percentile of sorted values. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/** Numbers from every slice, in one sorted array. */
export function pooled(slices, pick) {
  return slices.flatMap(pick).sort((a, b) => a - b)
}

export const sum = (slices, pick) => slices.reduce((total, s) => total + pick(s), 0)
