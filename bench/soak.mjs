// Soak: steady open-loop load for BENCH_SOAK_SECONDS (default 600) at
// BENCH_SOAK_RATE req/s (default 200), mixing non-streaming answers (50 %),
// whole streams (30 %) and streams the client aborts after the first chunk
// (20 %). Every 10 s: the gateway's RSS, GET /healthz latency (event-loop lag
// seen from outside), the event-loop lag prom-client reports, and the
// counters. At the end: RSS and lag slopes (least squares, per minute, over
// the samples under load) and counter consistency: requests sent = answers +
// client aborts + refusals + errors, errors = 0, and the gateway's
// sluice_requests_total for the model grew by exactly the requests sent.
import { Pool } from 'undici'
import { startChildServer } from './lib/child-server.mjs'
import { healthzLatency, requestsByStatus, scrapeMetrics, slope, sumOf } from './lib/gateway-metrics.mjs'
import { machine, writeResult } from './lib/results.mjs'

const SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 600)
const RATE = Number(process.env.BENCH_SOAK_RATE ?? 200)
const WARM_UP_SECONDS = 10
const SAMPLE_EVERY_MS = 10_000
const TOKEN = 'bench-token'
const PATH = '/v1/chat/completions'
const HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }
const MESSAGES = [{ role: 'user', content: 'Hello, how are you today?' }]
const BODIES = {
  plain: JSON.stringify({ model: 'bench', messages: MESSAGES }),
  stream: JSON.stringify({ model: 'bench', stream: true, messages: MESSAGES }),
}
// Out of every ten requests: five plain, three streams read to the end, two aborted.
const KINDS = ['plain', 'plain', 'plain', 'plain', 'plain', 'stream', 'stream', 'stream', 'abort', 'abort']
const REFUSALS = new Set([429, 503])
const MIB = 2 ** 20
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function newTally() {
  return { sent: 0, answered: 0, aborted: 0, refused: 0, errors: 0, error_samples: [], outstanding: 0 }
}

async function send(pool, kind, tally) {
  const controller = new AbortController()
  tally.sent++
  tally.outstanding++
  try {
    const body = kind === 'plain' ? BODIES.plain : BODIES.stream
    const response = await pool.request({ path: PATH, method: 'POST', headers: HEADERS, body, signal: controller.signal })
    if (REFUSALS.has(response.statusCode)) {
      await response.body.dump()
      tally.refused++
    } else if (response.statusCode !== 200) {
      const text = await response.body.text()
      throw new Error(`status ${response.statusCode}: ${text.slice(0, 200)}`)
    } else if (kind === 'abort') {
      response.body.on('error', () => undefined)
      await new Promise((resolve) => response.body.once('data', resolve))
      controller.abort()
      tally.aborted++
    } else {
      const text = await response.body.text()
      if (kind === 'stream' && !text.endsWith('data: [DONE]\n\n')) throw new Error('stream ended without [DONE]')
      tally.answered++
    }
  } catch (error) {
    tally.errors++
    if (tally.error_samples.length < 5) tally.error_samples.push(String(error.message ?? error))
  } finally {
    tally.outstanding--
  }
}

/** Starts `rate` requests a second on schedule for `seconds`, whatever the answers do; `onTick` runs between requests. */
async function openLoop(pool, seconds, tally, onTick = () => undefined) {
  const total = Math.round(RATE * seconds)
  const intervalMs = 1000 / RATE
  const start = performance.now()
  for (let i = 0; i < total; i++) {
    const wait = start + i * intervalMs - performance.now()
    if (wait > 1) await sleep(wait)
    void send(pool, KINDS[i % KINDS.length], tally)
    onTick(performance.now() - start)
  }
  while (tally.outstanding > 0) await sleep(50)
}

async function sample(gateway, backend, elapsedMs, tally) {
  const [rss, backendRss, health, metrics] = await Promise.all([
    gateway.rssBytes(),
    backend.rssBytes(),
    healthzLatency(gateway.url),
    scrapeMetrics(gateway.url),
  ])
  return {
    t_s: elapsedMs / 1000,
    rss_mib: rss / MIB,
    backend_rss_mib: backendRss / MIB,
    heap_used_mib: sumOf(metrics, 'nodejs_heap_size_used_bytes') / MIB,
    healthz_median_ms: health.median_ms,
    healthz_max_ms: health.max_ms,
    eventloop_lag_p99_ms: sumOf(metrics, 'nodejs_eventloop_lag_p99_seconds') * 1000,
    inflight: sumOf(metrics, 'sluice_inflight_requests'),
    requests_total: sumOf(metrics, 'sluice_requests_total', { model: 'bench' }),
    sent: tally.sent,
  }
}

const backend = await startChildServer('bench/servers/backend.mjs', [], { BENCH_TOKENS: '16', BENCH_DELAY_MS: '5' })
const gateway = await startChildServer('bench/servers/gateway.mjs', [backend.url, 'admission'])
const pool = new Pool(gateway.url, { connections: 256, pipelining: 1 })
let result
try {
  await openLoop(pool, WARM_UP_SECONDS, newTally())
  await sleep(1000)
  const before = await scrapeMetrics(gateway.url)
  const tally = newTally()
  const samples = [await sample(gateway, backend, 0, tally)]
  let nextSampleMs = SAMPLE_EVERY_MS
  let sampling = Promise.resolve()
  const began = performance.now()
  await openLoop(pool, SECONDS, tally, (elapsedMs) => {
    if (elapsedMs < nextSampleMs) return
    nextSampleMs += SAMPLE_EVERY_MS
    sampling = sampling.then(async () => samples.push(await sample(gateway, backend, performance.now() - began, tally)))
  })
  await sampling
  const wallSeconds = (performance.now() - began) / 1000
  await sleep(2000)
  const after = await scrapeMetrics(gateway.url)
  samples.push(await sample(gateway, backend, performance.now() - began, tally))

  const statusBefore = requestsByStatus(before, 'bench')
  const byStatus = Object.fromEntries(Object.entries(requestsByStatus(after, 'bench')).map(([s, n]) => [s, n - (statusBefore[s] ?? 0)]))
  const gatewayTotal = Object.values(byStatus).reduce((a, b) => a + b, 0)
  const explained = ['200', '499', '429', '503'].reduce((sum, s) => sum + (byStatus[s] ?? 0), 0)
  // Slopes over the samples taken under load: the first (before the load starts) and the last (after it drained) are idle.
  const loaded = samples.slice(1, -1)
  const minutes = loaded.map((s) => s.t_s / 60)
  const { outstanding: _outstanding, ...counts } = tally
  const checks = {
    client_counts_add_up: tally.sent === tally.answered + tally.aborted + tally.refused + tally.errors,
    no_errors: tally.errors === 0,
    gateway_total_matches_sent: gatewayTotal === tally.sent,
    gateway_statuses_explained: explained === gatewayTotal,
    gateway_refusals_match: (byStatus['429'] ?? 0) + (byStatus['503'] ?? 0) === tally.refused,
    inflight_back_to_zero: samples.at(-1).inflight === 0,
  }
  const rssSlope = slope(minutes, loaded.map((s) => s.rss_mib))
  // Flat: under 1 MiB a minute (10 MiB over the 10-minute soak).
  checks.rss_flat = rssSlope < 1
  result = {
    date: new Date().toISOString(),
    command: `BENCH_SOAK_SECONDS=${SECONDS} node bench/soak.mjs`,
    machine: machine(),
    seconds: SECONDS,
    wall_seconds: wallSeconds,
    rate: RATE,
    mix: { plain: 0.5, stream: 0.3, aborted_stream: 0.2 },
    client: counts,
    gateway_requests_by_status: byStatus,
    gateway_requests_total: gatewayTotal,
    rss_slope_mib_per_min: rssSlope,
    heap_slope_mib_per_min: slope(minutes, loaded.map((s) => s.heap_used_mib)),
    healthz_slope_ms_per_min: slope(minutes, loaded.map((s) => s.healthz_median_ms)),
    eventloop_lag_p99_slope_ms_per_min: slope(minutes, loaded.map((s) => s.eventloop_lag_p99_ms)),
    checks,
    ok: Object.values(checks).every(Boolean),
    samples,
  }
} finally {
  await pool.destroy()
  await Promise.all([gateway.stop(), backend.stop()])
}

await writeResult('soak.json', result)

const fmt = (n, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a')
const first = result.samples[0]
const last = result.samples.at(-1)
const c = result.client
console.log(`\nSluice soak — ${result.date}, ${result.machine.cores} cores, Node ${result.machine.node}`)
console.log(`  ${RATE} req/s for ${SECONDS} s (wall ${fmt(result.wall_seconds)} s): 50 % plain, 30 % streams, 20 % aborted streams`)
console.log(`  client: ${c.sent} sent = ${c.answered} answered + ${c.aborted} aborted + ${c.refused} refused + ${c.errors} errors`)
console.log(`  gateway sluice_requests_total: +${result.gateway_requests_total} ${JSON.stringify(result.gateway_requests_by_status)}`)
console.log(`  RSS ${fmt(first.rss_mib)} -> ${fmt(last.rss_mib)} MiB, slope ${fmt(result.rss_slope_mib_per_min, 3)} MiB/min (heap ${fmt(result.heap_slope_mib_per_min, 3)} MiB/min)`)
console.log(`  /healthz median ${fmt(first.healthz_median_ms, 2)} -> ${fmt(last.healthz_median_ms, 2)} ms, slope ${fmt(result.healthz_slope_ms_per_min, 3)} ms/min; event-loop lag p99 slope ${fmt(result.eventloop_lag_p99_slope_ms_per_min, 3)} ms/min`)
for (const [name, passed] of Object.entries(result.checks)) console.log(`  ${passed ? 'ok  ' : 'FAIL'} ${name}`)
if (c.error_samples.length > 0) console.log(`  first errors: ${c.error_samples.join(' | ')}`)
if (!result.ok) process.exitCode = 1
