/**
 * A key's limits (DESIGN.md: "limits: per key") count its training and
 * checkpoint calls as they count its chat requests: a real gateway on port 0
 * in front of recording upstreams on port 0.
 */
import { once } from 'node:events'
import type { ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { RecordingServer, type RecordedRequest } from '../../src/dev/recording-server.js'
import { trackedAfterEach } from '../support/tracked.js'
import { makeKey, type TestGateway } from '../support/gateway.js'

const cleanups = trackedAfterEach()
const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const JOB = JSON.stringify({ model_id: MODEL, trajectory_groups: [] })
const MODELS = [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }]

/** An upstream for both platform routes; `hold` keeps answers back until the test ends them. */
async function upstream(hold = false): Promise<{ server: RecordingServer; waiting: ServerResponse[] }> {
  const waiting: ServerResponse[] = []
  const server = new RecordingServer((_request, res) => {
    if (hold) {
      waiting.push(res)
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"id":"job-1"}')
  })
  await server.listen()
  cleanups.push(() => server.close())
  return { server, waiting }
}

async function gatewayFor(url: string, limits: Record<string, number>): Promise<{ gw: TestGateway; authorization: string }> {
  const key = makeKey('limited', ['training', 'checkpoints'], { limits })
  const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: MODELS, upstreams: { training: { url }, checkpoints: { url } } })
  return { gw, authorization: `Bearer ${key.token}` }
}

function submitJob(gw: TestGateway, authorization: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}/v1/preview/training-jobs`, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: JOB, signal })
}

function listCheckpoints(gw: TestGateway, authorization: string): Promise<Response> {
  return fetch(`${gw.url}/v1/preview/models/${MODEL}/checkpoints`, { headers: { authorization } })
}

async function expectRefused(response: Response, code: string): Promise<void> {
  expect(response.status).toBe(429)
  expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(await response.json()).toEqual({ error: { message: expect.any(String), type: 'rate_limit_error', param: null, code } })
}

/** The next call reaches the upstream (rather than coming back refused), and its answer gets through. */
async function expectAdmitted(gw: TestGateway, authorization: string, server: RecordingServer, waiting: ServerResponse[]): Promise<void> {
  const next = submitJob(gw, authorization)
  const outcome = await Promise.race([once(server.events, 'request').then(() => 'reached the upstream'), next.then((response) => `answered ${response.status}`)])
  expect(outcome).toBe('reached the upstream')
  waiting.at(-1)!.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"job-2"}')
  expect((await next).status).toBe(200)
}

describe("a key's limits on the platform routes", () => {
  it('requests_per_minute counts training and checkpoint calls together; the refused one never reaches the upstream', async () => {
    const { server } = await upstream()
    const { gw, authorization } = await gatewayFor(server.url, { requests_per_minute: 2 })

    expect((await submitJob(gw, authorization)).status).toBe(200)
    expect((await listCheckpoints(gw, authorization)).status).toBe(200)
    await expectRefused(await submitJob(gw, authorization), 'rate_limit_requests')

    expect(server.received).toHaveLength(2)
  })

  it('max_concurrency counts calls in flight, and a finished call gives its share back', async () => {
    const { server, waiting } = await upstream(true)
    const { gw, authorization } = await gatewayFor(server.url, { max_concurrency: 1 })

    const arrived = once(server.events, 'request')
    const first = submitJob(gw, authorization)
    await arrived
    await expectRefused(await listCheckpoints(gw, authorization), 'concurrency')

    waiting[0]!.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"job-1"}')
    expect((await first).status).toBe(200)
    await expectAdmitted(gw, authorization, server, waiting)
  })

  it('a client that leaves mid-call gives its share back', async () => {
    const { server, waiting } = await upstream(true)
    const { gw, authorization } = await gatewayFor(server.url, { max_concurrency: 1 })

    const client = new AbortController()
    const arrived = once(server.events, 'request')
    const abandoned = submitJob(gw, authorization, client.signal).catch((error: unknown) => error)
    await arrived
    // The gateway gives the share back when the client's response closes, then aborts the upstream call.
    const upstreamAborted = once(server.events, 'client-closed') as Promise<[RecordedRequest]>
    client.abort()
    await abandoned
    await upstreamAborted

    await expectAdmitted(gw, authorization, server, waiting)
  })
})
