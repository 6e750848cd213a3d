import { describe, expect, it } from 'vitest'
import { readVllmLoad } from '../../src/routing/vllm-load.js'

function gauge(name: string, samples: readonly [labels: string, value: string][]): string {
  return [`# HELP ${name} help text`, `# TYPE ${name} gauge`, ...samples.map(([labels, value]) => `${name}${labels} ${value}`)].join('\n') + '\n'
}

describe('readVllmLoad', () => {
  it('reads running, waiting and KV cache usage from one label set', () => {
    const text =
      gauge('vllm:num_requests_running', [['{model_name="llama"}', '3.0']]) +
      gauge('vllm:num_requests_waiting', [['{model_name="llama"}', '7.0']]) +
      gauge('vllm:kv_cache_usage_perc', [['{model_name="llama"}', '0.42']])

    expect(readVllmLoad(text)).toEqual({ running: 3, waiting: 7, kvCacheUsage: 0.42 })
  })

  it('sums running and waiting across label sets (engines, models) and takes the highest KV usage', () => {
    const text =
      gauge('vllm:num_requests_running', [
        ['{engine="0",model_name="llama"}', '2.0'],
        ['{engine="1",model_name="llama"}', '5.0'],
      ]) +
      gauge('vllm:num_requests_waiting', [
        ['{engine="0",model_name="llama"}', '1.0'],
        ['{engine="1",model_name="llama"}', '10.0'],
        ['{engine="2",model_name="llama"}', '0.0'],
      ]) +
      gauge('vllm:kv_cache_usage_perc', [
        ['{engine="0",model_name="llama"}', '0.25'],
        ['{engine="1",model_name="llama"}', '0.9'],
        ['{engine="2",model_name="llama"}', '0.5'],
      ])

    expect(readVllmLoad(text)).toEqual({ running: 7, waiting: 11, kvCacheUsage: 0.9 })
  })

  it('reads the KV gauge under its older name vllm:gpu_cache_usage_perc', () => {
    const text = gauge('vllm:num_requests_waiting', [['{model_name="x"}', '4.0']]) + gauge('vllm:gpu_cache_usage_perc', [['{model_name="x"}', '0.75']])

    expect(readVllmLoad(text)).toEqual({ running: undefined, waiting: 4, kvCacheUsage: 0.75 })
  })

  it('prefers the current KV gauge name when both are present', () => {
    const text = gauge('vllm:kv_cache_usage_perc', [['{model_name="x"}', '0.1']]) + gauge('vllm:gpu_cache_usage_perc', [['{model_name="x"}', '0.8']])

    expect(readVllmLoad(text).kvCacheUsage).toBe(0.1)
  })

  it('leaves missing metrics undefined, and 0 is a value, not a missing one', () => {
    expect(readVllmLoad(gauge('vllm:num_requests_waiting', [['{model_name="x"}', '0.0']]))).toEqual({ running: undefined, waiting: 0, kvCacheUsage: undefined })
    expect(readVllmLoad('')).toEqual({ running: undefined, waiting: undefined, kvCacheUsage: undefined })
  })

  it('ignores other families, histograms included, in a realistic /metrics page', () => {
    const text = [
      '# HELP python_gc_objects_collected_total Objects collected during gc',
      '# TYPE python_gc_objects_collected_total counter',
      'python_gc_objects_collected_total{generation="0"} 1234.0',
      '# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.',
      '# TYPE vllm:time_to_first_token_seconds histogram',
      'vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="x"} 0.0',
      'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="x"} 12.0',
      'vllm:time_to_first_token_seconds_count{model_name="x"} 12.0',
      'vllm:time_to_first_token_seconds_sum{model_name="x"} 3.5',
      '',
    ].join('\n') + gauge('vllm:num_requests_running', [['{model_name="x"}', '1.0']]) + gauge('vllm:num_requests_waiting', [['{model_name="x"}', '2.0']])

    expect(readVllmLoad(text)).toEqual({ running: 1, waiting: 2, kvCacheUsage: undefined })
  })

  it('skips samples that are not finite numbers', () => {
    const text = gauge('vllm:num_requests_waiting', [
      ['{engine="0"}', 'NaN'],
      ['{engine="1"}', '3.0'],
    ]) + gauge('vllm:kv_cache_usage_perc', [['{engine="0"}', 'NaN']])

    expect(readVllmLoad(text)).toEqual({ running: undefined, waiting: 3, kvCacheUsage: undefined })
  })

  it('yields nothing for text that is not Prometheus exposition at all', () => {
    for (const text of ['garbage', '<html><body>502 Bad Gateway</body></html>', '{"detail":"Not Found"}', '\u0000\u0001\u0002']) {
      expect(readVllmLoad(text)).toEqual({ running: undefined, waiting: undefined, kvCacheUsage: undefined })
    }
  })

  it('does not throw on a malformed sample line, and keeps the well-formed ones', () => {
    const text =
      gauge('vllm:num_requests_waiting', [['{model_name="x"}', '4.0']]) + 'vllm:num_requests_running{model_name="x" 3\n' + 'vllm:kv_cache_usage_perc{{{ oops\n'

    let load: ReturnType<typeof readVllmLoad> | undefined
    expect(() => {
      load = readVllmLoad(text)
    }).not.toThrow()
    expect(load).toEqual({ running: undefined, waiting: 4, kvCacheUsage: undefined })
  })

  it('reads CRLF line endings and samples with timestamps', () => {
    const text = 'vllm:num_requests_waiting{engine="0"} 3.0 1700000000000\r\nvllm:num_requests_running{engine="0"} 2.0\r\n'

    expect(readVllmLoad(text)).toEqual({ running: 2, waiting: 3, kvCacheUsage: undefined })
  })
})
