// Runs autocannon against a target and returns the figures the reports use.
import autocannon from 'autocannon'

// BENCH_PROMPT_BYTES pads the user message to that many bytes (a real prompt is kilobytes, the default body ~100 bytes).
const PROMPT = 'Hello, how are you today?'.padEnd(Number(process.env.BENCH_PROMPT_BYTES ?? 0), ' Hello, how are you today?')
export const CHAT_BODY = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: PROMPT }], max_tokens: 8 })
export const STREAM_BODY = JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: PROMPT }] })

/** The chat route, and the headers the bench gateway's key sends (bench/lib/bench-gateway.mjs). */
export const CHAT_PATH = '/v1/chat/completions'
export const BENCH_HEADERS = { 'content-type': 'application/json', authorization: 'Bearer bench-token' }
/** The two processes the profiling benches compare: the gateway with admission on, and the Node floor. */
export const GATEWAY_AND_FLOOR = { gateway: ['bench/servers/gateway.mjs', 'admission'], node_floor: ['bench/servers/bare-proxy.mjs'] }

export async function load({ url, path = CHAT_PATH, token, connections = 64, seconds = 5, body = CHAT_BODY, overallRate }) {
  const result = await autocannon({
    url: `${url}${path}`,
    method: 'POST',
    connections,
    duration: seconds,
    overallRate,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  })
  return {
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.average,
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  }
}
