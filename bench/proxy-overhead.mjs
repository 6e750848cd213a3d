// What the gateway adds over talking to the backend directly, side by side in
// one run, with nginx proxy_pass (upstream keepalive) as the reference when
// installed. Loopback only; about two minutes.
//   (a) max throughput: 64 connections, small non-streaming chat body
//   (b) open loop at a fixed rate: p50/p99 and the latency the target adds
//   (c) streaming: 16 tokens, 5 ms apart: time to first and last byte, req/s
//   (d) gateway CPU seconds per 1,000 requests and RSS after the run
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import { startChildServer } from './lib/child-server.mjs'
import { CHAT_BODY, load } from './lib/load.mjs'
import { nginxAvailable, startNginx } from './lib/nginx.mjs'
import { openLoop, streamLoop } from './lib/open-loop.mjs'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const RATE = Number(process.env.BENCH_RATE ?? 500)
const TOKEN = 'bench-token'
const PATH = '/v1/chat/completions'
const headers = (target) => ({ 'content-type': 'application/json', ...(target === 'gateway' ? { authorization: `Bearer ${TOKEN}` } : {}) })
// The backend serves any model name; the gateway knows "bench".
const STREAM_BODY = JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'Hello, how are you today?' }] })

async function startTargets(backendEnv) {
  const backend = await startChildServer('bench/servers/backend.mjs', [], backendEnv)
  const gateway = await startChildServer('bench/servers/gateway.mjs', [backend.url, 'admission'])
  const nginx = nginxAvailable() ? await startNginx(backend.url) : null
  const targets = { direct: backend.url, gateway: gateway.url, ...(nginx ? { nginx: nginx.url } : {}) }
  return { backend, gateway, nginx, targets, stop: () => Promise.all([backend.stop(), gateway.stop(), nginx?.stop()]) }
}

async function throughputAndRate() {
  const run = await startTargets({ BENCH_TOKENS: '8', BENCH_DELAY_MS: '0' })
  try {
    for (const [name, url] of Object.entries(run.targets)) await load({ url, token: name === 'gateway' ? TOKEN : undefined, seconds: 2 })
    const throughput = {}
    const cpuBefore = await run.gateway.cpuSeconds()
    for (const [name, url] of Object.entries(run.targets)) {
      throughput[name] = await load({ url, token: name === 'gateway' ? TOKEN : undefined, seconds: SECONDS, connections: 64 })
      if (name === 'gateway') throughput.gateway.cpu_seconds = (await run.gateway.cpuSeconds()) - cpuBefore
    }
    const fixedRate = {}
    for (const [name, url] of Object.entries(run.targets)) {
      fixedRate[name] = await openLoop({ url, path: PATH, headers: headers(name), body: CHAT_BODY, rate: RATE, seconds: SECONDS })
    }
    const rss = await run.gateway.rssBytes()
    return { throughput, fixedRate, gatewayRssMb: rss / 2 ** 20 }
  } finally {
    await run.stop()
  }
}

async function streaming() {
  const run = await startTargets({ BENCH_TOKENS: '16', BENCH_DELAY_MS: '5' })
  try {
    const results = {}
    for (const [name, url] of Object.entries(run.targets)) {
      results[name] = await streamLoop({ url, path: PATH, headers: headers(name), body: STREAM_BODY, connections: 32, seconds: SECONDS })
    }
    return results
  } finally {
    await run.stop()
  }
}

const ratio = (value, base) => (Number.isFinite(value) && base ? value / base : NaN)
const fmt = (n, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a')

const { throughput, fixedRate, gatewayRssMb } = await throughputAndRate()
const stream = await streaming()
const result = {
  date: new Date().toISOString(),
  command: 'npm run bench',
  machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, nginx: nginxAvailable() },
  seconds_per_run: SECONDS,
  throughput,
  fixed_rate: { rate: RATE, ...fixedRate },
  streaming: stream,
  gateway: {
    cpu_seconds_per_1000_requests: (throughput.gateway.cpu_seconds / throughput.gateway.requests) * 1000,
    rss_mb_after: gatewayRssMb,
  },
}
await mkdir('bench/results', { recursive: true })
await writeFile('bench/results/proxy-overhead.json', `${JSON.stringify(result, null, 2)}\n`)

const names = Object.keys(throughput)
console.log(`\nSluice proxy overhead — ${result.date}, ${result.machine.cores} cores, ${result.machine.cpu}, Node ${result.machine.node}`)
console.log(`(a) max throughput, 64 connections, ${SECONDS} s`)
for (const n of names) {
  const t = throughput[n]
  console.log(`  ${n.padEnd(8)} ${fmt(t.rps, 0).padStart(7)} req/s (x${fmt(ratio(t.rps, throughput.direct.rps), 2)})  p50 ${fmt(t.p50_ms)} ms  p99 ${fmt(t.p99_ms)} ms  non-2xx ${t.non2xx}`)
}
console.log(`(b) open loop, ${RATE} req/s for ${SECONDS} s`)
for (const n of names) {
  const f = fixedRate[n]
  console.log(`  ${n.padEnd(8)} p50 ${fmt(f.p50_ms, 2)} ms  p99 ${fmt(f.p99_ms, 2)} ms  added p50 ${fmt(f.p50_ms - fixedRate.direct.p50_ms, 2)} ms  errors ${f.errors} non-2xx ${f.non2xx}`)
}
console.log(`(c) streaming, 16 tokens 5 ms apart, 32 connections`)
for (const n of names) {
  const s = stream[n]
  console.log(`  ${n.padEnd(8)} first byte p50 ${fmt(s.ttfb_p50_ms, 2)} ms  last byte p50 ${fmt(s.ttlb_p50_ms, 2)} ms  ${fmt(s.rps, 0)} req/s (x${fmt(ratio(s.rps, stream.direct.rps), 2)})`)
}
console.log(`(d) gateway: ${fmt(result.gateway.cpu_seconds_per_1000_requests, 3)} CPU s per 1,000 requests, RSS ${fmt(result.gateway.rss_mb_after, 0)} MiB after the run`)
if (!result.machine.nginx) console.log('nginx not installed: apt-get install nginx-light to add the reference column')
