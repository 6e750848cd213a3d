/**
 * Where the gateway's log lines go when it runs as a service: stdout,
 * written asynchronously. pino's default is one synchronous write(2) per
 * line; with one access line per request the gateway used ~145 µs of CPU
 * per request that way on the bench machine, ~118 µs written this way
 * (lines logged while a write is in flight go out together in the next
 * one), ~100 µs with no access log at all.
 *
 * What that gives up: lines still buffered are written when the process
 * exits (pino flushes on 'exit', so a drain, a crash or process.exit keep
 * them); only a SIGKILL or a lost machine loses them. The buffer is bounded:
 * when stdout does not keep up and `maxBufferedBytes` wait already, further
 * lines are dropped rather than memory growing without end, and the drops
 * are reported on stderr (at most once per `reportEveryMs`).
 */
import { pino, type DestinationStream } from 'pino'

export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024

export interface LogDestinationOptions {
  readonly fd?: number
  readonly maxBufferedBytes?: number
  readonly reportEveryMs?: number
  /** Where drop reports go (a line of JSON each). [process.stderr] */
  readonly report?: (line: string) => void
  readonly now?: () => number
}

export function asyncStdout(options: LogDestinationOptions = {}): DestinationStream {
  const { fd = 1, maxBufferedBytes = MAX_BUFFERED_BYTES, reportEveryMs = 10_000, now = Date.now } = options
  const report = options.report ?? ((line: string) => process.stderr.write(line))
  const destination = pino.destination({ dest: fd, sync: false, maxLength: maxBufferedBytes })
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
