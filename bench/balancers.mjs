// Balancer simulation (issue: routing and resilience): round_robin,
// least_loaded and prefix_affinity on a multi-turn chat workload, through the
// gateway, against 4 simulated vLLM servers with a prefix cache and a queue
// (bench/servers/cached-backend.mjs; no GPU). Same seeded workload for each
// strategy, fresh backends and gateway for each run. Reports the prefix-cache
// hit rate (from the backends' /stats), median and p99 request latency and
// wall time; writes bench/results/balancers.json and balancers.svg.
import { writeFile } from 'node:fs/promises'
import os from 'node:os'
import { planAnswer } from '../dist/dev/chat-answer.js'
import { balancerChart } from './lib/balancer-chart.mjs'
import { startChildServer } from './lib/child-server.mjs'
import { extendBoundaries, PrefixCache, prefixBoundaries } from './lib/prefix-cache.mjs'
import { makeWorkload, percentile, runConversations, warmUp } from './lib/conversations.mjs'
import { machine, writeResult } from './lib/results.mjs'

const STRATEGIES = ['round_robin', 'least_loaded', 'prefix_affinity']
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const BACKENDS = 4
const TOKEN = 'bench-token'
/** The cost model of each simulated server (see cached-backend.mjs). */
const MODEL = { slots: 4, prefill_ms_per_char: 0.02, decode_ms_per_token: 2, cache_entries: 200 }
const WORKLOAD = {
  seed: 6,
  conversations: Number(process.env.BENCH_CONVERSATIONS ?? 60),
  turns: 6,
  concurrency: Number(process.env.BENCH_CONCURRENCY ?? 24),
}

async function call(url, method = 'GET') {
  const response = await fetch(url, { method })
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status}`)
  return response.status === 204 ? null : response.json()
}

/**
 * What one backend with an unbounded cache would hit on this workload: every
 * turn but the first finds its history cached, and only the new user message
 * is prefilled. No balancer can do better.
 */
function hitCeiling(workload) {
  const cache = new PrefixCache(Infinity)
  let requests = 0
  let hits = 0
  let promptChars = 0
  let cachedChars = 0
  for (const conversation of workload) {
    const messages = [{ role: 'system', content: conversation.system }]
    for (const turn of conversation.turns) {
      messages.push({ role: 'user', content: turn.user })
      const boundaries = prefixBoundaries(messages)
      const cached = cache.lookup(boundaries)
      const plan = planAnswer({ requestId: 'ceiling', body: { max_tokens: turn.maxTokens }, configuredTokens: turn.maxTokens, defaultModel: 'sim', nowMs: 0 })
      const answer = { role: 'assistant', content: plan.tokens.join('') }
      cache.touch(extendBoundaries(boundaries, answer))
      messages.push(answer)
      requests++
      hits += cached > 0 ? 1 : 0
      promptChars += boundaries.at(-1).chars
      cachedChars += cached
    }
  }
  return { hit_rate: hits / requests, cached_char_rate: cachedChars / promptChars }
}

/** One run: fresh backends and gateway, a warm-up, backends reset, then the workload. */
async function runOnce(strategy, workload) {
  const backends = await Promise.all(
    Array.from({ length: BACKENDS }, () => startChildServer('bench/servers/cached-backend.mjs', [JSON.stringify(MODEL)])),
  )
  const gateway = await startChildServer('bench/servers/balancer-gateway.mjs', [strategy, ...backends.map((b) => b.url)])
  try {
    await warmUp({ url: gateway.url, token: TOKEN, model: 'sim', concurrency: WORKLOAD.concurrency })
    await Promise.all(backends.map((b) => call(`${b.url}/reset`, 'POST')))
    const load = await runConversations({ url: gateway.url, token: TOKEN, model: 'sim', workload, concurrency: WORKLOAD.concurrency })
    return { load, backends: await Promise.all(backends.map((b) => call(`${b.url}/stats`))) }
  } finally {
    await Promise.all([gateway, ...backends].map((s) => s.stop()))
  }
}

/** Rounds pooled: hit rates over all requests, percentiles over all latencies. */
function summarize(runs) {
  const all = runs.flatMap((r) => r.backends)
  const sum = (key) => all.reduce((total, s) => total + s[key], 0)
  const latencies = runs.flatMap((r) => r.load.latencies_ms).sort((a, b) => a - b)
  return {
    requests: latencies.length,
    failures: runs.reduce((total, r) => total + r.load.failures, 0),
    first_failure: runs.map((r) => r.load.first_failure).find((f) => f !== null) ?? null,
    hit_rate: sum('hits') / sum('requests'),
    cached_char_rate: sum('cached_chars') / sum('prompt_chars'),
    /** Slot time the backends spent on the workload (prefill + decode), per round. */
    busy_s_per_round: sum('busy_ms') / 1000 / runs.length,
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    wall_s: runs.reduce((total, r) => total + r.load.wall_s, 0) / runs.length,
    rounds: runs.map((r) => ({
      p50_ms: r.load.p50_ms,
      p99_ms: r.load.p99_ms,
      wall_s: r.load.wall_s,
      backend_requests: r.backends.map((s) => s.requests),
      backend_max_waiting: r.backends.map((s) => s.max_waiting),
    })),
  }
}

const began = performance.now()
const loadAtStart = os.loadavg()
const workload = makeWorkload(WORKLOAD)
const runs = Object.fromEntries(STRATEGIES.map((s) => [s, []]))
// Strategies alternate within each round, so drift on a shared machine hits all alike.
for (let round = 0; round < ROUNDS; round++) {
  for (const strategy of STRATEGIES) runs[strategy].push(await runOnce(strategy, workload))
}
const results = Object.fromEntries(STRATEGIES.map((s) => [s, summarize(runs[s])]))

const result = {
  date: new Date().toISOString(),
  command: 'npm run bench:balancers',
  machine: machine({ load_average_at_start: loadAtStart }),
  backends: BACKENDS,
  cost_model: MODEL,
  workload: { ...WORKLOAD, rounds: ROUNDS },
  ceiling: hitCeiling(workload),
  strategies: results,
  total_seconds: (performance.now() - began) / 1000,
}
await writeResult('balancers.json', result)
await writeFile('bench/results/balancers.svg', balancerChart(result))

const pct = (x) => `${(x * 100).toFixed(1)} %`
const ms = (x) => `${x.toFixed(0)} ms`
console.log(`\nBalancer simulation — ${result.date}, ${result.machine.cores} cores, Node ${result.machine.node}`)
console.log(
  `${WORKLOAD.conversations} conversations x ${WORKLOAD.turns} turns, ${WORKLOAD.concurrency} at a time, ${BACKENDS} backends x ${MODEL.slots} slots, ${ROUNDS} rounds pooled`,
)
console.log('| strategy | requests with a cache hit | prompt chars from cache | slot time per round | p50 (rounds) | p99 (rounds) | wall time per round | requests per backend (round 1) |')
console.log('|---|---:|---:|---:|---:|---:|---:|---|')
const spread = (rounds, key) => `${Math.min(...rounds.map((r) => r[key])).toFixed(0)}–${Math.max(...rounds.map((r) => r[key])).toFixed(0)}`
for (const [strategy, r] of Object.entries(results)) {
  console.log(
    `| ${strategy} | ${pct(r.hit_rate)} | ${pct(r.cached_char_rate)} | ${r.busy_s_per_round.toFixed(1)} s | ${ms(r.p50_ms)} (${spread(r.rounds, 'p50_ms')}) | ${ms(r.p99_ms)} (${spread(r.rounds, 'p99_ms')}) | ${r.wall_s.toFixed(2)} s | ${r.rounds[0].backend_requests.join(' / ')} |`,
  )
  if (r.failures > 0) console.log(`  ${r.failures} failed conversations, first: ${r.first_failure}`)
}
console.log(`| (ceiling: one backend, unbounded cache) | ${pct(result.ceiling.hit_rate)} | ${pct(result.ceiling.cached_char_rate)} | | | | | |`)
console.log(`total ${result.total_seconds.toFixed(1)} s; bench/results/balancers.json, bench/results/balancers.svg`)
