// A stand-in vLLM backend for benchmarks. BENCH_TOKENS and BENCH_DELAY_MS
// shape its answers.
import { startVllmStandIn } from '../../dist/dev/vllm-stand-in.js'

const standIn = await startVllmStandIn({
  tokens: Number(process.env.BENCH_TOKENS ?? 8),
  interTokenDelayMs: Number(process.env.BENCH_DELAY_MS ?? 0),
})
console.log(JSON.stringify({ url: standIn.url }))
process.once('SIGTERM', () => standIn.close().then(() => process.exit(0)))
