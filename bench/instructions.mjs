// Instructions per request, the gateway against the floor (bench/servers/
// bare-proxy.mjs), counted by valgrind's callgrind: a count, not a time, so
// it barely depends on what else the host is doing (the main thread's count
// spread by 1.4 % over 4 runs here, where req/s moves 20 %; one function's
// own count repeats more closely than that).
// Both targets are warmed first and counted over the same requests; the
// report splits the main thread's instructions by where they run (our code,
// fastify, undici, Node, V8) and lists the functions that differ most.
//   npm run bench -- instructions        (~2 minutes; needs valgrind)
//   npm run bench -- instructions-streams  the same per stream: 16 tokens, 5 ms apart, as (c) sends them
import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { callgrindAvailable, startUnderCallgrind } from './lib/callgrind.mjs'
import { perfMapNames, readCallgrindProfile } from './lib/callgrind-profile.mjs'
import { startChildServer } from './lib/child-server.mjs'
import { BENCH_HEADERS, CHAT_BODY, GATEWAY_AND_FLOOR, STREAM_BODY } from './lib/load.mjs'
import { machine, writeResult } from './lib/results.mjs'

// BENCH_INSTRUCTIONS_STREAMS=1 counts streams as (c) sends them (16 tokens, 5 ms apart) in place of
// small JSON answers: the per-event relay work runs for each of a stream's ~19 events. More connections
// keep the target busy through the backend's pauses, and fewer streams than requests keep the run short.
const STREAMS = process.env.BENCH_INSTRUCTIONS_STREAMS === '1'
const CONNECTIONS = STREAMS ? 32 : 8
const BODY = STREAMS ? STREAM_BODY : CHAT_BODY
const BACKEND_ENV = STREAMS ? { BENCH_TOKENS: '16', BENCH_DELAY_MS: '5' } : {}
const UNIT = STREAMS ? 'stream' : 'request'
const RESULT_FILE = STREAMS ? 'instructions-streams.json' : 'instructions.json'
/** BENCH_KEEP_CALLGRIND=1 keeps the raw profiles and copies of the perf maps, for callgrind_annotate or a closer look. */
const KEEP_PROFILES = process.env.BENCH_KEEP_CALLGRIND === '1'

// Under valgrind a target serves ~300-800 req/s: 20,000 requests get the
// hot path compiled (the main thread's count repeated within 0.2 % over three
// runs of a trial script with this warm-up), and 2,000 counted ones average
// out per-request noise.
const WARM_UP_REQUESTS = Number(process.env.BENCH_WARM_UP_REQUESTS ?? (STREAMS ? 6000 : 20000))
const MEASURED_REQUESTS = Number(process.env.BENCH_MEASURED_REQUESTS ?? (STREAMS ? 1000 : 2000))
const TOP_FUNCTIONS = 20
const LABEL_WIDTH = 64
// V8 defines the properties of an object literal with computed keys (the
// one Node's process.nextTick builds per call) in C++ once that site's
// feedback went megamorphic. Under valgrind the gateway's site does, ~24
// calls per request; natively it does not (a gdb breakpoint counted 24 calls
// in 2,000 warm requests), so the report also gives the count without them.
const SLOW_LITERALS = 'object literals with computed keys, slow path'
/** Whole calls (the function and all it called), per request. */
const NAMED_COSTS = {
  'JSON.parse': /^v8::internal::Builtin_JsonParse\(/,
  'JSON.stringify': /^Builtins_JsonStringify$/,
  'garbage collection on the main thread': /^v8::internal::Heap::CollectGarbage\(/,
  [SLOW_LITERALS]: /^v8::internal::Runtime_DefineKeyedOwnPropertyInLiteral\(/,
}

/** Where a function's own instructions belong. */
function kindOf(name) {
  if (name.startsWith('JS:')) {
    if (name.includes('/dist/')) return 'sluice (JS)'
    const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(name)
    if (dependency) return `${dependency[1]} (JS)`
    if (name.includes(' node:')) return 'node core (JS)'
    return 'other JS (regular expressions, wasm glue)'
  }
  if (name.startsWith('Builtins_')) return 'V8 builtins (property access, calls, allocation)'
  if (name.startsWith('v8::internal::Json')) return 'V8 JSON parser and serializer'
  if (name.startsWith('v8::') || name.startsWith('cppgc::')) return 'V8 runtime (C++)'
  if (name.startsWith('node::') || name.startsWith('llhttp') || name.startsWith('uv_')) return 'node and libuv (C++)'
  if (/^0x[0-9a-f]+/.test(name)) return 'unnamed code'
  return 'libc and other'
}

async function countTarget(name, [script, ...args], backendUrl, outDir) {
  const target = await startUnderCallgrind(script, [backendUrl, ...args], outDir)
  try {
    await send(target.url, WARM_UP_REQUESTS, `${name} warm-up`)
    await target.startCounting()
    await send(target.url, MEASURED_REQUESTS, `${name} counted`)
    const files = await target.dump()
    const names = await perfMapNames(target.perfMapPath)
    if (KEEP_PROFILES) await copyFile(target.perfMapPath, join(outDir, `${name}-${target.pid}.perf.map`))
    const threads = await Promise.all(files.map((file) => readCallgrindProfile(file, names)))
    return summarize(threads.sort((a, b) => a.thread - b.thread))
  } finally {
    await target.stop()
  }
}

async function send(url, amount, what) {
  const result = await autocannon({
    url: `${url}/v1/chat/completions`,
    method: 'POST',
    connections: CONNECTIONS,
    amount,
    headers: BENCH_HEADERS,
    body: BODY,
  })
  const failed = result.non2xx + result.errors + result.timeouts
  if (result.requests.total < amount || failed > 0) throw new Error(`${what}: ${result.requests.total} of ${amount} requests answered, ${failed} failed`)
}

function summarize([main, ...helpers]) {
  const perRequest = (instructions) => Math.round(instructions / MEASURED_REQUESTS)
  const byKind = {}
  for (const [fn, instructions] of main.self) byKind[kindOf(fn)] = (byKind[kindOf(fn)] ?? 0) + instructions
  const named = {}
  for (const [label, pattern] of Object.entries(NAMED_COSTS)) {
    const matching = [...main.inclusive].filter(([fn]) => pattern.test(fn)).map(([, cost]) => cost)
    named[label] = { calls_per_1000_requests: Math.round((sum(matching.map((c) => c.calls)) * 1000) / MEASURED_REQUESTS), instructions_per_request: perRequest(sum(matching.map((c) => c.instructions))) }
  }
  return {
    main_thread_per_request: perRequest(main.total),
    main_thread_without_slow_literals_per_request: perRequest(main.total) - named[SLOW_LITERALS].instructions_per_request,
    all_threads_per_request: perRequest(main.total + sum(helpers.map((t) => t.total))),
    by_kind: Object.fromEntries(Object.entries(byKind).map(([kind, n]) => [kind, perRequest(n)]).sort((a, b) => b[1] - a[1])),
    named,
    self: new Map([...main.self].map(([fn, n]) => [fn, n / MEASURED_REQUESTS])),
  }
}

const sum = (values) => values.reduce((a, b) => a + b, 0)
const thousands = (n) => Math.round(n).toLocaleString('en-US')
const signed = (n) => `${n >= 0 ? '+' : '−'}${thousands(Math.abs(n))}`

/** Functions whose own instructions per request differ most, gateway minus floor (JIT tiers merged: "*f" and "^f" are f). */
function topDifferences(gateway, floor) {
  const merge = (self) => {
    const merged = new Map()
    for (const [fn, n] of self) {
      const key = /^0x[0-9a-f]+/.test(fn) ? 'unnamed code' : fn.replace(/^JS:[*^~+]?/, 'JS:').replace(/'\d+$/, '')
      merged.set(key, (merged.get(key) ?? 0) + n)
    }
    return merged
  }
  const g = merge(gateway.self)
  const f = merge(floor.self)
  return [...new Set([...g.keys(), ...f.keys()])]
    .map((fn) => ({ function: fn.length > 140 ? `${fn.slice(0, 140)}…` : fn, gateway: Math.round(g.get(fn) ?? 0), node_floor: Math.round(f.get(fn) ?? 0) }))
    .map((row) => ({ ...row, difference: row.gateway - row.node_floor }))
    .sort((a, b) => b.difference - a.difference)
    .slice(0, TOP_FUNCTIONS)
}

function report(counts, top) {
  const { gateway, node_floor: floor } = counts
  console.log(`\nInstructions per ${UNIT} (callgrind), ${thousands(MEASURED_REQUESTS)} ${UNIT}s counted after ${thousands(WARM_UP_REQUESTS)} of warm-up, ${CONNECTIONS} connections`)
  console.log(`${''.padEnd(LABEL_WIDTH)}${'gateway'.padStart(10)}${'floor'.padStart(10)}${'difference'.padStart(12)}`)
  const row = (label, g, f) => console.log(`${label.padEnd(LABEL_WIDTH)}${thousands(g).padStart(10)}${thousands(f).padStart(10)}${signed(g - f).padStart(12)}`)
  row('main thread', gateway.main_thread_per_request, floor.main_thread_per_request)
  row('main thread without the slow literal path', gateway.main_thread_without_slow_literals_per_request, floor.main_thread_without_slow_literals_per_request)
  row('all threads (with V8 compiler and GC helpers)', gateway.all_threads_per_request, floor.all_threads_per_request)
  const ratio = (key) => (gateway[key] / floor[key]).toFixed(2)
  console.log(`gateway / floor, main thread: ${ratio('main_thread_per_request')}×; without the slow literal path: ${ratio('main_thread_without_slow_literals_per_request')}×`)
  console.log('\nMain thread by where the instructions run (own instructions of each function):')
  for (const kind of new Set([...Object.keys(gateway.by_kind), ...Object.keys(floor.by_kind)])) row(`  ${kind}`, gateway.by_kind[kind] ?? 0, floor.by_kind[kind] ?? 0)
  console.log('\nWhole calls (with everything they called); calls per 1,000 requests in brackets:')
  for (const label of Object.keys(NAMED_COSTS)) {
    const g = gateway.named[label]
    const f = floor.named[label]
    row(`  ${label} (${thousands(g.calls_per_1000_requests)} / ${thousands(f.calls_per_1000_requests)})`, g.instructions_per_request, f.instructions_per_request)
  }
  console.log(`\nTop ${TOP_FUNCTIONS} functions by own instructions per ${UNIT}, gateway minus floor:`)
  for (const entry of top) console.log(`${signed(entry.difference).padStart(9)}  ${entry.function}`)
}

async function main() {
  if (!callgrindAvailable()) {
    console.error('valgrind is not installed: apt-get install valgrind (it brings callgrind_control)')
    process.exit(1)
  }
  const outDir = await mkdtemp(join(tmpdir(), 'sluice-callgrind-'))
  const backend = await startChildServer('bench/servers/backend.mjs', [], BACKEND_ENV)
  let counts
  try {
    // Counted side by side: valgrind runs each target on one core at a time, and a count does not depend on the other's load.
    // Settled, not raced: when one target failed, the process exited with the other's valgrind child still
    // running (a stray callgrind gateway outlived a failed run in session 26).
    const settled = await Promise.allSettled(Object.entries(GATEWAY_AND_FLOOR).map(async ([name, target]) => [name, await countTarget(name, target, backend.url, outDir)]))
    const failure = settled.find((result) => result.status === 'rejected')
    if (failure !== undefined) throw failure.reason
    counts = Object.fromEntries(settled.map((result) => result.value))
  } finally {
    await backend.stop()
    if (KEEP_PROFILES) console.log(`callgrind profiles kept in ${outDir}`)
    else await rm(outDir, { recursive: true, force: true })
  }
  const top = topDifferences(counts.gateway, counts.node_floor)
  report(counts, top)
  const withoutSelf = (c) => Object.fromEntries(Object.entries(c).filter(([key]) => key !== 'self'))
  const json = {
    date: new Date().toISOString(),
    command: `npm run bench -- ${STREAMS ? 'instructions-streams' : 'instructions'}`,
    unit: UNIT,
    machine: machine(),
    warm_up_requests: WARM_UP_REQUESTS,
    measured_requests: MEASURED_REQUESTS,
    connections: CONNECTIONS,
    targets: { gateway: withoutSelf(counts.gateway), node_floor: withoutSelf(counts.node_floor) },
    top_differences: top,
  }
  console.log(`\nwritten to ${await writeResult(RESULT_FILE, json)}`)
}

await main()
