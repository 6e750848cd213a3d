// The gateway for benchmarks, in one of two variants:
//   admission     the real admission state, never saturated (slots and key
//                 limits far above the load);
//   no-admission  a pass-through state that grants every request at once,
//                 to measure what admission itself costs.
import { createHash } from 'node:crypto'
import { stringify } from 'yaml'
import { parseConfig } from '../../dist/config/load.js'
import { createLogger } from '../../dist/logger.js'
import { startGateway } from '../../dist/server.js'

export const BENCH_TOKEN = 'bench-token'
const [backendUrl, variant = 'admission'] = process.argv.slice(2)

const config = parseConfig(
  stringify({
    server: { port: 0, shutdown_grace_ms: 1000 },
    log: { level: 'warn' },
    auth: {
      keys: [
        {
          id: 'bench',
          token_sha256: createHash('sha256').update(BENCH_TOKEN).digest('hex'),
          scopes: ['chat'],
          limits: { requests_per_minute: 1e9, tokens_per_minute: 1e12, max_concurrency: 100000 },
        },
      ],
    },
    models: [{ name: 'bench', max_concurrency_per_backend: 4096, queue: { max_size: 100000 }, backends: [{ url: backendUrl, name: 'b1' }] }],
  }),
  process.env,
)
if (!config.ok) throw new Error(JSON.stringify(config.issues))

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
        close() {},
      },
    ]),
  )
  return { slots, keys: { admit: async () => ({ chargeTokens: async () => {}, release() {} }) }, close() {}, reachable: () => true, disconnect: async () => {} }
}

const overrides = variant === 'no-admission' ? { state: passThroughState(config.config.models) } : {}
const gateway = await startGateway(config.config, createLogger('warn'), overrides)
console.log(JSON.stringify({ url: gateway.url }))
process.once('SIGTERM', () => gateway.shutdown().then(() => process.exit(0)))
