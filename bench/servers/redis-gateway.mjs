// The gateway for the Redis admission benchmark (bench/redis-admission.mjs).
//   argv: <backend url> <limits | no-limits> [<redis url> <key prefix>]
// With a Redis URL it runs `state.kind: redis`, else the memory state. Slots
// and key limits are far above the load, so admission is never contended.
//
// It counts the Redis commands it sends, by command and by script (EVALSHA's
// SHA named after the script it runs): on SIGUSR2 it writes the running
// totals to $BENCH_COUNTS_FILE, so the benchmark can take deltas around a
// measured window.
import { createHash } from 'node:crypto'
import { readdirSync, renameSync, writeFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { benchConfig, serveBenchGateway, UNSATURATED_LIMITS } from '../lib/bench-gateway.mjs'

const [backendUrl, limitsMode = 'limits', redisUrl, keyPrefix = 'sluice-bench:'] = process.argv.slice(2)

// Every script table in dist/state/lua/*-scripts.js (name → Lua source), by SHA.
const scriptBySha = new Map()
const luaDir = new URL('../../dist/state/lua/', import.meta.url)
for (const file of readdirSync(luaDir).filter((f) => f.endsWith('-scripts.js'))) {
  for (const table of Object.values(await import(new URL(file, luaDir).href))) {
    for (const [name, lua] of Object.entries(table)) {
      if (typeof lua === 'string') scriptBySha.set(createHash('sha1').update(lua).digest('hex'), name)
    }
  }
}
const counts = {}
const sendCommand = Redis.prototype.sendCommand
Redis.prototype.sendCommand = function countedSendCommand(command, stream) {
  const first = String(command.args[0] ?? '')
  const label = command.name === 'evalsha' ? (scriptBySha.get(first) ?? `evalsha:${first.slice(0, 8)}`) : command.name
  counts[label] = (counts[label] ?? 0) + 1
  return sendCommand.call(this, command, stream)
}
process.on('SIGUSR2', () => {
  const file = process.env.BENCH_COUNTS_FILE
  if (file === undefined) return
  writeFileSync(`${file}.tmp`, JSON.stringify(counts))
  renameSync(`${file}.tmp`, file)
})

await serveBenchGateway(
  benchConfig({
    limits: limitsMode === 'limits' ? UNSATURATED_LIMITS : null,
    state: redisUrl === undefined ? undefined : { kind: 'redis', redis_url: redisUrl, key_prefix: keyPrefix },
    models: [{ name: 'bench', max_concurrency_per_backend: 4096, queue: { max_size: 100000 }, backends: [{ url: backendUrl, name: 'b1' }] }],
  }),
)
