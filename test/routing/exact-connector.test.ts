/**
 * The connect timeout against a host that never completes the handshake: a
 * listener in another process that never accepts, with its accept queue
 * filled, so the kernel drops further SYNs as a powered-off host or a
 * dropping firewall would.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { errors, Pool } from 'undici'
import { describe, expect, it, vi } from 'vitest'
import { classifyUpstreamFailure } from '../../src/errors/upstream-errors.js'
import { exactConnector } from '../../src/routing/exact-connector.js'
import { cleanupsAfterEach } from '../support/cleanups.js'

const cleanups = cleanupsAfterEach()

/** Listens with a backlog of 1 and blocks its event loop, so nothing is ever accepted. */
const NEVER_ACCEPTS = `const s = require('node:net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
  console.log(s.address().port)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)
})`

/** A port whose connections hang in the handshake. */
async function hangingPort(): Promise<number> {
  const child = spawn(process.execPath, ['-e', NEVER_ACCEPTS], { stdio: ['ignore', 'pipe', 'inherit'] })
  cleanups.push(() => child.kill('SIGKILL'))
  const [line] = (await once(child.stdout, 'data')) as [Buffer]
  const port = Number(line.toString().trim())
  // Backlog 1 queues two completed handshakes; every later SYN is dropped.
  for (let i = 0; i < 2; i++) {
    const filler = connect(port, '127.0.0.1')
    cleanups.push(() => filler.destroy())
    await once(filler, 'connect')
  }
  return port
}

describe('exactConnector', () => {
  it('gives up on a handshake that does not complete at connect_ms by its own timer, not on undici’s half-second tick', async () => {
    const port = await hangingPort()
    const pool = new Pool(`http://127.0.0.1:${port}`, { connect: exactConnector(50) })
    cleanups.push(() => pool.destroy())
    // undici's own connect timer (the backstop, which cannot fire before its first 499 ms
    // tick) raises the same error class, so the failure alone cannot tell them apart; only
    // exactConnector's builds it through undici's exports, which the spy sees.
    const ours = vi.spyOn(errors, 'ConnectTimeoutError')
    cleanups.push(() => ours.mockRestore())

    const started = performance.now()
    const error: unknown = await pool.request({ path: '/', method: 'GET' }).then(
      () => null,
      (failure: unknown) => failure,
    )
    const elapsed = performance.now() - started

    expect(error).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' })
    expect(classifyUpstreamFailure(error)).toBe('connect')
    expect(elapsed).toBeGreaterThanOrEqual(49)
    expect(ours).toHaveBeenCalledTimes(1)
    expect(error).toBe(ours.mock.instances[0])
  })
})
