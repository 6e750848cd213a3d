// Loaded into a target with `node --import` by bench/stalls.mjs: a timer
// asks to run every millisecond, and each time it runs late by more than
// STALL_MS the probe records how long the gap was and what the main thread
// did in it, from the kernel's scheduler statistics for this thread
// (/proc/thread-self/schedstat: nanoseconds on a CPU, nanoseconds runnable
// but waiting in a run queue). What is neither is time the thread was not
// runnable although its timer was due: the VM's vCPU not running (steal)
// and timer slack. Steps (lib/signal-steps.mjs): 0. start; 1. stop, the stalls.
import { readFileSync } from 'node:fs'
import { serveSteps } from './signal-steps.mjs'

const STALL_MS = 3
const TICK_MS = 1

function schedstat() {
  const [onCpu, queued] = readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')
  return { onCpu: Number(onCpu) / 1e6, queued: Number(queued) / 1e6 }
}

let recording = false
let stalls = []
let lastAt = performance.now()
let last = schedstat()

function tick() {
  const at = performance.now()
  const now = schedstat()
  if (recording && at - lastAt > STALL_MS) stalls.push({ gap_ms: at - lastAt, running_ms: now.onCpu - last.onCpu, queued_ms: now.queued - last.queued })
  lastAt = at
  last = now
  // Unref: the probe never keeps a target from exiting.
  setTimeout(tick, TICK_MS).unref()
}
tick()

serveSteps([
  () => {
    recording = true
    stalls = []
    return ''
  },
  () => {
    recording = false
    return JSON.stringify(stalls)
  },
])
