// Admission benchmark (issue: priority-aware admission):
//  1. overhead: gateway throughput with admission enabled but never saturated
//     vs. the same gateway with a pass-through state, same run, in paired
//     rounds (A/B, then B/A, ...) so drift on a shared machine hits both
//     alike; the ratio is the median of the rounds' ratios (one round's
//     ratio moves by ±5 % here, more than admission costs);
//  2. queue scale: 10,000 requests queued on one model drain in priority
//     order; per-operation cost and the process's RSS.
import { setMaxListeners } from 'node:events'
import { MemoryModelSlots } from '../dist/state/memory-slots.js'
import { startChildServer } from './lib/child-server.mjs'
import { load } from './lib/load.mjs'
import { machine, writeResult } from './lib/results.mjs'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6)

async function overhead() {
  const backend = await startChildServer('bench/servers/backend.mjs')
  const variants = {}
  for (const variant of ['admission', 'no-admission']) {
    variants[variant] = await startChildServer('bench/servers/gateway.mjs', [backend.url, variant])
  }
  const runs = { admission: [], 'no-admission': [] }
  try {
    // Warm-up: JIT and connection pools.
    for (const server of Object.values(variants)) await load({ url: server.url, token: 'bench-token', seconds: 1 })
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? ['admission', 'no-admission'] : ['no-admission', 'admission']
      for (const variant of order) {
        runs[variant].push(await load({ url: variants[variant].url, token: 'bench-token', seconds: SECONDS }))
      }
    }
  } finally {
    await Promise.all([...Object.values(variants), backend].map((s) => s.stop()))
  }
  const mean = (list, key) => list.reduce((sum, r) => sum + r[key], 0) / list.length
  const summary = Object.fromEntries(
    Object.entries(runs).map(([variant, list]) => [variant, { rps: mean(list, 'rps'), p50_ms: mean(list, 'p50_ms'), p99_ms: mean(list, 'p99_ms'), non2xx: list.reduce((s, r) => s + r.non2xx, 0), runs: list }]),
  )
  const ratios = runs.admission.map((r, i) => r.rps / runs['no-admission'][i].rps).sort((a, b) => a - b)
  const median = ratios.length % 2 === 1 ? ratios[ratios.length >> 1] : (ratios[ratios.length / 2 - 1] + ratios[ratios.length / 2]) / 2
  return { ...summary, round_ratios: ratios, throughput_ratio: median }
}

function lcg(seed) {
  let state = seed >>> 0
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32
}

async function queueScale(count = 10_000) {
  const observer = { queueDepth() {}, slotTaken() {}, slotReleased() {}, waited() {} }
  const slots = new MemoryModelSlots(
    { model: 'scale', backends: ['b'], slotsPerBackend: 1, maxQueue: count, maxWaitMs: 600_000, usable: () => true },
    { now: () => Date.now() },
    observer,
  )
  const random = lcg(42)
  const signal = new AbortController().signal
  // Every waiter listens on this one signal; that is intended here.
  setMaxListeners(0, signal)
  const choose = (names) => names[0]
  global.gc?.()
  const rssBefore = process.memoryUsage().rss
  const first = await slots.acquire({ priority: 0, signal, choose })
  const granted = []
  const enqueueStart = process.hrtime.bigint()
  const waiting = []
  for (let i = 0; i < count; i++) {
    const priority = Math.floor(random() * 21) - 10
    waiting.push(slots.acquire({ priority, signal, choose }).then((lease) => granted.push({ priority, seq: i, lease })))
  }
  const enqueueNs = Number(process.hrtime.bigint() - enqueueStart)
  const rssQueued = process.memoryUsage().rss
  const drainStart = process.hrtime.bigint()
  first.release()
  for (let i = 0; i < count; i++) {
    while (granted.length <= i) await Promise.resolve()
    granted[i].lease.release()
  }
  await Promise.all(waiting)
  const drainNs = Number(process.hrtime.bigint() - drainStart)
  const inOrder = granted.every((g, i) => i === 0 || granted[i - 1].priority < g.priority || (granted[i - 1].priority === g.priority && granted[i - 1].seq < g.seq))
  return {
    queued: count,
    drained_in_priority_order: inOrder,
    enqueue_us_per_op: enqueueNs / count / 1000,
    grant_us_per_op: drainNs / count / 1000,
    rss_before_mb: rssBefore / 2 ** 20,
    rss_with_queue_mb: rssQueued / 2 ** 20,
  }
}

const result = {
  date: new Date().toISOString(),
  command: 'npm run bench:admission',
  machine: machine(),
  seconds_per_run: SECONDS,
  overhead: await overhead(),
  queue_scale: await queueScale(),
}
await writeResult('admission.json', result)
const o = result.overhead
console.log(`admission overhead (${SECONDS}s x ${ROUNDS} rounds, 64 connections):`)
console.log(`  with admission     ${o.admission.rps.toFixed(0)} req/s  p50 ${o.admission.p50_ms.toFixed(1)} ms  p99 ${o.admission.p99_ms.toFixed(1)} ms  non-2xx ${o.admission.non2xx}`)
console.log(`  without admission  ${o['no-admission'].rps.toFixed(0)} req/s  p50 ${o['no-admission'].p50_ms.toFixed(1)} ms  p99 ${o['no-admission'].p99_ms.toFixed(1)} ms  non-2xx ${o['no-admission'].non2xx}`)
console.log(`  throughput ratio   ${o.throughput_ratio.toFixed(3)} (median of the rounds: ${o.round_ratios.map((r) => r.toFixed(2)).join(' ')}; goal >= 0.95)`)
const q = result.queue_scale
console.log(`queue scale: ${q.queued} queued, drained in priority order: ${q.drained_in_priority_order}`)
console.log(`  enqueue ${q.enqueue_us_per_op.toFixed(2)} us/op, grant ${q.grant_us_per_op.toFixed(2)} us/op, RSS ${q.rss_before_mb.toFixed(0)} -> ${q.rss_with_queue_mb.toFixed(0)} MiB`)
