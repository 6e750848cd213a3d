// How a bench drives a probe inside a target process (loaded there with
// `node --import`): each SIGUSR2 runs the probe's next step, and the step's
// result (a string, maybe empty) is written to $BENCH_PROBE_DIR/step-<n>-<pid>,
// renamed into place so it is never read half-written. The bench waits for
// that file to appear, not for a time.
import { renameSync, watch, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'

/** Probe side: runs `steps[n]` on the n-th signal. */
export function serveSteps(steps) {
  const dir = process.env.BENCH_PROBE_DIR
  let next = 0
  process.on('SIGUSR2', async () => {
    const current = next++
    const file = join(dir, `step-${current}-${process.pid}`)
    writeFileSync(`${file}.part`, await steps[current]())
    renameSync(`${file}.part`, file)
  })
}

/** Bench side: a function that runs the probe's next step in process `pid` and resolves with its result. */
export function stepper(pid, dir) {
  let next = 0
  return async () => readFile(await signalAndWait(pid, dir, `step-${next++}-${pid}`), 'utf8')
}

function signalAndWait(pid, dir, name) {
  return new Promise((resolve, reject) => {
    const watcher = watch(dir, (_event, file) => {
      if (file !== name) return
      watcher.close()
      resolve(join(dir, name))
    })
    watcher.once('error', reject)
    process.kill(pid, 'SIGUSR2')
  })
}
