/**
 * The asynchronous stdout destination (src/log-destination.ts) when stdout
 * does not keep up: a FIFO nobody reads stands in for a stuck log collector.
 */
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { DestinationStream } from 'pino'
import { describe, expect, it } from 'vitest'
import { asyncStdout, written } from '../../src/log-destination.js'
import { createLogger } from '../../src/logger.js'
import { cleanupsAfterEach } from '../support/cleanups.js'

const cleanups = cleanupsAfterEach()

/** Both ends of a FIFO, non-blocking: the write end fills after the pipe's 64 KiB unless the test reads. */
function stuckPipe(): { reader: number; writer: number } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-log-'))
  const path = join(dir, 'fifo')
  execFileSync('mkfifo', [path])
  const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
  const writer = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK)
  cleanups.push(() => {
    closeSync(reader)
    rmSync(dir, { recursive: true, force: true })
  })
  return { reader, writer }
}

/**
 * Closes a destination whose pipe may still be full. sonic-boom retries a
 * write that met EAGAIN on a timer; once the fd is closed that retry fails
 * with EBADF, which is expected here and must not surface as an uncaught error.
 */
function stop(destination: DestinationStream): void {
  const stream = destination as DestinationStream & { on(event: 'error', listener: () => void): void; destroy(): void }
  stream.on('error', () => undefined)
  stream.destroy()
}

describe('asyncStdout', () => {
  it('drops lines past its bound when the reader is stuck, and reports the drops at most once per interval', () => {
    const { writer } = stuckPipe()
    const reports: Record<string, unknown>[] = []
    let now = 0
    const destination = asyncStdout({ fd: writer, maxBufferedBytes: 256 * 1024, reportEveryMs: 10_000, report: (line) => reports.push(JSON.parse(line) as Record<string, unknown>), now: () => now })
    cleanups.push(() => stop(destination))
    const logger = createLogger('info', destination)
    const line = 'x'.repeat(200)
    for (let i = 0; i < 5000; i++) logger.info({ i, line }, 'request completed')

    expect(reports).toHaveLength(1)
    expect(reports[0]).toMatchObject({ level: 40, msg: 'log lines dropped: stdout is not keeping up' })
    const firstCount = reports[0]!.dropped_lines as number
    expect(firstCount).toBe(1)
    now = 10_000
    for (let i = 0; i < 10; i++) logger.info({ i, line }, 'request completed')
    expect(reports).toHaveLength(2)
    // Every line of the second burst was dropped too (the buffer is still full), and counted.
    expect(reports[1]!.dropped_lines).toBeGreaterThan(5000 - (256 * 1024) / line.length)
  })

  it('writes every line, in order, when the reader keeps up', async () => {
    const { reader, writer } = stuckPipe()
    const destination = asyncStdout({ fd: writer, report: () => expect.unreachable('nothing should be dropped') })
    cleanups.push(() => stop(destination))
    const logger = createLogger('info', destination)
    for (let i = 0; i < 100; i++) logger.info({ i }, 'request completed')
    let text = ''
    const buffer = Buffer.alloc(65536)
    while (text.split('\n').length <= 100) {
      // The destination writes asynchronously and the pipe does not block: read again after each event-loop turn.
      await new Promise<void>((resolve) => setImmediate(resolve))
      try {
        text += buffer.toString('utf8', 0, readSync(reader, buffer))
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error
      }
    }
    const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l) as { i: number })
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 100 }, (_, i) => i))
  })

  // A process logging to a reader that takes no more must still exit: the flush at exit waits ~2 s, not forever.
  it('a process whose stdout reader is stuck exits anyway, after a bounded wait', async () => {
    const { writer } = stuckPipe()
    const script = `
      const { asyncStdout } = await import(${JSON.stringify(resolve('dist/log-destination.js'))})
      const destination = asyncStdout({ fd: 3, report: () => undefined })
      for (let i = 0; i < 2000; i++) destination.write(JSON.stringify({ i, line: 'x'.repeat(200) }) + '\\n')
      setTimeout(() => process.exit(0), 50)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe', writer] })
    cleanups.push(() => void child.kill('SIGKILL'))
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const [code] = (await once(child, 'exit')) as [number | null]
    expect(code, stderr).toBe(0)
  }, 10_000)

  // The exit waits for this (src/cli/serve.ts): process.exit's synchronous flush could otherwise
  // overtake a write still in flight, and the lines before the exit came out of order.
  it('written() resolves once every line logged so far is out, not before', async () => {
    const { reader, writer } = stuckPipe()
    const destination = asyncStdout({ fd: writer, report: () => expect.unreachable('nothing should be dropped') })
    cleanups.push(() => stop(destination))
    const line = 'x'.repeat(200)
    // Well past the pipe's 64 KiB: most of it waits in the destination until the test reads.
    for (let i = 0; i < 2000; i++) destination.write(`${JSON.stringify({ i, line })}\n`)
    let out = false
    const waiting = written(destination, 60_000).then(() => (out = true))
    let bytes = 0
    const buffer = Buffer.alloc(65536)
    const readAvailable = (): void => {
      for (;;) {
        try {
          const n = readSync(reader, buffer)
          if (n === 0) return
          bytes += n
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return
          throw error
        }
      }
    }
    // Room for the destination one pipeful at a time, each after an event-loop turn.
    while (!out) {
      await new Promise<void>((resolve) => setImmediate(resolve))
      if (!out) readAvailable()
    }
    await waiting
    // Read without yielding: only what was in the pipe when written() resolved. Had it resolved
    // early, the rest would still be in the destination, which writes again only from the event loop.
    readAvailable()
    const expected = Array.from({ length: 2000 }, (_, i) => `${JSON.stringify({ i, line })}\n`).join('')
    expect(bytes).toBe(Buffer.byteLength(expected))
  }, 20_000)

  it('written() gives up after its bound when the reader takes no more', async () => {
    const { writer } = stuckPipe()
    const destination = asyncStdout({ fd: writer, report: () => undefined })
    cleanups.push(() => stop(destination))
    for (let i = 0; i < 2000; i++) destination.write(`${JSON.stringify({ i, line: 'x'.repeat(200) })}\n`)
    await written(destination, 100)
  })
})
