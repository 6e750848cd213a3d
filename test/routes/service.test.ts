import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { notReadyMessage } from '../../src/routes/service.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { until } from '../support/metrics.js'
import { expectErrorBody, rawExchange } from '../support/raw-http.js'

const key = makeKey('ops', ['chat'])
let backend: VllmStandIn
let gw: TestGateway

beforeAll(async () => {
  backend = await startVllmStandIn({ tokens: 3 })
  gw = await startTestGateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url, name: 'gpu-a' }] }] })
})

afterAll(async () => {
  await gw.shutdown()
  await backend.close()
})

async function metricsText(): Promise<string> {
  const response = await fetch(`${gw.url}/metrics`)
  expect(response.headers.get('content-type')).toMatch(/^text\/plain/)
  return response.text()
}

describe('operator endpoints', () => {
  it('GET /healthz answers without credentials', async () => {
    const response = await fetch(`${gw.url}/healthz`)
    expect(response.status).toBe(200)
  })

  // Probes are never refused for a header: an invalid request id is replaced there (README, *Request ids*).
  it.each(['/healthz', '/metrics'])('GET %s with an invalid X-Request-Id answers 200 under a new id', async (path) => {
    const response = await fetch(`${gw.url}${path}`, { headers: { 'x-request-id': 'bad id' } })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
  })

  it('GET /readyz is 200 once every model has a backend its health check passed', async () => {
    // The first check runs at start; until it passes nothing has shown the backend healthy.
    await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, '/readyz 200')
    const response = await fetch(`${gw.url}/readyz`)
    expect(await response.json()).toEqual({ status: 'ready', models_without_healthy_backend: [] })
  })

  it('unknown paths get 404 in the error shape', async () => {
    const response = await fetch(`${gw.url}/v1/nothing-here`)
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ error: { message: expect.any(String), type: 'not_found_error', param: null, code: 'not_found' } })
  })

  // A 404, as DESIGN.md's table has no 405, but one that says what the path is served for.
  it.each([
    ['GET', '/v1/chat/completions', 'POST'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['DELETE', '/v1/models', 'GET, HEAD'],
  ])('%s %s (a known path, another method): 404 with Allow: %s, and the message says so', async (method, path, allow) => {
    const response = await fetch(`${gw.url}${path}`, { method, headers: { authorization: `Bearer ${key.token}` } })
    expect(response.status).toBe(404)
    expect(response.headers.get('allow')).toBe(allow)
    const { error } = (await response.json()) as { error: { message: string; code: string } }
    expect(error).toMatchObject({ code: 'not_found', message: `No route for ${method} ${path}: it is served for ${allow}.` })
  })

  // Regression (HTTP review): `GET file:///healthz` was told "it is served for HEAD".
  it.each([
    ['GET', 'file:///healthz'],
    ['POST', 'x://y/v1/chat/completions'],
  ])('%s %s (a served path and method, in a target form no route takes): 404 that says so, no Allow', async (method, target) => {
    const exchange = await rawExchange(gw.url, `${method} ${target} HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
    expect(exchange.responses[0]?.status).toBe(404)
    expect(exchange.responses[0]?.headers.allow).toBeUndefined()
    expect(expectErrorBody(exchange.responses[0]!).message).toMatch(/given as this target: send the path alone, or an http\(s\) URL\.$/)
  })

  it('an unknown path has no Allow header', async () => {
    const response = await fetch(`${gw.url}/v1/nope`, { method: 'POST' })
    expect(response.status).toBe(404)
    expect(response.headers.get('allow')).toBeNull()
  })

  it('/metrics counts requests by route, configured model and status, with no raw input in labels', async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key.token, maxRetries: 0 })
    await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] })
    await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bogus-model-name', messages: [{ role: 'user', content: 'x' }] }),
    })
    await fetch(`${gw.url}/some/bogus/path-xyz`)

    const text = await metricsText()
    expect(text).toMatch(/sluice_requests_total\{route="chat",model="m",status="200"\} 1/)
    expect(text).toMatch(/sluice_requests_total\{route="chat",model="",status="400"\} 1/)
    expect(text).toMatch(/sluice_request_duration_seconds_bucket\{le="[^"]+",route="chat",model="m"\}/)
    expect(text).toMatch(/sluice_inflight_requests\{model="m",backend="gpu-a"\} 0/)
    expect(text).toMatch(/process_cpu_seconds_total/)
    expect(text).not.toContain('bogus-model-name')
    expect(text).not.toContain('path-xyz')
    expect(text).not.toContain(key.token)
    // Memory mode: no Redis to be up, or to fall back from.
    expect(text).not.toContain('sluice_redis_')
  })
})

describe('server.metrics_port', () => {
  it('serves /metrics on its own listener and not on the public one', async () => {
    const separate = await startTestGateway({ server: { metrics_port: 0 }, auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })
    try {
      expect(separate.metricsUrl).not.toBeNull()
      const scraped = await fetch(`${separate.metricsUrl}/metrics`)
      expect(scraped.status).toBe(200)
      expect(await scraped.text()).toContain('sluice_requests_total')
      const publicAnswer = await fetch(`${separate.url}/metrics`)
      expect(publicAnswer.status).toBe(404)
      expect(((await publicAnswer.json()) as { error: { type: string } }).error.type).toBe('not_found_error')
      // As on the public port when it serves /metrics (session 23 review: both were 404 here).
      expect((await fetch(`${separate.metricsUrl}/metrics/`)).status).toBe(200)
      const head = await fetch(`${separate.metricsUrl}/metrics`, { method: 'HEAD' })
      expect([head.status, await head.text(), Number(head.headers.get('content-length'))]).toEqual([200, '', expect.any(Number)])
      expect((await fetch(`${separate.metricsUrl}/other`)).status).toBe(404)
    } finally {
      await separate.shutdown()
    }
  })
})

describe('notReadyMessage', () => {
  it('names every model without a healthy backend, and Redis when it is away', () => {
    expect(notReadyMessage(['a', 'b'], false)).toBe('Not ready: no healthy backend for model "a", "b".')
    expect(notReadyMessage([], true)).toBe('Not ready: Redis is unreachable (admission runs on local limits).')
    expect(notReadyMessage(['a'], true)).toBe('Not ready: no healthy backend for model "a"; Redis is unreachable (admission runs on local limits).')
  })
})
