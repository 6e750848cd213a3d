// The gateway for the balancer benchmark: one model, "sim", over the given
// backends with the given balance strategy.
// Usage: node balancer-gateway.mjs STRATEGY BACKEND_URL...
// The gateway never queues (max_concurrency_per_backend far above the load),
// so every request reaches a backend at once and waits, if at all, in that
// backend's own queue, where the balancer's choice shows. Backends are
// checked and their /metrics read every 250 ms, so least_loaded sees their
// queues almost as they are.
import { benchConfig, serveBenchGateway } from '../lib/bench-gateway.mjs'

const [strategy, ...backendUrls] = process.argv.slice(2)
if (backendUrls.length === 0) throw new Error('usage: balancer-gateway.mjs STRATEGY BACKEND_URL...')

await serveBenchGateway(
  benchConfig({
    models: [
      {
        name: 'sim',
        balance: strategy,
        max_concurrency_per_backend: 1000,
        queue: { max_size: 100000 },
        health: { interval_ms: 250 },
        backends: backendUrls.map((url, i) => ({ url, name: `b${i + 1}` })),
      },
    ],
  }),
)
