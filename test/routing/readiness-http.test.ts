/**
 * Readiness and `sluice_backend_up` end to end: a backend counts only once a
 * check (or an answer) has shown it healthy, and a reload keeps what the
 * serving generation's checks found (same model, backend name and URL). Real
 * gateways on port 0; a dead backend is a closed port; a "gated" backend
 * holds its /health answers until the test releases them, so the order of
 * check and assertion is fixed by events, not by timing.
 */
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { configFrom, makeKey, type TestGateway } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { scrapeMetric, until } from '../support/metrics.js'

const key = makeKey('ops', ['chat'])
const cleanups = trackedAfterEach()

function gatewayConfig(url: string, health: Record<string, unknown>): Record<string, unknown> {
  return { auth: { keys: [key.entry] }, models: [{ name: 'm', health, backends: [{ url, name: 'b1' }] }] }
}

/** DESIGN.md's error object, which every error body carries, the 503 of /readyz included. */
const NOT_READY_M = {
  error: { message: 'Not ready: no healthy backend for model "m".', type: 'service_unavailable', param: null, code: 'not_ready' },
}

async function readyz(gw: TestGateway): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${gw.url}/readyz`)
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

const backendUp = (gw: TestGateway) => scrapeMetric(gw.url, 'sluice_backend_up', { model: 'm', backend: 'b1' })

async function chat(gw: TestGateway): Promise<{ status: number; code: string | undefined }> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
  const body = (await response.json()) as { error?: { code?: string } }
  return { status: response.status, code: body.error?.code }
}

/** A loopback port nothing listens on (opened, then closed). */
async function closedPortUrl(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}`
}

interface GatedBackend {
  readonly url: string
  /** /health requests received so far (answered or held). */
  healthRequests(): number
  /** Answers the oldest held /health request 200. */
  release(): void
}

/** A backend whose /health answers wait for `release()`; anything else is 404 at once. */
async function gatedBackend(): Promise<GatedBackend> {
  const held: ServerResponse[] = []
  let received = 0
  const server = createServer((req, res) => {
    req.resume()
    if (req.method === 'GET' && req.url === '/health') {
      received++
      held.push(res)
      return
    }
    res.writeHead(404, { 'content-length': 0 }).end()
  })
  const url = await listenForTest(server, cleanups)
  return {
    url,
    healthRequests: () => received,
    release: () => void held.shift()?.writeHead(200, { 'content-length': 0 }).end(),
  }
}

describe('readiness before the first check', () => {
  it('a backend nothing has reached is not ready and not up from the first scrape', async () => {
    const gw = await cleanups.gateway(gatewayConfig(await closedPortUrl(), { interval_ms: 100 }))

    expect(await readyz(gw)).toEqual({ status: 503, body: { status: 'not_ready', models_without_healthy_backend: ['m'], ...NOT_READY_M } })
    expect(await backendUp(gw)).toBe(0)
  })

  it('turns ready, and the backend up, once the first check passed — not before', async () => {
    const backend = await gatedBackend()
    const gw = await cleanups.gateway(gatewayConfig(backend.url, { interval_ms: 60_000 }))
    await until(() => backend.healthRequests() === 1, 'the first health check to arrive')

    expect((await readyz(gw)).status).toBe(503)
    expect(await backendUp(gw)).toBe(0)

    backend.release()
    await until(async () => (await readyz(gw)).status === 200, '/readyz 200 after the check passed')
    expect(await backendUp(gw)).toBe(1)
  })

  it('a backend whose first check failed takes no request: chat gets 503 no_healthy_backend, not a 502', async () => {
    // unhealthy_after 3 and one check a minute: only the rule for a backend never seen healthy can take it down.
    const gw = await cleanups.gateway(gatewayConfig(await closedPortUrl(), { interval_ms: 60_000, unhealthy_after: 3 }))
    await until(() => gw.logLines().some((line) => line.msg === 'backend down'), 'the first failed check to take the backend down', 5000)

    expect(await chat(gw)).toEqual({ status: 503, code: 'no_healthy_backend' })
    expect((await readyz(gw)).status).toBe(503)
  })
})

describe('readiness across a reload', () => {
  it('a dead backend stays not ready, and chat gets 503 no_healthy_backend, right after a reload', async () => {
    // Two failed checks mark it down; the new generation's own first check fails at once but is only one.
    const object = gatewayConfig(await closedPortUrl(), { interval_ms: 250, unhealthy_after: 2 })
    const gw = await cleanups.gateway(object)
    await until(() => gw.logLines().some((line) => line.msg === 'backend down'), 'the backend to be marked down', 5000)

    await gw.reload(configFrom({ ...object, server: { port: 0 } }))

    expect(await readyz(gw)).toEqual({ status: 503, body: { status: 'not_ready', models_without_healthy_backend: ['m'], ...NOT_READY_M } })
    expect(await backendUp(gw)).toBe(0)
    expect(await chat(gw)).toEqual({ status: 503, code: 'no_healthy_backend' })
  })

  it('a backend checks confirmed stays ready and up while the new generation’s first check is pending', async () => {
    const backend = await gatedBackend()
    const object = gatewayConfig(backend.url, { interval_ms: 60_000 })
    const gw = await cleanups.gateway(object)
    await until(() => backend.healthRequests() === 1, 'the first health check to arrive')
    backend.release()
    await until(async () => (await readyz(gw)).status === 200, '/readyz 200 after the check passed')

    await gw.reload(configFrom({ ...object, server: { port: 0 } }))
    await until(() => backend.healthRequests() === 2, 'the new generation’s first check to arrive (held)')

    expect((await readyz(gw)).status).toBe(200)
    expect(await backendUp(gw)).toBe(1)
  })
})
