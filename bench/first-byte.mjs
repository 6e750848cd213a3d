// Where (c)'s added first byte goes: the gateway and the floor (bench/servers/
// bare-proxy.mjs) take (c)'s streams (16 tokens 5 ms apart, 32 connections)
// in turns of 3 s, with a probe inside each (lib/first-byte-probe.mjs). A
// stream's first byte at the client is split into:
//   own       the target's work from its request's headers to the answer's
//             head, less the upstream exchange (auth, body, validation,
//             admission, dispatch; for the floor, reading the body);
//   upstream  undici's request created -> the upstream head read;
//   outside   the rest: the request reaching the target's loop, the first
//             bytes reaching the client (both wait for the target's loop and
//             for a CPU), and the client's own work.
// Medians over rounds. The probe's hooks cost a little in both targets, so
// the first-byte figures are not (c)'s; compare them within this run.
//   npm run bench -- first-byte        (~1.5 minutes)
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startChildServer } from './lib/child-server.mjs'
import { BENCH_HEADERS, CHAT_PATH, GATEWAY_AND_FLOOR, STREAM_BODY } from './lib/load.mjs'
import { streamLoop } from './lib/open-loop.mjs'
import { machine, writeResult } from './lib/results.mjs'
import { stepper } from './lib/signal-steps.mjs'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10)
const SECONDS = 3
const CONNECTIONS = 32
const WARM_UP_STREAMS = 6000

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? NaN
}

async function round(target) {
  await target.step()
  const load = await streamLoop({ url: target.url, path: CHAT_PATH, headers: BENCH_HEADERS, body: STREAM_BODY, connections: CONNECTIONS, seconds: SECONDS })
  const { responses, upstream } = JSON.parse(await target.step())
  const toHead = median(responses.map((r) => r.to_head_ms))
  const upstreamMs = median(upstream)
  return { streams: load.completed, first_byte_ms: load.ttfb_p50_ms, own_ms: toHead - upstreamMs, upstream_ms: upstreamMs, outside_ms: load.ttfb_p50_ms - median(responses.map((r) => r.to_first_write_ms)) }
}

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-first-byte-'))
  const backend = await startChildServer('bench/servers/backend.mjs', [], { BENCH_TOKENS: '16', BENCH_DELAY_MS: '5' })
  const targets = {}
  try {
    for (const [name, [script, ...args]] of Object.entries(GATEWAY_AND_FLOOR)) {
      const child = await startChildServer(script, [backend.url, ...args], { BENCH_PROBE_DIR: dir, BENCH_ROUNDS: String(ROUNDS) }, ['--import', './bench/lib/first-byte-probe.mjs'])
      targets[name] = Object.assign(child, { step: stepper(child.pid, dir) })
    }
    for (const target of Object.values(targets)) await streamLoop({ url: target.url, path: CHAT_PATH, headers: BENCH_HEADERS, body: STREAM_BODY, connections: 128, seconds: 30, streams: WARM_UP_STREAMS })
    const rounds = Object.fromEntries(Object.keys(targets).map((name) => [name, []]))
    // In turns, so a drift of the host's speed reaches both alike.
    for (let i = 0; i < ROUNDS; i++) for (const [name, target] of Object.entries(targets)) rounds[name].push(await round(target))
    await report(rounds)
  } finally {
    await Promise.all([...Object.values(targets).map((t) => t.stop()), backend.stop()])
    await rm(dir, { recursive: true, force: true })
  }
}

async function report(rounds) {
  const summary = Object.fromEntries(Object.entries(rounds).map(([name, rs]) => [name, Object.fromEntries(['first_byte_ms', 'own_ms', 'upstream_ms', 'outside_ms'].map((k) => [k, median(rs.map((r) => r[k]))]))]))
  const fmt = (n) => n.toFixed(3).padStart(8)
  console.log(`\nWhere a stream's first byte goes (medians of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, 16 tokens 5 ms apart), ms`)
  console.log(`${''.padEnd(12)}${'first byte'.padStart(11)}${'own'.padStart(9)}${'upstream'.padStart(9)}${'outside'.padStart(9)}`)
  for (const [name, s] of Object.entries(summary)) console.log(`${name.padEnd(12)}${fmt(s.first_byte_ms).padStart(11)}${fmt(s.own_ms)}${fmt(s.upstream_ms)}${fmt(s.outside_ms)}`)
  const d = (k) => summary.gateway[k] - summary.node_floor[k]
  console.log(`${'difference'.padEnd(12)}${fmt(d('first_byte_ms')).padStart(11)}${fmt(d('own_ms'))}${fmt(d('upstream_ms'))}${fmt(d('outside_ms'))}`)
  const path = await writeResult('first-byte.json', { date: new Date().toISOString(), command: 'npm run bench -- first-byte', machine: machine(), rounds: ROUNDS, seconds: SECONDS, connections: CONNECTIONS, summary, runs: rounds })
  console.log(`\nwritten to ${path}`)
}

await main()
