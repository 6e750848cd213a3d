/**
 * Reads a vLLM server's load from its Prometheus `/metrics` text. Only the
 * sample lines of the four gauges we use are handed to
 * parse-prometheus-text-format (vLLM's page is mostly histograms we would
 * parse for nothing), one line at a time, so a malformed line costs that
 * line, not the whole read. A server may report several label sets
 * (engines, models): running and waiting are summed, KV cache usage is the
 * highest. Older servers call the cache gauge `vllm:gpu_cache_usage_perc`.
 */
import parsePrometheusText from 'parse-prometheus-text-format'

export interface VllmLoad {
  readonly running?: number
  readonly waiting?: number
  readonly kvCacheUsage?: number
}

const RUNNING = 'vllm:num_requests_running'
const WAITING = 'vllm:num_requests_waiting'
const KV_CACHE = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc']

const WANTED = new Set([RUNNING, WAITING, ...KV_CACHE])

function samplesOf(text: string): Map<string, number[]> {
  const samples = new Map<string, number[]>()
  for (const line of text.split('\n')) {
    const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line)?.[1]
    if (name === undefined || !WANTED.has(name)) continue
    let families
    try {
      families = parsePrometheusText(`${line}\n`)
    } catch {
      continue
    }
    for (const metric of families.flatMap((family) => family.metrics)) {
      const value = Number(metric.value)
      if (Number.isFinite(value)) samples.set(name, [...(samples.get(name) ?? []), value])
    }
  }
  return samples
}

export function readVllmLoad(text: string): VllmLoad {
  const samples = samplesOf(text)
  const values = (name: string): number[] => samples.get(name) ?? []
  const sum = (name: string) => {
    const found = values(name)
    return found.length === 0 ? undefined : found.reduce((a, b) => a + b, 0)
  }
  const cache = KV_CACHE.map(values).find((found) => found.length > 0)
  return { running: sum(RUNNING), waiting: sum(WAITING), kvCacheUsage: cache === undefined ? undefined : Math.max(...cache) }
}
