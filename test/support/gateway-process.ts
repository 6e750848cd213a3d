/**
 * Runs the real entry point (`node dist/main.js --config FILE`) as a child
 * process, so signals (SIGHUP, SIGTERM) are tested the way an operator sends
 * them. Its JSON log lines are collected; the listening URL comes from the
 * 'sluice listening' line.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'

export interface GatewayProcess {
  readonly url: string
  readonly child: ChildProcess
  readonly lines: Record<string, unknown>[]
  /** Resolves with the first log line (already seen or to come) that matches. */
  waitForLine(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>
  /** Resolves with the exit code. */
  exited(): Promise<number | null>
  /** Resolves when stdout has ended: every line the process wrote has been read. */
  outputEnded(): Promise<void>
  /** What the process wrote to stderr so far. */
  stderr(): string
}

/** `onSpawn` sees the child before it is listening (to signal it while it starts). */
export async function startGatewayProcess(configFile: string, env: Record<string, string> = {}, onSpawn?: (child: ChildProcess) => void): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['dist/main.js', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  onSpawn?.(child)
  const lines: Record<string, unknown>[] = []
  // Listened for from the start, so an end that comes early is not missed.
  const outputEnd = once(child.stdout!, 'end').then(() => undefined)
  const waiters: { match: (line: Record<string, unknown>) => boolean; resolve: (line: Record<string, unknown>) => void }[] = []
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: Record<string, unknown>
    try {
      line = JSON.parse(text) as Record<string, unknown>
    } catch {
      return
    }
    lines.push(line)
    for (const waiter of [...waiters]) {
      if (waiter.match(line)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(line)
      }
    }
  })
  const exit = once(child, 'exit').then(([code]) => code as number | null)
  const waitForLine = (match: (line: Record<string, unknown>) => boolean) => {
    const seen = lines.find(match)
    if (seen !== undefined) return Promise.resolve(seen)
    return new Promise<Record<string, unknown>>((resolve) => waiters.push({ match, resolve }))
  }
  const ready = await Promise.race([
    waitForLine((line) => line.msg === 'sluice listening'),
    exit.then((code) => {
      throw new Error(`gateway exited with ${code} before listening: ${stderr}`)
    }),
  ])
  return { url: String(ready.url), child, lines, waitForLine, exited: () => exit, outputEnded: () => outputEnd, stderr: () => stderr }
}
