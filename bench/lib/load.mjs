// Runs autocannon against a target and returns the figures the reports use.
import autocannon from 'autocannon'

export const CHAT_BODY = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Hello, how are you today?' }], max_tokens: 8 })

export async function load({ url, path = '/v1/chat/completions', token, connections = 64, seconds = 5, body = CHAT_BODY, overallRate }) {
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
