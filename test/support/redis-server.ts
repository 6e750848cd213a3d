/**
 * A real redis-server for tests: started on a free port with no persistence
 * (`--save '' --appendonly no`), never the machine's shared one. With
 * REDIS_URL set, that server is used instead; it cannot be stopped or
 * frozen, so the tests that need to (`skipUnlessControllable`) skip. With
 * neither, Redis suites are skipped. Every such skip prints a loud message,
 * and fails instead when SLUICE_REQUIRE_REDIS=1 (CI).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, type TestContext } from 'vitest'
import { Redis } from 'ioredis'

const externalUrl = process.env.REDIS_URL
const required = process.env.SLUICE_REQUIRE_REDIS === '1'
const serverInstalled = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0

/** True when the tests can reach a Redis of their own. */
export const redisAvailable = externalUrl !== undefined || serverInstalled

/** `describe` for suites that need Redis: skipped loudly without one, failed with SLUICE_REQUIRE_REDIS=1. */
export function describeWithRedis(name: string, body: () => void): void {
  if (!redisAvailable) {
    const message = `Redis tests SKIPPED (${name}): no redis-server on PATH and no REDIS_URL`
    if (required) throw new Error(`${message}, but SLUICE_REQUIRE_REDIS=1`)
    console.error(`\n!!! ${message} !!!\n`)
  }
  describe.skipIf(!redisAvailable)(name, body)
}

export interface TestRedis {
  readonly url: string
  readonly port: number
  /** False for REDIS_URL: that server cannot be stopped and restarted by tests. */
  readonly controllable: boolean
  /** Stops the server (an outage); `start()` brings it back on the same port, empty. */
  stop(): Promise<void>
  start(): Promise<void>
  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered, until `resume()`. */
  pause(): void
  resume(): void
  /** Stops for good. */
  close(): Promise<void>
}

/**
 * First line of a test that stops, restarts or freezes Redis: returns when
 * the tests started the server. With REDIS_URL they did not, so the test is
 * skipped with a loud message, or fails when SLUICE_REQUIRE_REDIS=1.
 */
export function skipUnlessControllable(redis: TestRedis, context: TestContext): void {
  if (redis.controllable) return
  const message = `Redis test SKIPPED (${context.task.name}): it stops or freezes Redis, and the server at REDIS_URL is not the tests' to stop`
  if (required) throw new Error(`${message}, but SLUICE_REQUIRE_REDIS=1`)
  console.error(`\n!!! ${message} !!!\n`)
  context.skip(message)
}

/** Sorted sets scored by expiry (ms, Redis's clock) and that clock, read in one MULTI. */
export interface Expiries {
  readonly now: number
  /** One list of [member, expiry] per key, in the order asked. */
  readonly sets: (readonly [member: string, expiresAt: number])[][]
}

export async function expiriesIn(client: Redis, keys: readonly string[]): Promise<Expiries> {
  const batch = client.multi()
  for (const key of keys) batch.zrange(key, '0', '-1', 'WITHSCORES')
  const replies = (await batch.time().exec())!.map(([error, value]) => {
    if (error !== null) throw error
    return value as string[]
  })
  const [seconds, micros] = replies.pop()!
  const sets = replies.map((flat) => Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, Number(flat[2 * i + 1])] as const))
  return { now: Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), sets }
}

/** A key prefix no other test uses, so tests can share one server. */
export function uniquePrefix(label = 'test'): string {
  return `sluice-${label}-${randomBytes(4).toString('hex')}:`
}

/** `requirePassword`: the server refuses clients that do not AUTH with it (its url carries none). */
/** `args`: more redis-server arguments (`--replicaof`, `--cluster-enabled`); such a server is never REDIS_URL's. */
export async function startTestRedis(options: { requirePassword?: string; args?: readonly string[] } = {}): Promise<TestRedis> {
  if (externalUrl !== undefined && options.args !== undefined) throw new Error('REDIS_URL given: a server with its own arguments cannot be started (call skipUnlessControllable on another first)')
  if (externalUrl !== undefined) {
    const port = Number(new URL(externalUrl).port || 6379)
    const refuse = () => Promise.reject(new Error('REDIS_URL given: this server is not the tests’ to stop'))
    const refuseNow = () => {
      throw new Error('REDIS_URL given: this server is not the tests’ to pause')
    }
    return { url: externalUrl, port, controllable: false, stop: refuse, start: refuse, pause: refuseNow, resume: refuseNow, close: async () => undefined }
  }
  const port = await freePort()
  // Its own directory: a replica's full sync writes dump.rdb there even with --save '' (it was the working directory).
  const dir = await mkdtemp(join(tmpdir(), 'sluice-redis-'))
  let child: ChildProcess | null = null
  const start = async () => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
    if (options.requirePassword !== undefined) args.push('--requirepass', options.requirePassword)
    args.push(...(options.args ?? []))
    child = spawn('redis-server', args, { stdio: 'ignore' })
    await untilAnswers(port, child)
  }
  const stop = async () => {
    const running = child
    child = null
    if (running === null || running.exitCode !== null) return
    const exited = once(running, 'exit')
    running.kill('SIGKILL')
    await exited
  }
  const signal = (name: 'SIGSTOP' | 'SIGCONT') => {
    if (child === null || !child.kill(name)) throw new Error(`redis-server on port ${port} is not running`)
  }
  const close = async () => {
    child?.kill('SIGCONT')
    await stop()
    await rm(dir, { recursive: true, force: true })
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, port, controllable: true, start, stop, pause: () => signal('SIGSTOP'), resume: () => signal('SIGCONT'), close }
}

/** A test file's redis-server and a client to look into it (quiet while the server is stopped). */
export interface InspectedRedis {
  readonly redis: TestRedis
  readonly inspect: Redis
}

export async function startInspectedRedis(): Promise<InspectedRedis> {
  const redis = await startTestRedis()
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  // Outage tests stop the server under this client too.
  inspect.on('error', () => undefined)
  return { redis, inspect }
}

/**
 * Inside a describe: starts the suite's Redis and its inspector before the
 * tests and stops them after; `onStarted` receives them.
 */
export function useInspectedRedis(onStarted: (started: InspectedRedis) => void): void {
  let started: Partial<InspectedRedis> = {}
  beforeAll(async () => {
    const running = await startInspectedRedis()
    started = running
    onStarted(running)
  })
  afterAll(() => stopInspectedRedis(started))
}

/** For afterAll: either may be missing when start-up failed. */
export async function stopInspectedRedis(started: Partial<InspectedRedis>): Promise<void> {
  started.inspect?.disconnect()
  await started.redis?.close()
}

/** A port nothing listens on (right now). */
export async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Until the server answers PING (bounded: 5 s). */
async function untilAnswers(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode} (port ${port} taken?)`)
    if (await pings(port)) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`redis-server on port ${port} did not answer within 5 s`)
}

function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    socket.setTimeout(500, () => socket.destroy())
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      answer += chunk.toString()
      if (answer.includes('\r\n')) socket.end()
    })
    // A server that requires a password answers too, with NOAUTH.
    socket.on('close', () => resolve(answer.startsWith('+PONG') || answer.startsWith('-NOAUTH')))
    socket.on('error', () => undefined)
  })
}
