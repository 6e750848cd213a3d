/**
 * `npm run demo` stopped through npm alone: npm's shell goes, and the demo,
 * orphaned, must stop rather than serve on. A parent process stands in for
 * npm's shell; the test kills it with SIGKILL and waits for the demo to go.
 */
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { expect, it } from 'vitest'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { until } from '../support/metrics.js'

const cleanups = cleanupsAfterEach()

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

it('the demo stops once the process that started it is gone', async () => {
  const demo = resolve('dist/dev/demo.js')
  const parentScript = `
    const child = require('node:child_process').spawn(process.execPath, [${JSON.stringify(demo)}], { stdio: ['ignore', 'inherit', 'inherit'] })
    process.stderr.write('demo pid ' + child.pid + '\\n')
    setInterval(() => undefined, 60_000)
  `
  const parent = spawn(process.execPath, ['-e', parentScript], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SLUICE_PORT: '0' } })
  let demoPid = 0
  let output = ''
  parent.stderr!.on('data', (chunk: Buffer) => {
    const found = /demo pid (\d+)/.exec(chunk.toString())
    if (found) demoPid = Number(found[1])
  })
  parent.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  cleanups.push(() => {
    if (demoPid !== 0 && alive(demoPid)) process.kill(demoPid, 'SIGKILL')
    parent.kill('SIGKILL')
  })
  await until(() => /Sluice demo running at (\S+)/.test(output), 'the demo to be up', 20_000)
  const url = /Sluice demo running at (\S+)/.exec(output)![1]!
  expect((await fetch(`${url}/healthz`)).status).toBe(200)

  parent.kill('SIGKILL')
  await until(() => !alive(demoPid), 'the orphaned demo to stop', 10_000)
  await expect(fetch(`${url}/healthz`)).rejects.toThrow()
}, 40_000)
