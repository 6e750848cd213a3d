// The gateway for the many-streams benchmark (bench/streams.mjs): as
// gateway.mjs's admission variant, with max_concurrency_per_backend set from
// argv so that every stream holds a slot at once and none queues.
// Usage: node streams-gateway.mjs BACKEND_URL MAX_CONCURRENCY
import { benchConfig, serveBenchGateway } from '../lib/bench-gateway.mjs'

const [backendUrl, maxConcurrency = '10000'] = process.argv.slice(2)
await serveBenchGateway(
  benchConfig({
    models: [{ name: 'bench', max_concurrency_per_backend: Number(maxConcurrency), queue: { max_size: 100000 }, backends: [{ url: backendUrl, name: 'b1' }] }],
  }),
)
