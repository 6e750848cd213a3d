import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js'
import { cleanupsAfterEach } from '../support/cleanups.js'

const TOKEN = 'sk-lifecycle-test'
const cleanups = cleanupsAfterEach()

async function backend(options: Parameters<typeof startVllmStandIn>[0] = {}): Promise<VllmStandIn> {
  const standIn = await startVllmStandIn(options)
  cleanups.push(() => standIn.close())
  return standIn
}

function config(models: Record<string, unknown>[], grace = 10_000): string {
  return stringify({
    server: { port: 0, shutdown_grace_ms: grace },
    auth: { keys: [{ id: 'ops', token_sha256: createHash('sha256').update(TOKEN).digest('hex'), scopes: ['chat'] }] },
    models,
  })
}

async function configFile(text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-lifecycle-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'gateway.yaml')
  await writeFile(file, text)
  return file
}

async function gatewayProcess(file: string): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess(file)
  cleanups.push(async () => {
    if (gateway.child.exitCode === null) gateway.child.kill('SIGKILL')
    await gateway.exited()
  })
  return gateway
}

function chat(url: string, model: string, stream: boolean) {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
  })
}

/** Reads a stream to its end, calling `onFirst` when the first bytes arrive. */
async function readAll(response: Response, onFirst: () => void = () => undefined): Promise<string> {
  const reader = response.body!.getReader()
  let text = ''
  let first = true
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return text
    if (first) {
      first = false
      onFirst()
    }
    text += Buffer.from(value).toString('utf8')
  }
}

describe('SIGHUP reload', () => {
  it('a valid new config adding a model takes effect without dropping a stream in flight', async () => {
    const slow = await backend({ tokens: 30, interTokenDelayMs: 30 })
    const other = await backend({ tokens: 2 })
    const file = await configFile(config([{ name: 'a', backends: [{ url: slow.url }] }]))
    const gateway = await gatewayProcess(file)

    let streaming!: () => void
    const started = new Promise<void>((resolve) => (streaming = resolve))
    const inFlight = chat(gateway.url, 'a', true).then((response) => readAll(response, streaming))
    await started

    await writeFile(file, config([{ name: 'a', backends: [{ url: slow.url }] }, { name: 'b', backends: [{ url: other.url }] }]))
    gateway.child.kill('SIGHUP')
    await gateway.waitForLine((line) => line.msg === 'config reloaded')

    const added = await chat(gateway.url, 'b', false)
    expect(added.status).toBe(200)
    const streamed = await inFlight
    expect(streamed.trimEnd().endsWith('data: [DONE]')).toBe(true)
    expect(streamed).toContain('tok29')
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metrics).toMatch(/sluice_config_reloads_total\{result="ok"\} 1/)
  })

  it('an invalid new config is refused with its problems logged, and the old one keeps serving', async () => {
    const standIn = await backend({ tokens: 2 })
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }]))
    const gateway = await gatewayProcess(file)

    await writeFile(file, `${config([{ name: 'a', backends: [{ url: standIn.url }] }])}bogus_key: 1\n`)
    gateway.child.kill('SIGHUP')
    const refused = await gateway.waitForLine((line) => line.msg === 'config reload refused: the current config keeps serving')

    expect(refused.problems).toEqual(['bogus_key: is not a known key'])
    expect((await chat(gateway.url, 'a', false)).status).toBe(200)
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metrics).toMatch(/sluice_config_reloads_total\{result="invalid"\} 1/)
  })
})

describe('SIGTERM drain', () => {
  it('lets three streams in flight complete, refuses new connections, and exits 0', async () => {
    const standIn = await backend({ tokens: 20, interTokenDelayMs: 25 })
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }]))
    const gateway = await gatewayProcess(file)

    const firstBytes: Promise<void>[] = []
    const streams = Array.from({ length: 3 }, () => {
      let first!: () => void
      firstBytes.push(new Promise<void>((resolve) => (first = resolve)))
      return chat(gateway.url, 'a', true).then((response) => readAll(response, first))
    })
    await Promise.all(firstBytes)

    gateway.child.kill('SIGTERM')
    await gateway.waitForLine((line) => line.msg === 'draining')
    // The listener closes at once: a new connection is refused while the streams go on.
    await expect(fetch(`${gateway.url}/healthz`)).rejects.toThrow()

    for (const text of await Promise.all(streams)) {
      expect(text).toContain('tok19')
      expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    }
    expect(await gateway.exited()).toBe(0)
  })
})

describe('the log on stdout', () => {
  // stdout is written asynchronously (src/log-destination.ts): what is still buffered must go out at exit.
  it('holds every access line and the last line logged before process.exit', async () => {
    const standIn = await backend()
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }]))
    const gateway = await gatewayProcess(file)
    const statuses = await Promise.all(Array.from({ length: 200 }, () => chat(gateway.url, 'a', false).then((response) => response.status)))
    expect(statuses.every((status) => status === 200)).toBe(true)

    gateway.child.kill('SIGTERM')
    expect(await gateway.exited()).toBe(0)
    await gateway.outputEnded()
    expect(gateway.lines.filter((line) => line.msg === 'request completed')).toHaveLength(200)
    expect(gateway.lines.at(-1)?.msg).toBe('stopped')
  })
})
