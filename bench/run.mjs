// `npm run bench [-- soak|streams|instructions|allocations|stalls]`: which benchmarks to run, each in its own process.
//   (none)        proxy overhead, then admission
//   streams       5,000 idle streams
//   instructions  instructions per request under callgrind, gateway against the floor
//   instructions-streams  the same per stream (16 tokens, 5 ms apart)
//   allocations   bytes allocated per request and the GCs they cost, gateway against the floor
//   stalls        what the main thread's stalls at 500 req/s are made of, gateway against the floor
//   first-byte    where a stream's first byte goes (own work, upstream exchange, waiting), gateway against the floor
//   bodies        how long adversarial 1-8 MiB chat bodies hold the gateway's event loop
//   soak     10,000 idle streams, then the 10-minute soak
import { spawnSync } from 'node:child_process'

const PLANS = {
  default: [['bench/proxy-overhead.mjs'], ['bench/admission.mjs']],
  streams: [['bench/streams.mjs', { BENCH_STREAMS: '5000' }]],
  instructions: [['bench/instructions.mjs']],
  'instructions-streams': [['bench/instructions.mjs', { BENCH_INSTRUCTIONS_STREAMS: '1' }]],
  allocations: [['bench/allocations.mjs']],
  stalls: [['bench/stalls.mjs']],
  bodies: [['bench/bodies.mjs']],
  'first-byte': [['bench/first-byte.mjs']],
  soak: [['bench/streams.mjs', { BENCH_STREAMS: '10000' }], ['bench/soak.mjs']],
}

const name = process.argv[2] ?? 'default'
const plan = PLANS[name]
if (plan === undefined) {
  console.error(`unknown benchmark "${name}"; one of: ${Object.keys(PLANS).filter((p) => p !== 'default').join(', ')}`)
  process.exit(2)
}
for (const [script, env = {}] of plan) {
  const run = spawnSync(process.execPath, [script], { stdio: 'inherit', env: { ...process.env, ...env } })
  if (run.status !== 0) process.exit(run.status ?? 1)
}
