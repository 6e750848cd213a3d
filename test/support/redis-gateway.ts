/**
 * Gateways in Redis mode for tests: in this process (with Redis timings a
 * config file cannot set), or in a child process running dist/, so a test can
 * kill it with SIGKILL like a crashed replica.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { createLogger } from '../../src/logger.js'
import { startGateway } from '../../src/server.js'
import type { RedisTimings } from '../../src/state/redis-link.js'
import { configFrom, type TestGateway } from './gateway.js'

/** startTestGateway, with Redis timings. */
export async function startRedisTestGateway(object: Record<string, unknown>, redisTimings: RedisTimings = {}): Promise<TestGateway> {
  const config = configFrom({ ...object, server: { port: 0, ...(object.server as object | undefined) } })
  const chunks: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString('utf8'))
      done()
    },
  })
  const gateway = await startGateway(config, createLogger(config.log.level, sink), { redisTimings })
  const logText = () => chunks.join('')
  return {
    ...gateway,
    logText,
    logLines: () =>
      logText()
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  }
}

export interface ChildGateway {
  readonly url: string
  readonly pid: number
  /** SIGKILL: no shutdown, no cleanup, like a crash. */
  kill(): Promise<void>
}

const CHILD_SCRIPT = fileURLToPath(new URL('./gateway-child.mjs', import.meta.url))
const BUILT = fileURLToPath(new URL('../../dist/server.js', import.meta.url))

export async function startChildGateway(object: Record<string, unknown>, redisTimings: RedisTimings = {}): Promise<ChildGateway> {
  if (!existsSync(BUILT)) throw new Error('dist/ is missing: run `npm run build` before these tests')
  const config = { ...object, server: { port: 0, ...(object.server as object | undefined) } }
  const child: ChildProcess = spawn(process.execPath, [CHILD_SCRIPT, JSON.stringify(config), JSON.stringify(redisTimings)], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout! })
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`gateway child exited with ${code} before it listened`)))
    lines.once('line', (line) => resolve((JSON.parse(line) as { url: string }).url))
  })
  return {
    url,
    pid: child.pid!,
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = once(child, 'exit')
      child.kill('SIGKILL')
      await exited
    },
  }
}
