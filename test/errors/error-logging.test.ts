/**
 * What a failed request writes besides its access line (error-handler.ts):
 * an upstream failure one warn line with undici's reason; admission's
 * routine 503s nothing more (one error line with a stack per refused
 * request once flooded the logs in an overload or an outage).
 */
import { once } from 'node:events'
import { createServer as createHttpServer } from 'node:http'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import { listenForTest } from '../support/listen.js'
import { describe, expect, it } from 'vitest'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { until } from '../support/metrics.js'
import { vanishingBackend, vanishOnceConfirmed } from '../support/vanishing-backend.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

const gateway = (model: Record<string, unknown>) => cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', ...model }] })

function chat(gw: TestGateway, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    signal,
  })
}

/** Log lines other than access lines and the gateway's start-up and health chatter, once the access line is in. */
async function linesBesidesAccess(gw: TestGateway, status: number): Promise<Record<string, unknown>[]> {
  await until(() => gw.logLines().some((l) => l.msg === 'request completed' && l.status === status), `the ${status} access line`)
  return gw.logLines().filter((l) => l.request_id !== undefined && l.msg !== 'request completed')
}

/** The chat route's access lines (the /metrics scrapes that waited for a backend write their own). */
const chatAccessLines = (gw: TestGateway) => gw.logLines().filter((l) => l.msg === 'request completed' && l.route === 'chat')

/** Two backends in round robin, one retry, checked once (a minute apart): only traffic changes their health. */
const roundRobinPair = (...backends: readonly (readonly [name: string, url: string])[]) =>
  gateway({ retries: 1, balance: 'round_robin', health: { interval_ms: 60_000 }, backends: backends.map(([name, url]) => ({ url, name })) })

describe('logging of failed requests', () => {
  it('an unreachable backend: one warn line naming the code and undici\'s reason, no error line', async () => {
    const gone = await vanishingBackend(cleanups)
    const gw = await gateway({ retries: 0, health: { interval_ms: 60_000 }, backends: [{ url: gone.url, name: 'gone' }] })
    await vanishOnceConfirmed(gw.url, 'm', { gone })

    const answer = await chat(gw)
    expect(answer.status).toBe(502)

    const lines = await linesBesidesAccess(gw, 502)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: 40, error_code: 'upstream_unreachable', cause: expect.stringContaining('ECONNREFUSED') as unknown as string })
    expect(lines[0]).not.toHaveProperty('err')
    // The access line names the backend that failed: the message text is not where an operator filters.
    expect(chatAccessLines(gw)[0]).toMatchObject({ status: 502, backend: 'gone' })
  })

  it('a failed attempt retried on another backend: the 200 access line names the one that answered', async () => {
    const alive = await cleanups.standIn()
    const gone = await vanishingBackend(cleanups)
    const gw = await roundRobinPair(['gone', gone.url], ['alive', alive.url])
    await vanishOnceConfirmed(gw.url, 'm', { gone })
    for (let i = 0; i < 2; i++) expect((await chat(gw)).status).toBe(200)
    await until(() => chatAccessLines(gw).length === 2, 'two access lines')
    // One of the two met the vanished backend first (which one depends on where round robin starts).
    expect(chatAccessLines(gw).map((l) => l.backend)).toEqual(['alive', 'alive'])
    expect(chatAccessLines(gw).map((l) => l.retries as number).sort()).toEqual([0, 1])
  })

  // Regression (observability audit): retries, backend and queue wait were written to the line
  // only with an answer; a request ending before one said retries 0, backend null.
  it('every backend failing: the 502 line names the last backend tried, counts the retry and has its queue wait', async () => {
    const first = await vanishingBackend(cleanups)
    const second = await vanishingBackend(cleanups)
    const gw = await roundRobinPair(['first', first.url], ['second', second.url])
    await vanishOnceConfirmed(gw.url, 'm', { first, second })
    expect((await chat(gw)).status).toBe(502)
    await until(() => chatAccessLines(gw).length === 1, 'the access line')
    const line = chatAccessLines(gw)[0]!
    expect(line).toMatchObject({ status: 502, backend: 'second', retries: 1, error_code: 'upstream_unreachable' })
    expect(typeof line.queue_wait_ms).toBe('number')
    // Its warn line names the backend in fields too (a log review, session 24: only the message did).
    const warned = gw.logLines().filter((l) => l.level === 40 && l.error_code === 'upstream_unreachable')
    expect(warned).toEqual([expect.objectContaining({ model: 'm', backend: 'second', request_id: line.request_id })])
  })

  it('a client leaving while its request is at the backend: the 499 line names that backend and the queue wait', async () => {
    const held = await cleanups.standIn({ hold: true })
    const gw = await gateway({ backends: [{ url: held.url, name: 'b' }] })
    const leaving = new AbortController()
    const asked = chat(gw, leaving.signal)
    await once(held.events, 'held')
    leaving.abort()
    await expect(asked).rejects.toThrow()

    await until(() => gw.logLines().some((l) => l.msg === 'request completed'), 'the access line')
    const line = gw.logLines().find((l) => l.msg === 'request completed')!
    expect(line).toMatchObject({ status: 499, backend: 'b', retries: 0 })
    expect(typeof line.queue_wait_ms).toBe('number')
  })

  // Regression (operator audit): the mid-answer warn lines carried the whole error object, a
  // dozen lines of undici stack, where the others carry the code and undici's reason.
  it('a backend or upstream failing mid-answer: one warn line with the code and the cause, no stack', async () => {
    const dying = createHttpServer((req, res) => {
      req.resume()
      if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
      res.writeHead(200, { 'content-type': req.url === '/obj/read' ? 'application/octet-stream' : 'text/event-stream' })
      res.write(req.url === '/obj/read' ? 'partial' : 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n', () => res.socket?.destroy())
    })
    const url = await listenForTest(dying, cleanups)
    const users = [{ username: 'alice', password_scrypt: await hashPassword('pw'), scopes: ['objects'] }]
    const gw = await cleanups.gateway({ auth: { keys: [key.entry], users }, models: [{ name: 'm', backends: [{ url, name: 'dying' }] }], upstreams: { objects: { url } } })

    const stream = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    })
    await stream.text()
    const object = await fetch(`${gw.url}/obj/read`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: 'p', object_id: 'o', digest: 'latest' }),
    })
    await object.text().catch(() => undefined)

    await until(() => gw.logLines().filter((l) => l.msg === 'backend failed mid-stream' || l.msg === 'upstream failed mid-body').length === 2, 'both warn lines')
    for (const line of gw.logLines().filter((l) => l.msg === 'backend failed mid-stream' || l.msg === 'upstream failed mid-body')) {
      expect(line).toMatchObject({ level: 40, error_code: expect.stringMatching(/^upstream_/) as unknown as string, cause: expect.any(String) as unknown as string })
      expect(line).not.toHaveProperty('err')
      expect(line).toMatchObject(line.msg === 'backend failed mid-stream' ? { model: 'm', backend: 'dying' } : { model: '', backend: 'objects' })
    }
  })

  it('a queue_timeout 503 writes nothing besides its access line', async () => {
    const held = await cleanups.standIn({ hold: true })
    const gw = await gateway({ max_concurrency_per_backend: 1, queue: { max_wait_ms: 50 }, backends: [{ url: held.url, name: 'b' }] })
    const first = chat(gw)
    await once(held.events, 'held')

    const second = await chat(gw)
    expect(second.status).toBe(503)
    expect(await linesBesidesAccess(gw, 503)).toEqual([])
    expect(gw.logLines().filter((l) => (l.level as number) >= 50)).toEqual([])

    held.releaseHeld(1)
    expect((await first).status).toBe(200)
  })
})
