// Redis admission benchmark (issue: shared state on Redis): the gateway with
// `state.kind: redis` against the same gateway in memory mode, same run, one
// replica and two replicas sharing one Redis, key limits on and off. Runs
// alternate (every variant once per round) so drift on a shared machine hits
// all alike. Admission is never contended (slots and limits far above the
// load), so this is the cost of the Redis round trips themselves.
//
// Round trips per request: every Redis command a loaded gateway sends, by
// script (servers/redis-gateway.mjs counts them), over the requests sent in
// the window; and, from the server's side, `INFO commandstats` deltas.
import { mkdtemp, readFile, rm, unlink } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { Redis } from 'ioredis'
import { startChildServer } from './lib/child-server.mjs'
import { CHAT_BODY } from './lib/load.mjs'
import { startRedisServer } from './lib/redis-server.mjs'
import { machine, writeResult } from './lib/results.mjs'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = 2
const CONNECTIONS = 64
const SETTLE_MS = 500
const GATEWAY = 'bench/servers/redis-gateway.mjs'

const ADMISSION = ['sluiceSlotAcquire', 'sluiceSlotClaim', 'sluiceKeyAdmit']
const RELEASE = ['sluiceSlotRelease', 'zrem']
const CHARGE = ['sluiceKeyDebit']

/** name → [limits, redis key prefix | null (memory), replicas] */
const VARIANTS = {
  'memory, limits': ['limits', null, 1],
  'redis x1, limits': ['limits', 'bench-r1:', 1],
  'redis x2, limits': ['limits', 'bench-r2:', 2],
  'memory, no limits': ['no-limits', null, 1],
  'redis x1, no limits': ['no-limits', 'bench-r1nl:', 1],
}
/** Each Redis variant compared with the memory variant with the same limits. */
const BASELINE = { 'redis x1, limits': 'memory, limits', 'redis x2, limits': 'memory, limits', 'redis x1, no limits': 'memory, no limits' }

const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-bench-redis-'))
const started = Date.now()
const loadBefore = os.loadavg()

const redis = await startRedisServer()
const info = new Redis(redis.url, { connectionName: 'bench-info' })
const backend = await startChildServer('bench/servers/backend.mjs')
const gateways = {}
let serial = 0
const runs = Object.fromEntries(Object.keys(VARIANTS).map((name) => [name, []]))
try {
  for (const [name, [limits, prefix, replicas]] of Object.entries(VARIANTS)) {
    gateways[name] = []
    for (let i = 0; i < replicas; i++) {
      const countsFile = path.join(tmp, `counts-${serial++}.json`)
      const args = prefix === null ? [backend.url, limits] : [backend.url, limits, redis.url, `${prefix}${process.pid}:`]
      const server = await startChildServer(GATEWAY, args, { BENCH_COUNTS_FILE: countsFile })
      gateways[name].push({ ...server, countsFile })
    }
  }
  // Warm-up: JIT, connection pools, scripts loaded on every connection.
  for (const name of Object.keys(VARIANTS)) await loadAll(gateways[name], 1)
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of Object.keys(VARIANTS)) runs[name].push(await measured(gateways[name]))
  }
} finally {
  await Promise.all([...Object.values(gateways).flat(), backend].map((s) => s.stop()))
  info.disconnect()
  await redis.stop()
  await rm(tmp, { recursive: true, force: true })
}

/** Loads the replicas together, CONNECTIONS split between them. */
async function loadAll(servers, seconds) {
  const connections = CONNECTIONS / servers.length
  return Promise.all(servers.map((s) => load(s.url, connections, seconds)))
}

/** Like lib/load.mjs, plus `sent`: requests still in flight when the run ends were admitted too. */
async function load(url, connections, seconds) {
  const result = await autocannon({
    url: `${url}/v1/chat/completions`,
    method: 'POST',
    connections,
    duration: seconds,
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench-token' },
    body: CHAT_BODY,
  })
  const { requests, latency } = result
  return { requests: requests.total, sent: requests.sent, rps: requests.average, p50_ms: latency.p50, p99_ms: latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts }
}

async function measured(servers) {
  const before = { server: await commandStats(), clients: await Promise.all(servers.map(clientCounts)), cpu: await redis.cpuSeconds() }
  const loads = await loadAll(servers, SECONDS)
  // Requests cut off at the end of the run finish (or abort) and release.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  const after = { server: await commandStats(), clients: await Promise.all(servers.map(clientCounts)), cpu: await redis.cpuSeconds() }
  const client = {}
  servers.forEach((_, i) => addDelta(client, after.clients[i], before.clients[i]))
  const server = addDelta({}, after.server, before.server)
  delete server.info // the benchmark's own INFO calls
  return {
    requests: sum(loads.map((l) => l.requests)),
    sent: sum(loads.map((l) => l.sent)),
    rps: sum(loads.map((l) => l.rps)),
    // Two replicas: p50 averaged, p99 the worse one.
    p50_ms: sum(loads.map((l) => l.p50_ms)) / loads.length,
    p99_ms: Math.max(...loads.map((l) => l.p99_ms)),
    non2xx: sum(loads.map((l) => l.non2xx)),
    errors: sum(loads.map((l) => l.errors)),
    redis_cpu_seconds: after.cpu - before.cpu,
    client_commands: client,
    server_commands: server,
  }
}

/** The running totals of a gateway's Redis commands (see servers/redis-gateway.mjs). */
async function clientCounts(server) {
  await unlink(server.countsFile).catch(() => undefined)
  process.kill(server.pid, 'SIGUSR2')
  const deadline = Date.now() + 2000
  for (;;) {
    try {
      return JSON.parse(await readFile(server.countsFile, 'utf8'))
    } catch (error) {
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
}

/** Calls per command from `INFO commandstats`. */
async function commandStats() {
  const text = await info.info('commandstats')
  return Object.fromEntries([...text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1], Number(m[2])]))
}

function addDelta(into, after, before) {
  for (const [name, calls] of Object.entries(after)) {
    const delta = calls - (before[name] ?? 0)
    if (delta !== 0) into[name] = (into[name] ?? 0) + delta
  }
  return into
}

function sum(list) {
  return list.reduce((total, x) => total + x, 0)
}

function mean(list, key) {
  return sum(list.map((r) => r[key])) / list.length
}

function summarize(list) {
  const requests = sum(list.map((r) => r.requests))
  const sent = sum(list.map((r) => r.sent))
  const client = list.reduce((all, r) => addDelta(all, r.client_commands, {}), {})
  const server = list.reduce((all, r) => addDelta(all, r.server_commands, {}), {})
  const perRequest = (names) => sum(names.map((n) => client[n] ?? 0)) / sent
  const known = [...ADMISSION, ...RELEASE, ...CHARGE]
  const background = Object.keys(client).filter((n) => !known.includes(n))
  return {
    rps: mean(list, 'rps'),
    p50_ms: mean(list, 'p50_ms'),
    p99_ms: mean(list, 'p99_ms'),
    non2xx: sum(list.map((r) => r.non2xx)),
    errors: sum(list.map((r) => r.errors)),
    requests,
    sent,
    redis_cpu_percent: (100 * sum(list.map((r) => r.redis_cpu_seconds))) / (list.length * SECONDS),
    round_trips_per_request: {
      admission: perRequest(ADMISSION),
      release: perRequest(RELEASE),
      token_charge: perRequest(CHARGE),
      background: perRequest(background),
      total_sent: perRequest(Object.keys(client)),
      scripts_served: ((server.evalsha ?? 0) + (server.eval ?? 0)) / sent,
    },
    per_script_per_request: Object.fromEntries(Object.entries(client).map(([n, calls]) => [n, calls / sent])),
    server_commands_per_request: Object.fromEntries(Object.entries(server).map(([n, calls]) => [n, calls / sent])),
    runs: list,
  }
}

const variants = Object.fromEntries(Object.entries(runs).map(([name, list]) => [name, summarize(list)]))
for (const [name, base] of Object.entries(BASELINE)) variants[name].throughput_ratio_vs_memory = variants[name].rps / variants[base].rps

const result = {
  date: new Date().toISOString(),
  command: 'npm run bench:redis',
  machine: machine({ load_average_before: loadBefore, load_average_after: os.loadavg() }),
  seconds_per_run: SECONDS,
  rounds: ROUNDS,
  connections: CONNECTIONS,
  notes: [
    'Uncontended: 4096 slots, key limits far above the load. Two replicas: 32 connections each, loaded together; p50 averaged, p99 the worse.',
    'Round trips counted by the gateways (commands sent, EVALSHA named by script SHA) over requests sent (autocannon; those cut off at the end of a run were admitted too), counted after a 500 ms settle.',
    'scripts_served: EVALSHA + EVAL calls per request from INFO commandstats deltas on the server (a cross-check of the scripts sent). server_commands_per_request also counts the commands run inside scripts, so it is not round trips.',
    'admission = sluiceSlotAcquire + sluiceSlotClaim + sluiceKeyAdmit; release = sluiceSlotRelease + ZREM (key ticket); token_charge = sluiceKeyDebit (tokens_per_minute, after the answer).',
  ],
  variants,
  runtime_s: (Date.now() - started) / 1000,
}
await writeResult('redis-admission.json', result)

const pad = (text, width) => String(text).padEnd(width)
const fixed = (x, digits = 2) => (x === undefined ? '-' : x.toFixed(digits))
console.log(`Redis admission (${SECONDS}s x ${ROUNDS} rounds, ${CONNECTIONS} connections, load ${loadBefore.map((l) => l.toFixed(2)).join(' ')})`)
console.log(
  `${pad('variant', 22)}${pad('req/s', 8)}${pad('p50 ms', 8)}${pad('p99 ms', 8)}${pad('ratio', 7)}${pad('admit', 7)}${pad('release', 9)}${pad('charge', 8)}${pad('other', 7)}${pad('scripts', 8)}redis cpu`,
)
for (const [name, v] of Object.entries(variants)) {
  const rt = v.round_trips_per_request
  const redisMode = VARIANTS[name][1] !== null
  console.log(
    pad(name, 22) +
      pad(v.rps.toFixed(0), 8) +
      pad(fixed(v.p50_ms, 1), 8) +
      pad(fixed(v.p99_ms, 1), 8) +
      pad(fixed(v.throughput_ratio_vs_memory, 3), 7) +
      (redisMode
        ? pad(fixed(rt.admission), 7) + pad(fixed(rt.release), 9) + pad(fixed(rt.token_charge), 8) + pad(fixed(rt.background, 3), 7) + pad(fixed(rt.scripts_served), 8) + `${v.redis_cpu_percent.toFixed(0)}%`
        : '') +
      (v.non2xx + v.errors > 0 ? `  non-2xx ${v.non2xx}, errors ${v.errors}` : ''),
  )
}
console.log(`round trips per request (admit/release/charge/other: sent by the gateways; scripts: EVALSHA per request in INFO commandstats); runtime ${result.runtime_s.toFixed(0)} s`)
