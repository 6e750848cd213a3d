/**
 * Reads a vLLM server's load from its Prometheus `/metrics` text, parsed
 * with parse-prometheus-text-format (not a regex over the body). A server
 * may report several label sets (engines, models): running and waiting are
 * summed, KV cache usage is the highest. Older servers call the cache gauge
 * `vllm:gpu_cache_usage_perc`.
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

export function readVllmLoad(text: string): VllmLoad {
  const families = parsePrometheusText(text)
  const values = (name: string): number[] =>
    families
      .filter((family) => family.name === name)
      .flatMap((family) => family.metrics.map((metric) => Number(metric.value)))
      .filter((value) => Number.isFinite(value))
  const sum = (name: string) => {
    const found = values(name)
    return found.length === 0 ? undefined : found.reduce((a, b) => a + b, 0)
  }
  const cache = KV_CACHE.map(values).find((found) => found.length > 0)
  return { running: sum(RUNNING), waiting: sum(WAITING), kvCacheUsage: cache === undefined ? undefined : Math.max(...cache) }
}
