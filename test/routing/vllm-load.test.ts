import { describe, expect, it } from 'vitest'
import { readVllmLoad } from '../../src/routing/vllm-load.js'

function gauge(name: string, samples: readonly [labels: string, value: string][]): string {
  return [`# HELP ${name} help text`, `# TYPE ${name} gauge`, ...samples.map(([labels, value]) => `${name}${labels} ${value}`)].join('\n') + '\n'
}

describe('readVllmLoad', () => {
  it('reads the waiting queue from one label set, and nothing else', () => {
    const text =
      gauge('vllm:num_requests_running', [['{model_name="llama"}', '3.0']]) +
      gauge('vllm:num_requests_waiting', [['{model_name="llama"}', '7.0']]) +
      gauge('vllm:kv_cache_usage_perc', [['{model_name="llama"}', '0.42']])

    expect(readVllmLoad(text)).toEqual({ waiting: 7 })
  })

  it('sums the waiting queues across label sets (engines, models)', () => {
    const text = gauge('vllm:num_requests_waiting', [
      ['{engine="0",model_name="llama"}', '1.0'],
      ['{engine="1",model_name="llama"}', '10.0'],
      ['{engine="2",model_name="llama"}', '0.0'],
    ])

    expect(readVllmLoad(text)).toEqual({ waiting: 11 })
  })

  it('leaves a missing queue undefined, and 0 is a value, not a missing one', () => {
    expect(readVllmLoad(gauge('vllm:num_requests_waiting', [['{model_name="x"}', '0.0']]))).toEqual({ waiting: 0 })
    expect(readVllmLoad(gauge('vllm:num_requests_running', [['{model_name="x"}', '4.0']]))).toEqual({ waiting: undefined })
    expect(readVllmLoad('')).toEqual({ waiting: undefined })
  })

  it('ignores other families, histograms and look-alike names included, in a realistic /metrics page', () => {
    const text = [
      '# HELP python_gc_objects_collected_total Objects collected during gc',
      '# TYPE python_gc_objects_collected_total counter',
      'python_gc_objects_collected_total{generation="0"} 1234.0',
      '# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.',
      '# TYPE vllm:time_to_first_token_seconds histogram',
      'vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="x"} 0.0',
      'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="x"} 12.0',
      'vllm:time_to_first_token_seconds_count{model_name="x"} 12.0',
      'vllm:num_requests_waiting_by_reason{reason="x"} 40.0',
      '',
    ].join('\n') + gauge('vllm:num_requests_waiting', [['{model_name="x"}', '2.0']])

    expect(readVllmLoad(text)).toEqual({ waiting: 2 })
  })

  it('skips samples that are not finite numbers', () => {
    const text = gauge('vllm:num_requests_waiting', [
      ['{engine="0"}', 'NaN'],
      ['{engine="1"}', '3.0'],
      ['{engine="2"}', '+Inf'],
    ])

    expect(readVllmLoad(text)).toEqual({ waiting: 3 })
  })

  it('yields nothing for text that is not Prometheus exposition at all', () => {
    for (const text of ['garbage', '<html><body>502 Bad Gateway</body></html>', '{"detail":"Not Found"}', '\u0000\u0001\u0002']) {
      expect(readVllmLoad(text)).toEqual({ waiting: undefined })
    }
  })

  it('keeps the well-formed samples when a line is malformed', () => {
    const text = gauge('vllm:num_requests_waiting', [['{engine="0"}', '4.0']]) + 'vllm:num_requests_waiting{engine="1" 3\n' + 'vllm:num_requests_waiting{{{ oops\n'

    expect(readVllmLoad(text)).toEqual({ waiting: 4 })
  })

  it('reads CRLF line endings and samples with timestamps', () => {
    const text = 'vllm:num_requests_waiting{engine="0"} 3.0 1700000000000\r\nvllm:num_requests_waiting{engine="1"} 2.0\r\n'

    expect(readVllmLoad(text)).toEqual({ waiting: 5 })
  })

  // Regression (balancing review): the text format separates tokens by blanks and/or tabs; a tab after the
  // name was read as no sample, so least_loaded took a backend with 50 waiting for an idle one.
  it('reads a sample whose name is followed by a tab', () => {
    expect(readVllmLoad('vllm:num_requests_waiting\t50\n')).toEqual({ waiting: 50 })
    expect(readVllmLoad('vllm:num_requests_waiting \t 7\nvllm:num_requests_waiting{engine="1"}\t3\n')).toEqual({ waiting: 10 })
  })

  it('skips a negative sample, which would draw traffic to its backend', () => {
    expect(readVllmLoad('vllm:num_requests_waiting{engine="0"} -4\nvllm:num_requests_waiting{engine="1"} 2\n')).toEqual({ waiting: 2 })
  })
})
