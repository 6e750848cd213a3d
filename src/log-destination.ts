/**
 * Where the gateway's log lines go when it runs as a service: stdout,
 * written asynchronously. pino's default is one synchronous write(2) per
 * line; with one access line per request the gateway used ~145 µs of CPU
 * per request that way on the bench machine, ~118 µs written this way
 * (lines logged while a write is in flight go out together in the next
 * one), ~100 µs with no access log at all.
 *
 * What that gives up: lines still buffered are written when the process
 * exits (a drain, a crash or process.exit keep them); only a SIGKILL or a
 * lost machine loses them. The buffer is bounded: when stdout does not keep
 * up and `maxBufferedBytes` wait already, further lines are dropped rather
 * than memory growing without end, and the drops are reported on stderr (at
 * most once per `reportEveryMs`).
 *
 * Logging must never hold the gateway: when stdout is gone for good (EPIPE,
 * a log sidecar that died, `| head`), logging stops and the gateway serves
 * on; at exit, a reader that takes no more gets a bounded wait. The stream
 * is sonic-boom 5's, not pino.destination's (sonic-boom 4): its flush at
 * exit retried a broken pipe forever, so the process never exited and
 * ignored every further signal.
 */
import type { DestinationStream } from 'pino'
import sonicBoom from 'sonic-boom'

// A CommonJS module whose named exports Node's ESM loader cannot see.
const { SonicBoom } = sonicBoom
type SonicBoom = InstanceType<typeof SonicBoom>

export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024
/** Retries of a full pipe in the flush at exit, 100 ms each: a stuck reader delays the exit by 2 s at most. */
const EXIT_FLUSH_RETRIES = 20

/** The destination, and a way to wait until what was logged is out. */
export type LogDestination = DestinationStream & { flush(cb?: (error?: Error) => void): void }

export interface LogDestinationOptions {
  readonly fd?: number
  readonly maxBufferedBytes?: number
  readonly reportEveryMs?: number
  /** Where drop reports go (a line of JSON each). [process.stderr] */
  readonly report?: (line: string) => void
  readonly now?: () => number
}

export function asyncStdout(options: LogDestinationOptions = {}): LogDestination {
  const { fd = 1, maxBufferedBytes = MAX_BUFFERED_BYTES, reportEveryMs = 10_000, now = Date.now } = options
  const report = options.report ?? ((line: string) => process.stderr.write(line))
  let exiting = false
  let exitRetries = 0
  // While serving, a full pipe is waited out (lines beyond the bound are dropped); at exit, only so long.
  const retryEAGAIN = () => !exiting || ++exitRetries <= EXIT_FLUSH_RETRIES
  const destination = new SonicBoom({ fd, sync: false, maxLength: maxBufferedBytes, retryEAGAIN })
  destination.on('error', (error: NodeJS.ErrnoException) => {
    stopWriting(destination)
    // Nobody reads a broken pipe's report; any other failure is worth one line.
    if (error.code !== 'EPIPE') report(`${JSON.stringify({ level: 50, time: now(), service: 'sluice', err: { code: error.code, message: error.message }, msg: 'log output failed: no more log lines will be written' })}\n`)
  })
  process.once('exit', () => {
    exiting = true
    try {
      destination.flushSync()
    } catch {
      // Gone, or stuck past the bound: what is still buffered is lost, the exit is not.
    }
  })
  let dropped = 0
  let reportedAt = Number.NEGATIVE_INFINITY
  destination.on('drop', () => {
    dropped++
    const at = now()
    if (at - reportedAt < reportEveryMs) return
    reportedAt = at
    report(`${JSON.stringify({ level: 40, time: at, service: 'sluice', dropped_lines: dropped, msg: 'log lines dropped: stdout is not keeping up' })}\n`)
  })
  return destination
}

/**
 * Resolves once every line logged so far has been written, or after
 * `withinMs` (a reader that takes no more must not hold the exit). Awaited
 * before process.exit: the flush at exit writes synchronously, and a write
 * still in flight on a worker thread (stdout a pipe that was full) would
 * land after it, the last lines before the exit first and earlier ones
 * after them (a flaky lifecycle test showed it).
 */
export function written(destination: LogDestination, withinMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, withinMs)
    timer.unref()
    destination.flush(() => {
      clearTimeout(timer)
      resolve()
    })
  })
}

/** After a write failed for good: every later line is discarded at once. */
function stopWriting(destination: SonicBoom): void {
  destination.write = () => true
  destination.flushSync = () => undefined
  destination.flush = (cb?: (error?: Error) => void) => cb?.()
}
