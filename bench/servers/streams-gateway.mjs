// The gateway for the many-streams benchmark (bench/streams.mjs): as
// gateway.mjs's admission variant, with max_concurrency_per_backend set from
// argv so that every stream holds a slot at once and none queues.
// Usage: node streams-gateway.mjs BACKEND_URL MAX_CONCURRENCY
import { createHash } from 'node:crypto'
import { stringify } from 'yaml'
import { parseConfig } from '../../dist/config/load.js'
import { createLogger } from '../../dist/logger.js'
import { startGateway } from '../../dist/server.js'

const TOKEN = 'bench-token'
const [backendUrl, maxConcurrency = '10000'] = process.argv.slice(2)

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
          limits: { requests_per_minute: 1e9, tokens_per_minute: 1e12, max_concurrency: 1000000 },
        },
      ],
    },
    models: [
      {
        name: 'bench',
        max_concurrency_per_backend: Number(maxConcurrency),
        queue: { max_size: 100000 },
        backends: [{ url: backendUrl, name: 'b1' }],
      },
    ],
  }),
  process.env,
)
if (!config.ok) throw new Error(JSON.stringify(config.issues))

const gateway = await startGateway(config.config, createLogger('warn'))
console.log(JSON.stringify({ url: gateway.url }))
process.once('SIGTERM', () => gateway.shutdown().then(() => process.exit(0)))
