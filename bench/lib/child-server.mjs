// Starts a server script in its own Node process (so load generator, gateway
// and backend do not share one event loop) and waits for the URL it prints.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'

export async function startChildServer(script, args = [], env = {}, nodeFlags = []) {
  const child = spawn(process.execPath, [...nodeFlags, script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  })
  const lines = createInterface({ input: child.stdout })
  const url = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)))
    lines.once('line', (line) => resolve(JSON.parse(line).url))
  })
  return {
    url,
    pid: child.pid,
    /** CPU seconds (user + system) the process has used, from /proc. */
    async cpuSeconds() {
      const { readFile } = await import('node:fs/promises')
      const fields = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1].split(' ')
      return (Number(fields[11]) + Number(fields[12])) / 100
    },
    async rssBytes() {
      const { readFile } = await import('node:fs/promises')
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8')
      return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024
    },
    stop() {
      return new Promise((resolve) => {
        child.once('exit', resolve)
        child.kill('SIGTERM')
      })
    },
  }
}
