// Memory under many idle streams: N concurrent streams through one gateway
// to a slow stand-in backend (the role chunk at once, then nothing for ten
// minutes), so each stream is open and idle. Reports the gateway's RSS over
// its idle baseline, per stream, and the time to open them all; then closes
// them and checks the in-flight gauge returns to 0.
//   BENCH_STREAMS   streams to open (default 5,000)
// The gateway holds two sockets per stream (client and upstream), so the
// file descriptor limit (ulimit -n, inherited by the children) bounds N; a
// larger N is cut to what fits, and the result says so.
import { readFile, writeFile, mkdir } from 'node:fs/promises'
import { Pool } from 'undici'
import { startChildServer } from './lib/child-server.mjs'
import { scrapeMetrics, sumOf } from './lib/gateway-metrics.mjs'
import { machine } from './lib/results.mjs'

const REQUESTED = Number(process.env.BENCH_STREAMS ?? 5000)
const OPENING_AT_ONCE = 256
const FD_RESERVE = 200
const TOKEN = 'bench-token'
const PATH = '/v1/chat/completions'
const HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }
const BODY = JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'Hello, stay a while.' }] })
const MIB = 2 ** 20
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function openFileLimit() {
  const limits = await readFile('/proc/self/limits', 'utf8')
  return Number(/Max open files\s+(\d+)/.exec(limits)[1])
}

/** Opens one stream; resolves once its first body byte arrived. */
async function openStream(pool, streams) {
  const controller = new AbortController()
  const response = await pool.request({ path: PATH, method: 'POST', headers: HEADERS, body: BODY, signal: controller.signal })
  response.body.on('error', () => undefined)
  if (response.statusCode !== 200) {
    const text = await response.body.text().catch(() => '')
    throw new Error(`status ${response.statusCode}: ${text.slice(0, 200)}`)
  }
  await new Promise((resolve, reject) => {
    response.body.once('data', resolve)
    response.body.once('error', reject)
  })
  streams.push(controller)
}

/** Opens `count` streams, OPENING_AT_ONCE at a time; returns their abort controllers, failures and time taken. */
async function openStreams(pool, count) {
  const streams = []
  const failures = []
  let next = 0
  const started = performance.now()
  const opener = async () => {
    while (next < count) {
      next++
      await openStream(pool, streams).catch((error) => failures.push(String(error.message ?? error)))
    }
  }
  await Promise.all(Array.from({ length: Math.min(OPENING_AT_ONCE, count) }, opener))
  return { streams, failures, seconds: (performance.now() - started) / 1000 }
}

async function waitInflight(url, target, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  let value
  do {
    value = sumOf(await scrapeMetrics(url), 'sluice_inflight_requests')
    if (value === target) return value
    await sleep(250)
  } while (Date.now() < deadline)
  return value
}

async function heapUsed(url) {
  return sumOf(await scrapeMetrics(url), 'nodejs_heap_size_used_bytes')
}

async function closeStreams(url, streams) {
  const started = performance.now()
  for (const controller of streams) controller.abort()
  const inflight = await waitInflight(url, 0, 30_000)
  return { inflight, seconds: (performance.now() - started) / 1000 }
}

const nofile = await openFileLimit()
const fits = Math.floor((nofile - FD_RESERVE) / 2)
const count = Math.min(REQUESTED, fits)
if (count < REQUESTED) {
  console.log(`ulimit -n is ${nofile}: the gateway needs two sockets per stream, so ${count} streams instead of ${REQUESTED}`)
}

const backend = await startChildServer('bench/servers/backend.mjs', [], { BENCH_TOKENS: '4', BENCH_DELAY_MS: '600000' })
const gateway = await startChildServer('bench/servers/streams-gateway.mjs', [backend.url, String(count)])
const pool = new Pool(gateway.url, { connections: count, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 })
let result
try {
  // Warm-up: a few hundred streams opened and closed, so the baseline is a gateway that has served.
  const warm = await openStreams(pool, Math.min(500, count))
  await closeStreams(gateway.url, warm.streams)
  await sleep(2000)
  const baseline = { gateway: await gateway.rssBytes(), backend: await backend.rssBytes(), heap: await heapUsed(gateway.url) }

  const opened = await openStreams(pool, count)
  await sleep(2000)
  const held = { gateway: await gateway.rssBytes(), backend: await backend.rssBytes(), heap: await heapUsed(gateway.url) }
  const inflightHeld = sumOf(await scrapeMetrics(gateway.url), 'sluice_inflight_requests')
  const closed = await closeStreams(gateway.url, opened.streams)
  await sleep(1000)
  const after = { gateway: await gateway.rssBytes(), backend: await backend.rssBytes(), heap: await heapUsed(gateway.url) }

  const perStream = (name) => (held[name] - baseline[name]) / opened.streams.length
  result = {
    date: new Date().toISOString(),
    command: `BENCH_STREAMS=${REQUESTED} node bench/streams.mjs`,
    machine: machine({ nofile }),
    requested: REQUESTED,
    streams: count,
    opened: opened.streams.length,
    failures: opened.failures.length,
    first_failure: opened.failures[0] ?? null,
    open_all_seconds: opened.seconds,
    gateway: {
      rss_baseline_mib: baseline.gateway / MIB,
      rss_held_mib: held.gateway / MIB,
      rss_after_close_mib: after.gateway / MIB,
      rss_per_stream_kib: perStream('gateway') / 1024,
      heap_used_baseline_mib: baseline.heap / MIB,
      heap_used_held_mib: held.heap / MIB,
      heap_used_after_close_mib: after.heap / MIB,
      heap_per_stream_kib: perStream('heap') / 1024,
      inflight_while_held: inflightHeld,
      inflight_after_close: closed.inflight,
      close_all_seconds: closed.seconds,
    },
    backend: {
      rss_baseline_mib: baseline.backend / MIB,
      rss_held_mib: held.backend / MIB,
      rss_per_stream_kib: perStream('backend') / 1024,
    },
  }
} finally {
  await pool.destroy()
  await Promise.all([gateway.stop(), backend.stop()])
}

await mkdir('bench/results', { recursive: true })
const file = 'bench/results/streams.json'
const runs = await readFile(file, 'utf8').then(JSON.parse, () => ({}))
runs[String(REQUESTED)] = result
await writeFile(file, `${JSON.stringify(runs, null, 2)}\n`)

const fmt = (n, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a')
const g = result.gateway
console.log(`\nSluice idle streams — ${result.date}, ${result.machine.cores} cores, Node ${result.machine.node}, ulimit -n ${nofile}`)
console.log(`  ${result.opened} of ${count} streams open (${result.failures} failed) in ${fmt(result.open_all_seconds, 2)} s; in-flight gauge ${g.inflight_while_held}`)
console.log(`  gateway RSS ${fmt(g.rss_baseline_mib)} MiB idle -> ${fmt(g.rss_held_mib)} MiB held (${fmt(g.rss_per_stream_kib, 2)} KiB per stream) -> ${fmt(g.rss_after_close_mib)} MiB after close`)
console.log(`  gateway V8 heap used ${fmt(g.heap_used_baseline_mib)} -> ${fmt(g.heap_used_held_mib)} MiB (${fmt(g.heap_per_stream_kib, 2)} KiB per stream) -> ${fmt(g.heap_used_after_close_mib)} MiB after close`)
console.log(`  backend RSS ${fmt(result.backend.rss_baseline_mib)} MiB -> ${fmt(result.backend.rss_held_mib)} MiB (${fmt(result.backend.rss_per_stream_kib, 2)} KiB per stream)`)
console.log(`  closed in ${fmt(g.close_all_seconds, 2)} s; in-flight gauge after close: ${g.inflight_after_close}`)
if (result.failures > 0) console.log(`  first failure: ${result.first_failure}`)
const ok = result.failures === 0 && g.inflight_while_held === result.opened && g.inflight_after_close === 0
if (!ok) process.exitCode = 1
