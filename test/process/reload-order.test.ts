/**
 * SIGHUPs that come while a reload is still running. Regression (config
 * review, 2026-11-28): in Redis mode a reload waits up to 2 s for its new
 * generation's Redis link; a second SIGHUP in that time, once the serving
 * generation had lost Redis, did not wait, and the first reload then
 * finished last: the older file served, a key it had revoked included.
 * Reloads now run one at a time, and a SIGHUP during one runs one more,
 * reading the file then.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer, connect, type Server, type Socket } from 'node:net'
import { createServer as createHttpServer } from 'node:http'
import { once } from 'node:events'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { expect, it } from 'vitest'
import { startGatewayProcess } from '../support/gateway-process.js'
import { describeWithRedis, startTestRedis, uniquePrefix } from '../support/redis-server.js'
import { trackedAfterEach } from '../support/tracked.js'
import { listenForTest } from '../support/listen.js'
import { until } from '../support/metrics.js'

const TOKEN = 'sk-reload-order'
const cleanups = trackedAfterEach()

/** A TCP relay to Redis that can leave new connections unanswered and cut the ones it relays. */
interface RedisRelay {
  readonly url: string
  hangNewConnections(): void
  cutRelayedConnections(): void
}

async function redisRelay(redisPort: number): Promise<RedisRelay> {
  let hang = false
  const open = new Set<Socket>()
  const relayed = new Set<Socket>()
  const server: Server = createServer((client) => {
    open.add(client)
    client.on('close', () => open.delete(client))
    client.on('error', () => undefined)
    // Accepted, and never answered: the link waits for its first reply.
    if (hang) return
    relayed.add(client)
    client.on('close', () => relayed.delete(client))
    const upstream = connect(redisPort, '127.0.0.1')
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    client.pipe(upstream).pipe(client)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(async () => {
    for (const socket of open) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const port = (server.address() as { port: number }).port
  return {
    url: `redis://127.0.0.1:${port}`,
    hangNewConnections: () => (hang = true),
    cutRelayedConnections: () => {
      for (const socket of relayed) socket.destroy()
    },
  }
}

/** A backend that counts health checks: with a long interval, one per generation, sent as it starts. */
async function countingBackend(): Promise<{ url: string; checks: () => number }> {
  let checks = 0
  const server = createHttpServer((req, res) => {
    if (req.url === '/health') checks++
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
  return { url: await listenForTest(server, cleanups), checks: () => checks }
}

function config(redisUrl: string, prefix: string, backendUrl: string, models: readonly string[]): string {
  return stringify({
    server: { port: 0 },
    state: { kind: 'redis', redis_url: redisUrl, key_prefix: prefix },
    auth: { keys: [{ id: 'ops', token_sha256: createHash('sha256').update(TOKEN).digest('hex'), scopes: ['chat'] }] },
    models: models.map((name) => ({ name, health: { interval_ms: 600_000 }, backends: [{ url: backendUrl }] })),
  })
}

describeWithRedis('reloads that overlap', () => {
  it('the file as of the last SIGHUP serves, though an earlier reload was still waiting for its Redis link', async () => {
    const redis = await startTestRedis()
    cleanups.push(() => redis.close())
    const relay = await redisRelay(redis.port)
    const backend = await countingBackend()
    const dir = await mkdtemp(join(tmpdir(), 'sluice-reload-order-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'gateway.yaml')
    const prefix = uniquePrefix('reload-order')
    const write = (models: readonly string[]) => writeFile(file, config(relay.url, prefix, backend.url, models))
    await write(['base'])
    const gateway = await startGatewayProcess(file)
    cleanups.push(async () => {
      if (gateway.child.exitCode === null) gateway.child.kill('SIGKILL')
      await gateway.exited()
    })
    await gateway.waitForLine((line) => line.msg === 'sluice listening')

    // Ready: its backend checked, its Redis link up.
    await until(async () => (await fetch(`${gateway.url}/readyz`)).status === 200, 'the gateway ready')
    expect(backend.checks()).toBe(1)
    // The first reload's new link cannot get an answer: it waits (up to 2 s) while the serving one is up.
    relay.hangNewConnections()
    await write(['base', 'first'])
    gateway.child.kill('SIGHUP')
    // Its generation's first health check leaves as it starts, after the reload looked at the serving link.
    await until(() => backend.checks() >= 2, "the first reload's health check")
    // The serving generation loses Redis; a second reload, of a newer file, comes in the meantime.
    relay.cutRelayedConnections()
    await gateway.waitForLine((line) => line.level === 40 && String(line.msg).includes('Redis'))
    await write(['base', 'second'])
    gateway.child.kill('SIGHUP')

    const reloads = () => gateway.lines.filter((line) => line.msg === 'config reloaded')
    await until(() => reloads().length === 2, 'both reloads', 10_000)
    const order = gateway.lines.filter((line) => line.msg === 'config reloaded').map((line) => (line.models as string[]).at(-1))
    expect(order.at(-1)).toBe('second')
    const models = (await (await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { data: { id: string }[] }
    expect(models.data.map((model) => model.id).sort()).toEqual(['base', 'second'])
  })
})
