import { once } from 'node:events'
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { createServer, type AddressInfo } from 'node:net'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js'
import { trackedAfterEach } from '../support/tracked.js'
import { until } from '../support/metrics.js'

const TOKEN = 'sk-lifecycle-test'
const cleanups = trackedAfterEach()

function config(models: Record<string, unknown>[], grace = 10_000, extra: Record<string, unknown> = {}): string {
  return stringify({
    ...extra,
    server: { port: 0, shutdown_grace_ms: grace, ...(extra.server as object | undefined) },
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
  // Regression: the listener was installed only once the imports had run and the config was read
  // (~0.8 s): a SIGHUP then, a reload sidecar's as the pod starts, killed the process.
  it('a SIGHUP while the gateway is still starting (reading its config) is ignored, with a warning', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-lifecycle-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const fifo = join(dir, 'gateway.yaml')
    execFileSync('mkfifo', [fifo])
    let child!: ChildProcess
    const starting = startGatewayProcess(fifo, {}, (spawned) => (child = spawned))
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    })
    // Opening a FIFO for writing waits for its reader: the gateway is reading its config now.
    const writer = await open(fifo, 'w')
    child.kill('SIGHUP')
    await writer.writeFile(config([{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }]))
    await writer.close()

    const gateway = await starting
    expect(await gateway.waitForLine((line) => line.msg === 'SIGHUP before the gateway was ready: ignored')).toMatchObject({ level: 40, signals: 1 })
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
  })

  it('a valid new config adding a model takes effect without dropping a stream in flight', async () => {
    const slow = await cleanups.standIn({ tokens: 30, interTokenDelayMs: 30 })
    const other = await cleanups.standIn({ tokens: 2 })
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
    const standIn = await cleanups.standIn({ tokens: 2 })
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

  // Regression (an operator audit): a setting that changes only on restart was logged as a crash
  // (an error with its stack) and counted as result="failed", though the config is the operator's to fix.
  it('a change of state settings is refused like an invalid config: its reason, no stack', async () => {
    const standIn = await cleanups.standIn({ tokens: 2 })
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }]))
    const gateway = await gatewayProcess(file)

    await writeFile(file, config([{ name: 'a', backends: [{ url: standIn.url }] }], 10_000, { state: { kind: 'redis', redis_url: 'redis://127.0.0.1:1' } }))
    gateway.child.kill('SIGHUP')
    const refused = await gateway.waitForLine((line) => line.msg === 'config reload refused: the current config keeps serving')

    expect(refused.problems).toEqual(['state.kind, state.redis_url change only on restart: the requests running under the current one would not be counted'])
    expect(refused.err).toBeUndefined()
    expect((await chat(gateway.url, 'a', false)).status).toBe(200)
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metrics).toMatch(/sluice_config_reloads_total\{result="invalid"\} 1/)
  })
})

describe('reload of settings read after start', () => {
  // Regression: shutdown used the first config's grace period and the logger
  // its first level, whatever a reload said, and nothing warned about it.
  it('a reload\'s shutdown_grace_ms and log.level are the ones in force', async () => {
    const held = await cleanups.standIn({ hold: true })
    const file = await configFile(config([{ name: 'a', backends: [{ url: held.url }] }]))
    const gateway = await gatewayProcess(file)

    await writeFile(file, config([{ name: 'a', backends: [{ url: held.url }] }], 300, { log: { level: 'warn' } }))
    gateway.child.kill('SIGHUP')
    await until(async () => (await (await fetch(`${gateway.url}/metrics`)).text()).includes('sluice_config_reloads_total{result="ok"} 1'), 'the reload')
    const inFlight = chat(gateway.url, 'a', false).catch(() => null)
    await once(held.events, 'held')

    gateway.child.kill('SIGTERM')
    const over = await gateway.waitForLine((line) => line.msg === 'grace period over: requests still in flight are ended with shutting_down')
    expect(over.grace_ms).toBe(300)
    expect(over.cut_off).toBe(1)
    expect(await gateway.exited()).toBe(0)
    expect((await inFlight)?.status).toBe(503)
    await gateway.outputEnded()
    // At warn, no access line for the chat request cut at the end of the grace period
    // (the first /metrics polls may still have been answered, and logged, before the reload).
    expect(gateway.lines.filter((line) => line.msg === 'request completed' && line.route === 'chat')).toEqual([])
  })
})

describe('log.level above info', () => {
  // Session 23 lifecycle review: at warn, port 0's chosen port was never printed (DESIGN.md: printed
  // at start), nor a drain's start and end: the lines were info lines.
  // Session 24 reload review: a reload into warn said nothing of itself ("config reloaded" was info).
  it('still prints the start line (with the chosen port), a reload, the drain and the stop, at the configured level', async () => {
    const standIn = await cleanups.standIn({ tokens: 1 })
    const text = config([{ name: 'a', backends: [{ url: standIn.url }] }], 10_000, { log: { level: 'warn' } })
    const file = await configFile(text)
    const gateway = await gatewayProcess(file)
    expect(gateway.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    gateway.child.kill('SIGHUP')
    await gateway.waitForLine((line) => line.msg === 'config reloaded')

    gateway.child.kill('SIGTERM')
    expect(await gateway.exited()).toBe(0)
    await gateway.outputEnded()
    expect(gateway.lines.map((line) => [line.msg, line.level])).toEqual([
      ['sluice listening', 40],
      ['config reloaded', 40],
      ['draining', 40],
      ['stopped', 40],
    ])
    // The log line says it: no plain line on stderr besides (that is for `silent` alone).
    expect(gateway.stderr()).toBe('')
  })
})

describe('log.level silent', () => {
  // Regression (ops review, session 27): with `silent`, the ports `port: 0` and `metrics_port: 0` chose were
  // printed nowhere (DESIGN.md: "0 = any free port, printed at start").
  /** The gateway on `server` settings at level silent: its stdout and stderr once it has served /healthz at `healthz` and stopped. */
  async function silentRun(server: Record<string, unknown>, healthz: (stderrLine: Promise<string>) => Promise<string>): Promise<{ stdout: string; stderr: string }> {
    const standIn = await cleanups.standIn({ tokens: 1 })
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }], 10_000, { log: { level: 'silent' }, server }))
    const child = spawn(process.execPath, ['dist/main.js', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] })
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL')
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const firstLine = once(createInterface({ input: child.stderr }), 'line').then(([line]) => line as string)
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    await until(async () => (await fetch(await healthz(firstLine)).catch(() => null))?.status === 200, 'the gateway serving', 10_000)
    const exited = once(child, 'exit')
    child.kill('SIGTERM')
    expect((await exited)[0]).toBe(0)
    return { stdout, stderr }
  }

  it('prints the chosen ports in one line on stderr, and writes nothing else', async () => {
    const { stdout, stderr } = await silentRun({ port: 0, metrics_port: 0 }, async (line) => {
      const match = /^sluice listening on (http:\/\/127\.0\.0\.1:\d+), metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)$/.exec(await line)
      expect(match, await line).not.toBeNull()
      // Printed once both listen.
      expect((await fetch(match![2]!)).status).toBe(200)
      return `${match![1]}/healthz`
    })
    expect(stderr).toMatch(/^sluice listening on [^\n]+\n$/)
    expect(stdout).toBe('')
  })

  it('prints it for a chosen metrics port alone too, and nothing when no port is chosen', async () => {
    const taken = createServer().listen(0, '127.0.0.1')
    await once(taken, 'listening')
    const port = (taken.address() as AddressInfo).port
    await new Promise((resolve) => taken.close(resolve))
    const fixed = await silentRun({ port }, async () => `http://127.0.0.1:${port}/healthz`)
    expect(fixed).toEqual({ stdout: '', stderr: '' })

    const metricsOnly = await silentRun({ port, metrics_port: 0 }, async () => `http://127.0.0.1:${port}/healthz`)
    expect(metricsOnly.stderr).toMatch(new RegExp(`^sluice listening on http://127\\.0\\.0\\.1:${port}, metrics on http://127\\.0\\.0\\.1:\\d+/metrics\n$`))
    expect(metricsOnly.stdout).toBe('')
  })
})

describe('SIGTERM drain', () => {
  // Regression: the handlers were `once`, so a second signal killed the process with no line at all.
  it('a second signal while draining exits at once with code 1, saying so', async () => {
    const held = await cleanups.standIn({ hold: true })
    const file = await configFile(config([{ name: 'a', backends: [{ url: held.url }] }]))
    const gateway = await gatewayProcess(file)
    const inFlight = chat(gateway.url, 'a', false).catch(() => null)
    await once(held.events, 'held')

    gateway.child.kill('SIGTERM')
    await gateway.waitForLine((line) => line.msg === 'draining')
    gateway.child.kill('SIGINT')

    expect(await gateway.exited()).toBe(1)
    await inFlight
    await gateway.outputEnded()
    expect(gateway.lines.some((line) => line.level === 40 && String(line.msg).startsWith('second signal while draining'))).toBe(true)
  })

  it('a SIGHUP while draining is ignored with an info line: no error, no failed reload', async () => {
    const held = await cleanups.standIn({ hold: true })
    const file = await configFile(config([{ name: 'a', backends: [{ url: held.url }] }]))
    const gateway = await gatewayProcess(file)
    const inFlight = chat(gateway.url, 'a', false)
    await once(held.events, 'held')

    gateway.child.kill('SIGTERM')
    await gateway.waitForLine((line) => line.msg === 'draining')
    gateway.child.kill('SIGHUP')
    await gateway.waitForLine((line) => line.msg === 'SIGHUP while draining: ignored')
    held.releaseHeld(1)

    expect((await inFlight).status).toBe(200)
    expect(await gateway.exited()).toBe(0)
    await gateway.outputEnded()
    expect(gateway.lines.filter((line) => (line.level as number) >= 50)).toEqual([])
  })

  // Regression: sonic-boom 4 retried a write that met EPIPE forever in the flush at exit,
  // so a gateway whose log reader had gone (a dead sidecar, `| head`) never exited.
  it('exits 0 when the reader of its log has gone away', async () => {
    const file = await configFile(config([{ name: 'a', backends: [{ url: 'http://127.0.0.1:9' }] }], 1000))
    const gateway = await gatewayProcess(file)
    const readerGone = once(gateway.child.stdout!, 'close')
    gateway.child.stdout!.destroy()
    await readerGone

    gateway.child.kill('SIGTERM')
    expect(await gateway.exited()).toBe(0)
  }, 10_000)

  it('lets three streams in flight complete, refuses new connections, and exits 0', async () => {
    const standIn = await cleanups.standIn({ tokens: 20, interTokenDelayMs: 25 })
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
    const standIn = await cleanups.standIn()
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

describe('server.metrics_port', () => {
  // Regression: 0 picked a free port and printed it nowhere.
  it('0: the listening line names the metrics URL, and /metrics is served there', async () => {
    const standIn = await cleanups.standIn()
    const file = await configFile(config([{ name: 'a', backends: [{ url: standIn.url }] }], 10_000, { server: { metrics_port: 0 } }))
    const gateway = await gatewayProcess(file)
    const listening = await gateway.waitForLine((line) => line.msg === 'sluice listening')

    expect(listening.metrics_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
    const scraped = await fetch(String(listening.metrics_url))
    expect(scraped.status).toBe(200)
    expect(await scraped.text()).toContain('sluice_requests_total')
  })

  // Regression: with the main port bound and metrics_port taken, the gateway
  // served on, half-started, with no signal handlers, and never exited.
  it('taken: the gateway does not start; one line says why, exit code 1', async () => {
    const taken = createServer().listen(0, '127.0.0.1')
    await once(taken, 'listening')
    cleanups.push(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const port = (taken.address() as AddressInfo).port
    const file = await configFile(config([{ name: 'a', backends: [{ url: 'http://127.0.0.1:9' }] }], 10_000, { server: { metrics_port: port } }))

    await expect(startGatewayProcess(file)).rejects.toThrow(/exited with 1 before listening: sluice: cannot start: listen EADDRINUSE[^\n]*\n$/)
  })
})
