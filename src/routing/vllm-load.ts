/**
 * Reads a vLLM server's load from its Prometheus `/metrics` text: the length
 * of its waiting queue, the one figure the least-loaded balancer uses
 * (DESIGN.md). Only that gauge's sample lines are handed to
 * parse-prometheus-text-format (vLLM's page is mostly histograms we would
 * parse for nothing), one line at a time, so a malformed line costs that
 * line, not the whole read. A server may report several label sets (engines,
 * models): their queues are summed.
 */
import parsePrometheusText from 'parse-prometheus-text-format'

export interface VllmLoad {
  /** Requests waiting in the server's queue; undefined when it reports none. */
  readonly waiting?: number
}

const WAITING = 'vllm:num_requests_waiting'

function waitingSamples(text: string): number[] {
  const samples: number[] = []
  for (const line of text.split('\n')) {
    // A blank or a tab after the name (the text format allows either; a tab was read as no sample at all).
    const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ \t]/.exec(line)?.[1]
    if (name !== WAITING) continue
    let families
    try {
      families = parsePrometheusText(`${line}\n`)
    } catch {
      continue
    }
    for (const metric of families.flatMap((family) => family.metrics)) {
      const value = Number(metric.value)
      // A queue is never negative: such a sample would draw traffic to its backend.
      if (Number.isFinite(value) && value >= 0) samples.push(value)
    }
  }
  return samples
}

export function readVllmLoad(text: string): VllmLoad {
  const samples = waitingSamples(text)
  return { waiting: samples.length === 0 ? undefined : samples.reduce((a, b) => a + b, 0) }
}
