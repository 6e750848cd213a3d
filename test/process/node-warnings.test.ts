/**
 * Node's own warnings reach the log as JSON lines, not as plain text on
 * stderr that a log pipeline reading JSON would lose. The warning here is a
 * real one an operator meets: NODE_TLS_REJECT_UNAUTHORIZED=0 (for backends
 * with self-signed certificates) warns at the first TLS connection, which
 * the first health check of an https backend makes.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { startGatewayProcess } from '../support/gateway-process.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()

describe("Node's warnings", () => {
  // Regression: printed by Node as "(node:123) Warning: …" on stderr.
  it('are warn lines in the JSON log, and nothing is printed on stderr', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-warnings-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'gateway.yaml')
    // Port 9 (discard) is closed on loopback: the check fails, after its TLS connect began.
    await writeFile(file, stringify({ server: { port: 0 }, auth: { keys: [] }, models: [{ name: 'm', backends: [{ url: 'https://127.0.0.1:9' }] }] }))
    const gateway = await startGatewayProcess(file, { NODE_TLS_REJECT_UNAUTHORIZED: '0' })
    cleanups.push(async () => {
      if (gateway.child.exitCode === null) gateway.child.kill('SIGKILL')
      await gateway.exited()
    })

    const line = await gateway.waitForLine((l) => l.msg === 'Node.js warning')

    expect(line.level).toBe(40)
    expect(line.warning).toMatchObject({ name: 'Warning', message: expect.stringContaining('NODE_TLS_REJECT_UNAUTHORIZED') })
    gateway.child.kill('SIGTERM')
    expect(await gateway.exited()).toBe(0)
    expect(gateway.stderr()).toBe('')
  })
})
