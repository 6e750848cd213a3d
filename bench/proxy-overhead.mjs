// What the gateway adds over talking to the backend directly, side by side in
// one run, with nginx proxy_pass (upstream keepalive) as the reference when
// installed, and a bare Node proxy (bench/servers/bare-proxy.mjs: node:http +
// undici, nothing else) as the floor any Node gateway starts from.
// Loopback only; under four minutes, a third of it warm-up (see warmUp). Each
// target is measured in slices taken in turns with the others
// (lib/interleaved.mjs), so the host's drift in speed falls on all alike.
//   (a) max throughput: 64 connections, small non-streaming chat body
//   (b) open loop at a fixed rate: p50/p99 and the latency the target adds
//   (c) streaming: 16 tokens, 5 ms apart: time to first and last byte, req/s
//   (d) gateway CPU seconds per 1,000 requests and RSS after the run
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startChildServer } from './lib/child-server.mjs'
import { CHAT_BODY, load, STREAM_BODY } from './lib/load.mjs'
import { nginxAvailable, startNginx } from './lib/nginx.mjs'
import { inTurns, percentile, pooled, sum } from './lib/interleaved.mjs'
import { openLoop, streamLoop } from './lib/open-loop.mjs'
import { machine, writeResult } from './lib/results.mjs'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const RATE = Number(process.env.BENCH_RATE ?? 500)
// BENCH_RUNS=3 repeats everything and prints medians (about 4 minutes a run).
const RUNS = Number(process.env.BENCH_RUNS ?? 1)
// What each target serves before it is measured (see warmUp): requests
// before (a) and (b), streams before (c).
const WARM_UP_REQUESTS = Number(process.env.BENCH_WARM_UP_REQUESTS ?? 40000)
const WARM_UP_STREAMS = Number(process.env.BENCH_WARM_UP_STREAMS ?? 5000)
// Warm-up stops at its budget (so a run stays bounded on a slow host); the
// JSON's warm_up_served shows what each target got by then.
const WARM_UP_BUDGET_SECONDS = { requests: 45, streams: 30 }
// Streams last ~90 ms each: the warm-up opens more of them at once than (c)
// measures with, so the same code paths get hot in fewer seconds.
const WARM_UP_STREAM_CONNECTIONS = 128
// Each target's SECONDS are measured in ROUNDS slices, taken in turns (lib/interleaved.mjs).
const ROUNDS = Number(process.env.BENCH_SLICES ?? 5)
const SLICE_SECONDS = SECONDS / ROUNDS
// Each (b) slice first sends this long at the rate without counting it (lib/open-loop.mjs).
const OPEN_LOOP_LEAD_IN_SECONDS = 0.2
const TOKEN = 'bench-token'
const PATH = '/v1/chat/completions'
const needsKey = (target) => target.startsWith('gateway')
const headers = (target) => ({ 'content-type': 'application/json', ...(needsKey(target) ? { authorization: `Bearer ${TOKEN}` } : {}) })
// The backend serves any model name; the gateway knows "bench".

/**
 * direct, gateway (log level warn: no access log), gateway_logged (info: one
 * access line per request, to a file, as operators run it), node_floor (the
 * bare Node proxy) and nginx.
 */
async function startTargets(backendEnv) {
  const backend = await startChildServer('bench/servers/backend.mjs', [], backendEnv)
  const gateway = await startChildServer('bench/servers/gateway.mjs', [backend.url, 'admission'])
  const accessLog = join(tmpdir(), `sluice-bench-access-${process.pid}.log`)
  const logged = await startChildServer('bench/servers/gateway.mjs', [backend.url, 'admission'], { BENCH_ACCESS_LOG: accessLog })
  const floor = await startChildServer('bench/servers/bare-proxy.mjs', [backend.url])
  const nginx = nginxAvailable() ? await startNginx(backend.url) : null
  const targets = { direct: backend.url, gateway: gateway.url, gateway_logged: logged.url, node_floor: floor.url, ...(nginx ? { nginx: nginx.url } : {}) }
  const processes = { gateway, gateway_logged: logged, node_floor: floor }
  const stop = async () => {
    await Promise.all([backend.stop(), gateway.stop(), logged.stop(), floor.stop(), nginx?.stop()])
    await rm(accessLog, { force: true })
  }
  return { targets, processes, stop }
}

/** `measure(seconds)` of one target, with the CPU its process used meanwhile (when it is one of ours). */
function withCpu(process, measure) {
  return async (seconds) => {
    const before = await process?.cpuSeconds()
    const result = await measure(seconds)
    return before === undefined ? result : { ...result, cpu_seconds: (await process.cpuSeconds()) - before }
  }
}

/**
 * Gives the targets slices in turns until each has served `count`
 * (requests or streams: `served` says which), or `budgetSeconds` are spent.
 * A fresh gateway needs ~40,000 requests at this load before V8 has
 * optimized its request path (2 s windows from start: 1,300, 3,000, 4,000,
 * 5,400, 7,000 req/s, then flat), ~5,000 streams for the streaming path;
 * the floor settles in a quarter of that. The 2 s warm-up this bench once
 * had measured the gateway while it was still compiling. In turns, so no
 * target sits idle for a minute before it is measured: one that had served
 * its first seconds back ~1.6x slower.
 */
async function warmUp(targets, { count, budgetSeconds }, served) {
  const total = Object.fromEntries(Object.keys(targets).map((name) => [name, 0]))
  const deadline = performance.now() + budgetSeconds * 1000
  const short = () => Object.entries(total).filter(([, n]) => n < count)
  while (short().length > 0 && performance.now() < deadline) {
    for (const [name] of short()) {
      if (performance.now() >= deadline) break
      total[name] += served(await targets[name](SLICE_SECONDS))
    }
  }
  return total
}

/** (a) and (b): the targets answer 8 tokens at once. */
async function throughputAndRate() {
  const run = await startTargets({ BENCH_TOKENS: '8', BENCH_DELAY_MS: '0' })
  try {
    const saturating = Object.fromEntries(
      Object.entries(run.targets).map(([name, url]) => [name, withCpu(run.processes[name], (seconds) => load({ url, token: needsKey(name) ? TOKEN : undefined, seconds, connections: 64 }))]),
    )
    const warmedWith = await warmUp(saturating, { count: WARM_UP_REQUESTS, budgetSeconds: WARM_UP_BUDGET_SECONDS.requests }, (r) => r.requests)
    const throughput = mapValues(await inTurns({ targets: saturating, rounds: ROUNDS, slice: SLICE_SECONDS }), (slices) => ({
      requests: sum(slices, (r) => r.requests),
      rps: sum(slices, (r) => r.requests) / sum(slices, (r) => r.seconds),
      // autocannon gives percentiles, not latencies: the median slice's.
      p50_ms: median(slices.map((r) => r.p50_ms)),
      p99_ms: median(slices.map((r) => r.p99_ms)),
      non2xx: sum(slices, (r) => r.non2xx),
      cpu_seconds: sum(slices, (r) => r.cpu_seconds ?? NaN),
    }))
    const atRate = Object.fromEntries(
      Object.entries(run.targets)
        .filter(([name]) => name !== 'gateway_logged')
        .map(([name, url]) => [name, (seconds) => openLoop({ url, path: PATH, headers: headers(name), body: CHAT_BODY, rate: RATE, seconds, leadInSeconds: OPEN_LOOP_LEAD_IN_SECONDS })]),
    )
    const fixedRate = mapValues(await inTurns({ targets: atRate, rounds: ROUNDS, slice: SLICE_SECONDS }), (slices) => {
      const latencies = pooled(slices, (r) => r.latencies_ms)
      return { sent: sum(slices, (r) => r.sent), errors: sum(slices, (r) => r.errors), non2xx: sum(slices, (r) => r.non2xx), p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99) }
    })
    const rss = await run.processes.gateway.rssBytes()
    return { throughput, fixedRate, gatewayRssMb: rss / 2 ** 20, warmedWith }
  } finally {
    await run.stop()
  }
}

/** (c): 16 tokens, 5 ms apart. */
async function streaming() {
  const run = await startTargets({ BENCH_TOKENS: '16', BENCH_DELAY_MS: '5' })
  try {
    const streamersAt = (connections) =>
      Object.fromEntries(
        Object.entries(run.targets)
          .filter(([name]) => name !== 'gateway_logged')
          .map(([name, url]) => [name, withCpu(run.processes[name], (seconds) => streamLoop({ url, path: PATH, headers: headers(name), body: STREAM_BODY, connections, seconds }))]),
      )
    const warmedWith = await warmUp(streamersAt(WARM_UP_STREAM_CONNECTIONS), { count: WARM_UP_STREAMS, budgetSeconds: WARM_UP_BUDGET_SECONDS.streams }, (r) => r.completed)
    const streamers = streamersAt(32)
    const results = mapValues(await inTurns({ targets: streamers, rounds: ROUNDS, slice: SLICE_SECONDS }), (slices) => {
      const completed = sum(slices, (r) => r.completed)
      return {
        completed,
        errors: sum(slices, (r) => r.errors),
        rps: completed / sum(slices, (r) => r.seconds),
        ttfb_p50_ms: percentile(pooled(slices, (r) => r.first_byte_ms), 50),
        ttlb_p50_ms: percentile(pooled(slices, (r) => r.last_byte_ms), 50),
        cpu_ms_per_stream: (sum(slices, (r) => r.cpu_seconds ?? NaN) / completed) * 1000,
      }
    })
    return { results, warmedWith }
  } finally {
    await run.stop()
  }
}

const mapValues = (object, f) => Object.fromEntries(Object.entries(object).map(([k, v]) => [k, f(v)]))

async function runOnce() {
  const { throughput, fixedRate, gatewayRssMb, warmedWith } = await throughputAndRate()
  const { results: stream, warmedWith: streamsWarmedWith } = await streaming()
  const perThousand = (t) => (t.cpu_seconds / t.requests) * 1000
  return {
    warm_up_served: { requests: warmedWith, streams: streamsWarmedWith },
    throughput,
    fixed_rate: fixedRate,
    streaming: stream,
    gateway: {
      cpu_seconds_per_1000_requests: perThousand(throughput.gateway),
      cpu_seconds_per_1000_requests_logged: perThousand(throughput.gateway_logged),
      node_floor_cpu_seconds_per_1000_requests: perThousand(throughput.node_floor),
      rss_mb_after: gatewayRssMb,
    },
  }
}

const ratio = (value, base) => (Number.isFinite(value) && base ? value / base : NaN)
const fmt = (n, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a')
const median = (values) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[(sorted.length - 1) >> 1]
}

const runs = []
for (let i = 0; i < RUNS; i++) runs.push(await runOnce())
/** The median over runs of one figure, picked by `get`. */
const med = (get) => median(runs.map((r) => get(r)))
const names = Object.keys(runs[0].throughput)
const summary = {
  throughput: Object.fromEntries(names.map((n) => [n, { rps: med((r) => r.throughput[n].rps), p50_ms: med((r) => r.throughput[n].p50_ms), p99_ms: med((r) => r.throughput[n].p99_ms), non2xx: med((r) => r.throughput[n].non2xx) }])),
  fixed_rate: Object.fromEntries(
    Object.keys(runs[0].fixed_rate).map((n) => [n, { p50_ms: med((r) => r.fixed_rate[n].p50_ms), p99_ms: med((r) => r.fixed_rate[n].p99_ms), added_p50_ms: med((r) => r.fixed_rate[n].p50_ms - r.fixed_rate.direct.p50_ms), added_p99_ms: med((r) => r.fixed_rate[n].p99_ms - r.fixed_rate.direct.p99_ms), errors: med((r) => r.fixed_rate[n].errors), non2xx: med((r) => r.fixed_rate[n].non2xx) }]),
  ),
  streaming: Object.fromEntries(
    Object.keys(runs[0].streaming).map((n) => [n, { ttfb_p50_ms: med((r) => r.streaming[n].ttfb_p50_ms), added_ttfb_p50_ms: med((r) => r.streaming[n].ttfb_p50_ms - r.streaming.direct.ttfb_p50_ms), ttlb_p50_ms: med((r) => r.streaming[n].ttlb_p50_ms), rps: med((r) => r.streaming[n].rps), cpu_ms_per_stream: med((r) => r.streaming[n].cpu_ms_per_stream) }]),
  ),
  gateway: {
    cpu_seconds_per_1000_requests: med((r) => r.gateway.cpu_seconds_per_1000_requests),
    cpu_seconds_per_1000_requests_logged: med((r) => r.gateway.cpu_seconds_per_1000_requests_logged),
    node_floor_cpu_seconds_per_1000_requests: med((r) => r.gateway.node_floor_cpu_seconds_per_1000_requests),
    rss_mb_after: med((r) => r.gateway.rss_mb_after),
  },
}
// Ratios are taken within each run, then the median of those.
summary.ratios = {
  gateway_to_direct: med((r) => ratio(r.throughput.gateway.rps, r.throughput.direct.rps)),
  gateway_to_nginx: med((r) => ratio(r.throughput.gateway.rps, r.throughput.nginx?.rps)),
  gateway_logged_to_nginx: med((r) => ratio(r.throughput.gateway_logged.rps, r.throughput.nginx?.rps)),
  node_floor_to_nginx: med((r) => ratio(r.throughput.node_floor.rps, r.throughput.nginx?.rps)),
  gateway_to_node_floor: med((r) => ratio(r.throughput.gateway.rps, r.throughput.node_floor.rps)),
}
// (b)'s second form: direct's own p99 is often one host stall (tens of ms),
// which makes "added over direct" meaningless; nginx is measured in the same turns.
summary.fixed_rate_p99_over_nginx_ms = Object.fromEntries(
  Object.keys(runs[0].fixed_rate)
    .filter((n) => n !== 'direct' && n !== 'nginx' && runs[0].fixed_rate.nginx)
    .map((n) => [n, med((r) => r.fixed_rate[n].p99_ms - r.fixed_rate.nginx.p99_ms)]),
)
const result = {
  date: new Date().toISOString(),
  command: RUNS === 1 ? 'npm run bench' : `BENCH_RUNS=${RUNS} node bench/proxy-overhead.mjs`,
  machine: machine({ nginx: nginxAvailable() }),
  seconds_per_run: SECONDS,
  fixed_rate_per_second: RATE,
  warm_up: { requests: WARM_UP_REQUESTS, streams: WARM_UP_STREAMS, budget_seconds: WARM_UP_BUDGET_SECONDS, stream_connections: WARM_UP_STREAM_CONNECTIONS },
  measured_in_turns: { rounds: ROUNDS, slice_seconds: SLICE_SECONDS, open_loop_lead_in_seconds: OPEN_LOOP_LEAD_IN_SECONDS },
  runs: RUNS,
  summary,
  each_run: runs,
}
await writeResult('proxy-overhead.json', result)

const t = summary.throughput
console.log(`\nSluice proxy overhead — ${result.date}, ${result.machine.cores} cores, ${result.machine.cpu}, Node ${result.machine.node}${RUNS > 1 ? `, medians of ${RUNS} runs` : ''}`)
console.log(`(a) max throughput, 64 connections, ${SECONDS} s`)
for (const n of names) {
  console.log(`  ${n.padEnd(15)} ${fmt(t[n].rps, 0).padStart(7)} req/s (x${fmt(ratio(t[n].rps, t.direct.rps), 2)})  p50 ${fmt(t[n].p50_ms)} ms  p99 ${fmt(t[n].p99_ms)} ms  non-2xx ${t[n].non2xx}`)
}
console.log(`  gateway / nginx x${fmt(summary.ratios.gateway_to_nginx, 2)} (target >= 0.5), with access log x${fmt(summary.ratios.gateway_logged_to_nginx, 2)}; node_floor / nginx x${fmt(summary.ratios.node_floor_to_nginx, 2)}`)
console.log(`(b) open loop, ${RATE} req/s for ${SECONDS} s`)
for (const [n, f] of Object.entries(summary.fixed_rate)) {
  console.log(`  ${n.padEnd(15)} p50 ${fmt(f.p50_ms, 2)} ms  p99 ${fmt(f.p99_ms, 2)} ms  added p50 ${fmt(f.added_p50_ms, 2)} ms  added p99 ${fmt(f.added_p99_ms, 2)} ms  errors ${f.errors} non-2xx ${f.non2xx}`)
}
const overNginx = summary.fixed_rate_p99_over_nginx_ms
if (overNginx.gateway !== undefined) {
  console.log(`  gateway added p99 ${fmt(summary.fixed_rate.gateway.added_p99_ms, 2)} ms (target <= 1); p99 over nginx's ${fmt(overNginx.gateway, 2)} ms (target <= 0.5), node_floor's ${fmt(overNginx.node_floor, 2)} ms`)
}
console.log(`(c) streaming, 16 tokens 5 ms apart, 32 connections`)
for (const [n, st] of Object.entries(summary.streaming)) {
  const cpu = Number.isFinite(st.cpu_ms_per_stream) ? `  ${fmt(st.cpu_ms_per_stream, 2)} CPU ms/stream` : ''
  console.log(`  ${n.padEnd(15)} first byte p50 ${fmt(st.ttfb_p50_ms, 2)} ms (added ${fmt(st.added_ttfb_p50_ms, 2)})  last byte p50 ${fmt(st.ttlb_p50_ms, 2)} ms  ${fmt(st.rps, 0)} req/s${cpu}`)
}
console.log(`  gateway added first byte p50 ${fmt(summary.streaming.gateway.added_ttfb_p50_ms, 2)} ms (target <= 0.5)`)
const g = summary.gateway
console.log(`(d) gateway: ${fmt(g.cpu_seconds_per_1000_requests, 3)} CPU s per 1,000 requests (${fmt(g.cpu_seconds_per_1000_requests_logged, 3)} with the access log; node_floor ${fmt(g.node_floor_cpu_seconds_per_1000_requests, 3)}), RSS ${fmt(g.rss_mb_after, 0)} MiB after the run`)
if (!result.machine.nginx) console.log('nginx not installed: apt-get install nginx-light to add the reference column')
