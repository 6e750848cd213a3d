// A simulated vLLM server for the balancer benchmark: no model, only the
// costs that make routing matter.
//   - `slots` requests are served at once; the rest wait in a FIFO queue
//     (reported as vllm:num_requests_waiting).
//   - A request holds its slot for prefill + decode:
//       prefill_ms_per_char x (prompt characters not in the prefix cache)
//     + decode_ms_per_token x (completion tokens).
//   - The prefix cache (bench/lib/prefix-cache.mjs) is an LRU of
//     `cache_entries` prompt prefixes cut at message boundaries. When a
//     request starts, its longest cached prefix is a hit and every prefix of
//     its prompt is cached; when it ends, so is the prompt followed by the
//     answer, which the next turn of a conversation begins with.
// Answers are non-streaming OpenAI chat completions with usage (built by
// dist/dev/chat-answer.js, as the dev stand-in builds them), as many tokens
// as `max_tokens` asks (default 16).
// GET /health, GET /metrics (vLLM gauges), GET /stats (hits, misses, characters),
// POST /reset (empty cache, zero counts; used after the gateway's warm-up).
// Usage: node cached-backend.mjs '{"slots":4,"prefill_ms_per_char":0.02,"decode_ms_per_token":2,"cache_entries":200}'
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import { completionBody, planAnswer } from '../../dist/dev/chat-answer.js'
import { extendBoundaries, PrefixCache, prefixBoundaries } from '../lib/prefix-cache.mjs'

const model = { slots: 4, prefill_ms_per_char: 0.02, decode_ms_per_token: 2, cache_entries: 200, ...JSON.parse(process.argv[2] ?? '{}') }
const DEFAULT_TOKENS = 16

const queue = []
let running = 0
let cache
let stats

/** Empties the cache and zeroes the counts (after a warm-up, with nothing in flight). */
function reset() {
  cache = new PrefixCache(model.cache_entries)
  stats = { requests: 0, hits: 0, misses: 0, prompt_chars: 0, cached_chars: 0, busy_ms: 0, max_waiting: 0 }
}
reset()

function send(response, status, type, text) {
  response.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) })
  response.end(text)
}

function gauge(name, value) {
  return `# TYPE ${name} gauge\n${name}{model_name="sim"} ${Number.isInteger(value) ? value.toFixed(1) : value}\n`
}

function metricsText() {
  return (
    gauge('vllm:num_requests_running', running) +
    gauge('vllm:num_requests_waiting', queue.length) +
    gauge('vllm:kv_cache_usage_perc', cache.size / cache.capacity)
  )
}

/** Takes a slot: looks the prompt up in the cache, holds the slot for the cost, answers. */
function serve(job) {
  if (job.response.destroyed) return next()
  running++
  const boundaries = prefixBoundaries(job.body.messages)
  const promptChars = boundaries.at(-1)?.chars ?? 0
  const cachedChars = cache.lookup(boundaries)
  cache.touch(boundaries)
  const plan = planAnswer({ requestId: randomUUID(), body: job.body, configuredTokens: job.tokens, defaultModel: 'sim', nowMs: Date.now() })
  const costMs = model.prefill_ms_per_char * (promptChars - cachedChars) + model.decode_ms_per_token * plan.tokens.length
  stats.requests++
  stats[cachedChars > 0 ? 'hits' : 'misses']++
  stats.prompt_chars += promptChars
  stats.cached_chars += cachedChars
  stats.busy_ms += costMs
  setTimeout(() => {
    cache.touch(extendBoundaries(boundaries, { role: 'assistant', content: plan.tokens.join('') }))
    send(job.response, 200, 'application/json', JSON.stringify(completionBody(plan)))
    running--
    next()
  }, costMs)
}

function next() {
  const job = queue.shift()
  if (job !== undefined) serve(job)
}

function enqueue(body, response) {
  const limit = Number.isInteger(body.max_completion_tokens) ? body.max_completion_tokens : body.max_tokens
  const job = { body, response, tokens: Number.isInteger(limit) && limit >= 0 ? limit : DEFAULT_TOKENS }
  if (running < model.slots) return serve(job)
  queue.push(job)
  stats.max_waiting = Math.max(stats.max_waiting, queue.length)
}

const server = createServer((request, response) => {
  const path = request.url.split('?')[0]
  if (request.method === 'GET' && path === '/health') return send(response, 200, 'text/plain', '')
  if (request.method === 'GET' && path === '/metrics') return send(response, 200, 'text/plain; version=0.0.4', metricsText())
  if (request.method === 'GET' && path === '/stats') return send(response, 200, 'application/json', JSON.stringify({ ...stats, model, cache_size: cache.size }))
  if (request.method === 'POST' && path === '/reset') {
    if (running > 0 || queue.length > 0) return send(response, 409, 'application/json', '{"detail":"requests in flight"}')
    reset()
    return send(response, 204, 'text/plain', '')
  }
  if (request.method !== 'POST' || path !== '/v1/chat/completions') return send(response, 404, 'application/json', '{"detail":"Not Found"}')
  const chunks = []
  request.on('data', (chunk) => chunks.push(chunk))
  request.on('end', () => {
    let body
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      return send(response, 400, 'application/json', '{"object":"error","message":"invalid JSON","type":"BadRequestError","code":400}')
    }
    enqueue(body !== null && typeof body === 'object' ? body : {}, response)
  })
})

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }))
})
process.once('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
