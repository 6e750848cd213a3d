// A server script under valgrind's callgrind, with its counting switched on
// only when asked: instructions are counted from `startCounting()` to
// `dump()`, so warm-up (JIT compilation of the hot path) is left out.
// Node writes /tmp/perf-<pid>.map (--perf-basic-prof) so the JIT code the
// profile holds can be named (lib/callgrind-profile.mjs).
import { execFile, execFileSync, spawn } from 'node:child_process'
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { promisify } from 'node:util'

const run = promisify(execFile)

export function callgrindAvailable() {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' })
    execFileSync('callgrind_control', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Starts `node script ...args` under callgrind, counting nothing yet; resolves once it prints its URL. */
export async function startUnderCallgrind(script, args, outDir) {
  const vgdbPrefix = join(outDir, 'vgdb')
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      // One profile per thread: the main thread is the request path; V8's
      // compiler and GC helpers run on the others, on their own schedule.
      '--separate-threads=yes',
      `--vgdb-prefix=${vgdbPrefix}`,
      `--callgrind-out-file=${join(outDir, 'callgrind.out.%p')}`,
      process.execPath,
      '--perf-basic-prof',
      // The flag also makes V8 write a code log: into the profile's folder, not the working directory.
      `--logfile=${join(outDir, 'v8.log')}`,
      script,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  // valgrind's banner and the server's warnings: kept for an error message, not printed.
  const stderr = []
  createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line))
  const url = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} under callgrind exited with ${code}:\n${stderr.slice(-20).join('\n')}`)))
    createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line).url))
  })
  const control = (...options) => run('callgrind_control', [`--vgdb-prefix=${vgdbPrefix}`, ...options, String(child.pid)])
  return {
    url,
    pid: child.pid,
    /** Instrumentation on and counters at zero. */
    async startCounting() {
      await control('--instr=on')
      await control('--zero')
    },
    /** Writes the counts since startCounting; resolves with the files written (one per thread). */
    async dump() {
      await control('--dump')
      const prefix = `callgrind.out.${child.pid}.`
      return (await readdir(outDir)).filter((name) => name.startsWith(prefix)).map((name) => join(outDir, name))
    },
    perfMapPath: `/tmp/perf-${child.pid}.map`,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
      await rm(`/tmp/perf-${child.pid}.map`, { force: true })
    },
  }
}
