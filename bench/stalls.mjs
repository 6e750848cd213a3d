// What (b)'s tail is made of: the gateway and the floor (bench/servers/
// bare-proxy.mjs) each take 500 req/s open loop for 10 s, as in (b), with a
// probe inside (lib/stall-probe.mjs) that records every stall of the main
// thread longer than 3 ms and splits it, from the kernel's scheduler
// statistics, into time running (our code, V8, GC), time runnable but
// waiting for a CPU (the 2 cores are shared with the load generator and the
// backend), and the rest (the VM's vCPU not running, timer slack). Targets
// alternate over ROUNDS rounds. The probe's 1 ms timer adds ~1,000 wake-ups
// a second to each target, so latencies here are not (b)'s figures; compare
// them within this run only.
//   npm run bench -- stalls        (~2.5 minutes)
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { startChildServer } from './lib/child-server.mjs'
import { BENCH_HEADERS, CHAT_BODY, CHAT_PATH, GATEWAY_AND_FLOOR } from './lib/load.mjs'
import { openLoop } from './lib/open-loop.mjs'
import { stepper } from './lib/signal-steps.mjs'
import { machine, writeResult } from './lib/results.mjs'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const WARM_UP_REQUESTS = 20000
const RATE = 500
const SECONDS = 10
const SLOW_MS = 3

async function measure([script, ...args], backendUrl, dir) {
  const target = await startChildServer(script, [backendUrl, ...args], { BENCH_PROBE_DIR: dir }, ['--import', './bench/lib/stall-probe.mjs'])
  const step = stepper(target.pid, dir)
  try {
    await autocannon({ url: `${target.url}${CHAT_PATH}`, method: 'POST', connections: 8, amount: WARM_UP_REQUESTS, headers: BENCH_HEADERS, body: CHAT_BODY })
    await step()
    const load = await openLoop({ url: target.url, path: CHAT_PATH, headers: BENCH_HEADERS, body: CHAT_BODY, rate: RATE, seconds: SECONDS, leadInSeconds: 0.2 })
    const stalls = JSON.parse(await step())
    return { ...summarizeLoad(load), ...summarizeStalls(stalls) }
  } finally {
    await target.stop()
  }
}

function summarizeLoad({ sent, completed, errors, non2xx, p50_ms, p99_ms, latencies_ms }) {
  if (completed !== sent || non2xx > 0) throw new Error(`${completed} of ${sent} answered, ${errors} errors, ${non2xx} non-2xx`)
  return { p50_ms, p99_ms, requests_over_3_ms: latencies_ms.filter((ms) => ms > SLOW_MS).length }
}

/** Stalls and their time split three ways, in ms over the 10 s. */
function summarizeStalls(stalls) {
  const total = (key) => stalls.reduce((sum, stall) => sum + stall[key], 0)
  const gap = total('gap_ms')
  const running = total('running_ms')
  const queued = total('queued_ms')
  return { stalls: stalls.length, longest_ms: Math.max(0, ...stalls.map((s) => s.gap_ms)), stalled_ms: gap, running_ms: running, queued_ms: queued, other_ms: gap - running - queued }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const fixed = (n) => n.toFixed(1)

function report(rounds) {
  console.log(`\nStalls of the main thread > 3 ms at ${RATE} req/s open loop, ${SECONDS} s per target, ${ROUNDS} rounds (ms over the ${SECONDS} s)`)
  for (const [index, round] of rounds.entries()) {
    for (const [name, r] of Object.entries(round)) {
      console.log(
        `  round ${index + 1} ${name.padEnd(10)} p50 ${r.p50_ms.toFixed(2)} ms  p99 ${r.p99_ms.toFixed(2)} ms  requests > 3 ms ${String(r.requests_over_3_ms).padStart(4)}  |  stalls ${String(r.stalls).padStart(3)}, ${fixed(r.stalled_ms).padStart(6)} ms: running ${fixed(r.running_ms).padStart(5)}, waiting for a CPU ${fixed(r.queued_ms).padStart(5)}, neither ${fixed(r.other_ms).padStart(5)}; longest ${fixed(r.longest_ms)}`,
      )
    }
  }
  const names = Object.keys(rounds[0])
  console.log('\nMedians of the rounds:')
  for (const name of names) {
    const m = (key) => median(rounds.map((round) => round[name][key]))
    console.log(`  ${name.padEnd(10)} p99 ${m('p99_ms').toFixed(2)} ms; stalled ${fixed(m('stalled_ms'))} ms: running ${fixed(m('running_ms'))}, waiting for a CPU ${fixed(m('queued_ms'))}, neither ${fixed(m('other_ms'))}`)
  }
}

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-stalls-'))
  const backend = await startChildServer('bench/servers/backend.mjs', [])
  const rounds = []
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const round = {}
      for (const [name, target] of Object.entries(GATEWAY_AND_FLOOR)) round[name] = await measure(target, backend.url, dir)
      rounds.push(round)
    }
  } finally {
    await backend.stop()
    await rm(dir, { recursive: true, force: true })
  }
  report(rounds)
  const json = {
    date: new Date().toISOString(),
    command: 'npm run bench -- stalls',
    machine: machine(),
    rate_per_second: RATE,
    seconds: SECONDS,
    stall_ms: 3,
    rounds,
  }
  console.log(`\nwritten to ${await writeResult('stalls.json', json)}`)
}

await main()
