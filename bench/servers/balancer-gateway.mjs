// The gateway for the balancer benchmark: one model, "sim", over the given
// backends with the given balance strategy.
// Usage: node balancer-gateway.mjs STRATEGY BACKEND_URL...
// The gateway never queues (max_concurrency_per_backend far above the load),
// so every request reaches a backend at once and waits, if at all, in that
// backend's own queue, where the balancer's choice shows. Backends are
// checked and their /metrics read every 250 ms, so least_loaded sees their
// queues almost as they are.
import { createHash } from 'node:crypto'
import { stringify } from 'yaml'
import { parseConfig } from '../../dist/config/load.js'
import { createLogger } from '../../dist/logger.js'
import { startGateway } from '../../dist/server.js'

const TOKEN = 'bench-token'
const [strategy, ...backendUrls] = process.argv.slice(2)
if (backendUrls.length === 0) throw new Error('usage: balancer-gateway.mjs STRATEGY BACKEND_URL...')

const config = parseConfig(
  stringify({
    server: { port: 0, shutdown_grace_ms: 1000 },
    log: { level: 'warn' },
    auth: {
      keys: [
        {
          id: 'bench',
          token_sha256: createHash('sha256').update(TOKEN).digest('hex'),
          scopes: ['chat'],
          limits: { requests_per_minute: 1e9, tokens_per_minute: 1e12, max_concurrency: 100000 },
        },
      ],
    },
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
  process.env,
)
if (!config.ok) throw new Error(JSON.stringify(config.issues))

const gateway = await startGateway(config.config, createLogger('warn'))
console.log(JSON.stringify({ url: gateway.url }))
process.once('SIGTERM', () => gateway.shutdown().then(() => process.exit(0)))
