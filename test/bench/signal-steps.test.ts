import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { stepper } from '../../bench/lib/signal-steps.mjs'

// A probe process as the benches load one: steps served on SIGUSR2, each result in a file.
const PROBE = `
import { serveSteps } from ${JSON.stringify(resolve('bench/lib/signal-steps.mjs'))}
let calls = 0
serveSteps([() => 'first:' + ++calls, async () => JSON.stringify({ pid: process.pid, calls: ++calls })])
setInterval(() => {}, 60000)
console.log('ready')
`

describe('signal steps (a bench driving a probe inside a target process)', () => {
  let child: ChildProcess | null = null
  let dir = ''
  afterEach(async () => {
    child?.kill('SIGKILL')
    if (dir !== '') await rm(dir, { recursive: true, force: true })
  })

  it('runs the next step on each signal and resolves with what it wrote, leaving no partial file', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-steps-'))
    child = spawn(process.execPath, ['--input-type=module', '-e', PROBE], { env: { ...process.env, BENCH_PROBE_DIR: dir }, stdio: ['ignore', 'pipe', 'inherit'] })
    await once(child.stdout!, 'data')
    const step = stepper(child.pid!, dir)
    expect(await step()).toBe('first:1')
    expect(JSON.parse(await step())).toEqual({ pid: child.pid, calls: 2 })
    expect((await readdir(dir)).sort()).toEqual([`step-0-${child.pid}`, `step-1-${child.pid}`])
  })
})
