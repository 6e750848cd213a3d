// The gateway for benchmarks, in one of two variants:
//   admission     the real admission state, never saturated (slots and key
//                 limits far above the load);
//   no-admission  a pass-through state that grants every request at once,
//                 to measure what admission itself costs.
import { benchConfig, serveBenchGateway } from '../lib/bench-gateway.mjs'

const [backendUrl, variant = 'admission'] = process.argv.slice(2)
const config = benchConfig({
  models: [{ name: 'bench', max_concurrency_per_backend: 4096, queue: { max_size: 100000 }, backends: [{ url: backendUrl, name: 'b1' }] }],
})

function passThroughState(models) {
  const slots = new Map(
    models.map((model) => [
      model.name,
      {
        acquire: async (request) => ({ backend: request.choose(model.backends.map((b) => b.name)), waitedMs: 0, release() {} }),
        tryAcquire: async () => null,
        wake() {},
        queueDepth: () => 0,
        inFlight: () => 0,
        load: () => 0,
        close() {},
      },
    ]),
  )
  return { slots, keys: { admit: async () => ({ chargeTokens: async () => {}, release() {} }) }, close() {}, reachable: () => true, whenReachable: async () => true, disconnect: async () => {} }
}

await serveBenchGateway(config, variant === 'no-admission' ? { state: passThroughState(config.models) } : {})
