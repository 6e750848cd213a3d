// Bytes allocated per request, the gateway against the floor (bench/servers/
// bare-proxy.mjs), from V8's sampling heap profiler with collected objects
// kept, and the GCs at (b)'s rate: how much each target allocates, where the
// gateway's extra comes from, and what it costs in scavenges, as the
// instructions bench does for CPU. Natively, not under valgrind.
//   npm run bench -- allocations        (~1 minute)
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { startChildServer } from './lib/child-server.mjs'
import { allocationSites } from './lib/heap-profile.mjs'
import { BENCH_HEADERS, CHAT_BODY, CHAT_PATH, GATEWAY_AND_FLOOR } from './lib/load.mjs'
import { openLoop } from './lib/open-loop.mjs'
import { stepper } from './lib/signal-steps.mjs'
import { machine, writeResult } from './lib/results.mjs'

// The hot path is compiled well before 20,000 requests at full speed (the
// instructions bench warms the same way). The sampled requests go at (b)'s
// rate, 500 req/s open loop, so the GC counts are those of (b)'s load: at
// full speed V8 sizes the young generation differently. 5,000 of them at one
// sample per 512 bytes give ~300,000 samples for the gateway.
const WARM_UP_REQUESTS = Number(process.env.BENCH_WARM_UP_REQUESTS ?? 20000)
const MEASURED_REQUESTS = Number(process.env.BENCH_MEASURED_REQUESTS ?? 5000)
const RATE = 500
const CONNECTIONS = 8
const TOP_SITES = 20

/** Whose code a site is, from its path (lib/heap-profile.mjs: "function path:line"). */
function ownerOf(site) {
  if (site.endsWith('(V8 or native)')) return 'V8 and native (JSON.parse, Buffer, Map, …)'
  const path = site.slice(site.lastIndexOf(' ') + 1)
  if (path.startsWith('dist/')) return 'sluice'
  if (path.startsWith('node:')) return 'node core'
  if (path.startsWith('bench/')) return 'the floor itself'
  return /^((?:@[^/]+\/)?[^/]+)\//.exec(path)?.[1] ?? 'other'
}

async function measureTarget(name, [script, ...args], backendUrl, dir) {
  const target = await startChildServer(script, [backendUrl, ...args], { BENCH_PROBE_DIR: dir }, ['--import', './bench/lib/heap-sampling-probe.mjs'])
  // The probe's steps (lib/heap-sampling-probe.mjs): count GCs, stop, sample allocations, stop.
  const step = stepper(target.pid, dir)
  try {
    await send(target.url, WARM_UP_REQUESTS, `${name} warm-up`)
    await step()
    await sendAtRate(target.url, `${name} GCs counted`)
    const gcs = JSON.parse(await step())
    await step()
    await sendAtRate(target.url, `${name} allocations sampled`)
    const profile = JSON.parse(await step())
    return { ...allocationSites(profile), gcs }
  } finally {
    await target.stop()
  }
}

async function send(url, amount, what) {
  const result = await autocannon({ url: `${url}${CHAT_PATH}`, method: 'POST', connections: CONNECTIONS, amount, headers: BENCH_HEADERS, body: CHAT_BODY })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${what}: ${result.non2xx} non-2xx answers, ${result.errors} errors`)
}

async function sendAtRate(url, what) {
  const result = await openLoop({ url, path: CHAT_PATH, headers: BENCH_HEADERS, body: CHAT_BODY, rate: RATE, seconds: MEASURED_REQUESTS / RATE })
  if (result.completed !== MEASURED_REQUESTS || result.non2xx > 0) throw new Error(`${what}: ${result.completed} of ${MEASURED_REQUESTS} answered, ${result.non2xx} non-2xx`)
}

function summarize({ total, bySite, gcs }) {
  const perRequest = (bytes) => Math.round(bytes / MEASURED_REQUESTS)
  const byOwner = {}
  for (const [site, bytes] of bySite) byOwner[ownerOf(site)] = (byOwner[ownerOf(site)] ?? 0) + bytes
  const per1000 = (n) => Math.round((n * 1000 * 10) / MEASURED_REQUESTS) / 10
  return {
    bytes_per_request: perRequest(total),
    by_owner: Object.fromEntries(Object.entries(byOwner).map(([owner, bytes]) => [owner, perRequest(bytes)]).sort((a, b) => b[1] - a[1])),
    gcs_per_1000_requests: { scavenges: per1000(gcs.scavenges), mark_compacts: per1000(gcs.mark_compacts), other: per1000(gcs.other), pause_ms: per1000(gcs.pause_ms) },
    sites: new Map([...bySite].map(([site, bytes]) => [site, bytes / MEASURED_REQUESTS])),
  }
}

/** Sites whose bytes per request differ most, gateway minus floor. */
function topDifferences(gateway, floor) {
  return [...new Set([...gateway.sites.keys(), ...floor.sites.keys()])]
    .map((site) => ({ site, gateway: Math.round(gateway.sites.get(site) ?? 0), node_floor: Math.round(floor.sites.get(site) ?? 0) }))
    .map((row) => ({ ...row, difference: row.gateway - row.node_floor }))
    .sort((a, b) => b.difference - a.difference)
    .slice(0, TOP_SITES)
}

const thousands = (n) => Math.round(n).toLocaleString('en-US')
const signed = (n) => `${n >= 0 ? '+' : '−'}${thousands(Math.abs(n))}`

function report(results, top) {
  const { gateway, node_floor: floor } = results
  const row = (label, g, f) => console.log(`${label.padEnd(56)}${thousands(g).padStart(10)}${thousands(f).padStart(10)}${signed(g - f).padStart(12)}`)
  console.log(`\nBytes allocated per request (sampling heap profiler), ${thousands(MEASURED_REQUESTS)} requests at ${RATE} req/s after ${thousands(WARM_UP_REQUESTS)} of warm-up at ${CONNECTIONS} connections`)
  console.log(`${''.padEnd(56)}${'gateway'.padStart(10)}${'floor'.padStart(10)}${'difference'.padStart(12)}`)
  row('all of it', gateway.bytes_per_request, floor.bytes_per_request)
  console.log(`gateway / floor: ${(gateway.bytes_per_request / floor.bytes_per_request).toFixed(2)}×`)
  console.log('\nBy whose code allocated:')
  for (const owner of new Set([...Object.keys(gateway.by_owner), ...Object.keys(floor.by_owner)])) row(`  ${owner}`, gateway.by_owner[owner] ?? 0, floor.by_owner[owner] ?? 0)
  console.log(`\nGCs per 1,000 requests at ${RATE} req/s, profiler off (pause: ms of GC per 1,000 requests):`)
  for (const [what, g] of Object.entries(gateway.gcs_per_1000_requests)) console.log(`  ${what.padEnd(54)}${String(g).padStart(10)}${String(floor.gcs_per_1000_requests[what]).padStart(10)}`)
  console.log(`\nTop ${TOP_SITES} sites by bytes per request, gateway minus floor:`)
  for (const entry of top) console.log(`${signed(entry.difference).padStart(8)}  ${entry.site}`)
}

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-heap-'))
  const backend = await startChildServer('bench/servers/backend.mjs', [])
  const results = {}
  try {
    // One after the other: the sampled count does not depend on the host's speed, and two loads at once would slow both.
    for (const [name, target] of Object.entries(GATEWAY_AND_FLOOR)) results[name] = summarize(await measureTarget(name, target, backend.url, dir))
  } finally {
    await backend.stop()
    await rm(dir, { recursive: true, force: true })
  }
  const top = topDifferences(results.gateway, results.node_floor)
  report(results, top)
  const withoutSites = ({ sites: _sites, ...rest }) => rest
  const json = {
    date: new Date().toISOString(),
    command: 'npm run bench -- allocations',
    machine: machine(),
    warm_up_requests: WARM_UP_REQUESTS,
    measured_requests: MEASURED_REQUESTS,
    warm_up_connections: CONNECTIONS,
    measured_rate_per_second: RATE,
    targets: { gateway: withoutSites(results.gateway), node_floor: withoutSites(results.node_floor) },
    top_differences: top,
  }
  console.log(`\nwritten to ${await writeResult('allocations.json', json)}`)
}

await main()
