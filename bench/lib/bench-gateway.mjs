// What every benchmark gateway shares: the bench key (token "bench-token",
// limits far above any load unless asked otherwise), a quiet logger, and the
// start-up handshake with bench/lib/child-server.mjs (print {url}, stop on
// SIGTERM). Each server script only says which models it serves.
import { createHash } from 'node:crypto'
import { openSync } from 'node:fs'
import { stringify } from 'yaml'
import { parseConfig } from '../../dist/config/load.js'
import { asyncStdout } from '../../dist/log-destination.js'
import { createLogger } from '../../dist/logger.js'
import { startGateway } from '../../dist/server.js'

export const BENCH_TOKEN = 'bench-token'
export const UNSATURATED_LIMITS = { requests_per_minute: 1e9, tokens_per_minute: 1e12, max_concurrency: 1000000 }

export function benchConfig({ models, limits = UNSATURATED_LIMITS, state }) {
  const key = { id: 'bench', token_sha256: createHash('sha256').update(BENCH_TOKEN).digest('hex'), scopes: ['chat'], ...(limits ? { limits } : {}) }
  const parsed = parseConfig(
    stringify({ server: { port: 0, shutdown_grace_ms: 1000 }, log: { level: 'warn' }, auth: { keys: [key] }, models, ...(state ? { state } : {}) }),
    process.env,
  )
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues))
  return parsed.config
}

/**
 * Quiet by default (warn). BENCH_ACCESS_LOG=<file> logs at info, one access
 * line per request as operators run it, through the destination production
 * writes stdout with (asynchronous, bounded), to that file instead of the
 * pipe the bench reads the URL from.
 */
function benchLogger() {
  const file = process.env.BENCH_ACCESS_LOG
  if (!file) return createLogger('warn')
  return createLogger('info', asyncStdout({ fd: openSync(file, 'a') }))
}

/** Starts the gateway and tells the parent process where it listens. */
export async function serveBenchGateway(config, overrides = {}) {
  const gateway = await startGateway(config, benchLogger(), overrides)
  console.log(JSON.stringify({ url: gateway.url }))
  process.once('SIGTERM', () => gateway.shutdown().then(() => process.exit(0)))
  return gateway
}
