/**
 * Token usage through real HTTP (DESIGN.md chat path step 4): the gateway
 * asks a stream for `include_usage` on the client's behalf and hides what that
 * adds, counts every answer's tokens in /metrics under the key's id, and logs
 * them on the access log line.
 */
import { describe, expect, it } from 'vitest'
import type { VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { metricValue, scrape, until } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('team-a', ['chat'])
const other = makeKey('team-b', ['chat'])
const cleanups = trackedAfterEach()

function gateway(backend: VllmStandIn): Promise<TestGateway> {
  return cleanups.gateway({
    server: { shutdown_grace_ms: 1000 },
    auth: { keys: [key.entry, other.entry] },
    models: [{ name: 'm', served_name: 'stand-in-model', backends: [{ url: backend.url, name: 'b1' }] }],
  })
}

/** 'Hello there' is 11 characters: the stand-in counts ceil(11 / 4) = 3 prompt tokens. */
const messages = [{ role: 'user', content: 'Hello there' }]
const PROMPT_TOKENS = 3

function viaGateway(gw: TestGateway, body: Record<string, unknown>, requestId: string, as: TestKey = key): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as.token}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'm', messages, ...body }),
  })
}

/** The same request sent straight to the stand-in, as a client would without the gateway. */
function direct(backend: VllmStandIn, body: Record<string, unknown>, requestId: string): Promise<Response> {
  return fetch(`${backend.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'stand-in-model', messages, ...body }),
  })
}

/** `created` is the second the answer was made: the only byte that may differ between two runs. */
const withoutCreated = (text: string) => text.replace(/"created":\d+/g, '"created":0')

/** Polls /metrics (bounded) until every listed token series has its expected value, then returns them all; the last seen if they never do. */
async function tokenSeries(gw: TestGateway, expected: Record<string, number>): Promise<Record<string, number | undefined>> {
  let seen: Record<string, number | undefined> = {}
  const matches = async () => {
    const text = await scrape(gw.url)
    seen = {}
    for (const series of Object.keys(expected)) {
      const [keyId, kind] = series.split('/') as [string, string]
      seen[series] = metricValue(text, 'sluice_tokens_total', { model: 'm', key: keyId, kind })
    }
    return Object.entries(expected).every(([series, value]) => seen[series] === value)
  }
  // Timing out is not the failure to report: the caller's comparison shows what differs.
  await until(matches, 'the token series').catch(() => undefined)
  return seen
}

/** The access log line of one request, once written (when the response closes; no event tells the test): bounded poll. */
async function accessLine(gw: TestGateway, requestId: string): Promise<Record<string, unknown> | undefined> {
  const find = () => gw.logLines().find((l) => l.msg === 'request completed' && l.request_id === requestId)
  await until(() => find() !== undefined, `the access line of ${requestId}`).catch(() => undefined)
  return find()
}

function dataEvents(text: string): string[] {
  return text.split(/\r?\n\r?\n/).filter((e) => e.startsWith('data: '))
}

describe('a stream whose client did not ask for usage', () => {
  for (const [name, extra] of [
    ['without stream_options', {}],
    ['with include_usage: false', { stream_options: { include_usage: false } }],
    // Regression (vLLM review): vLLM's include_usage default became false in March 2026; `{}` was
    // forwarded as it came, a current backend sent no usage and the stream was charged an estimate.
    ['with stream_options {}', { stream_options: {} }],
    ['with continuous_usage_stats alone', { stream_options: { continuous_usage_stats: true } }],
  ] as const) {
    it(`${name}: the gateway asks for usage and the client gets exactly what the backend would have sent`, async () => {
      const backend = await cleanups.standIn({ tokens: 4 })
      const gw = await gateway(backend)
      const body = { stream: true, ...extra }

      const expected = await (await direct(backend, body, 'same-id')).text()
      const response = await viaGateway(gw, body, 'same-id')
      const text = await response.text()

      expect(response.status).toBe(200)
      const forwarded = backend.received[1]?.body as { stream_options?: { include_usage?: unknown } }
      expect(forwarded.stream_options?.include_usage).toBe(true)
      expect(text).not.toContain('"choices":[]')
      expect(text).not.toContain('"usage"')
      expect(expected).not.toContain('"usage"')
      expect(withoutCreated(text)).toBe(withoutCreated(expected))
      expect(dataEvents(text).at(-1)).toBe('data: [DONE]')
    })
  }
})

describe('a stream whose client asked for usage', () => {
  it('gets the usage chunk and the usage members unchanged', async () => {
    const backend = await cleanups.standIn({ tokens: 4 })
    const gw = await gateway(backend)
    const body = { stream: true, stream_options: { include_usage: true } }

    const expected = await (await direct(backend, body, 'same-id')).text()
    const text = await (await viaGateway(gw, body, 'same-id')).text()

    expect(withoutCreated(text)).toBe(withoutCreated(expected))
    const usageChunks = dataEvents(text).filter((e) => e.includes('"choices":[]'))
    expect(usageChunks).toHaveLength(1)
    expect(JSON.parse(usageChunks[0]!.slice('data: '.length)).usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: 4, total_tokens: PROMPT_TOKENS + 4 })
    expect(text).toContain('"usage":null')
  })
})

describe('token accounting', () => {
  it('counts prompt and completion tokens of whole and streamed answers in sluice_tokens_total, by key id', async () => {
    const backend = await cleanups.standIn({ tokens: 5 })
    const gw = await gateway(backend)

    const whole = (await (await viaGateway(gw, {}, 'whole')).json()) as { usage: { completion_tokens: number } }
    expect(whole.usage.completion_tokens).toBe(5)
    await (await viaGateway(gw, { stream: true, max_tokens: 3 }, 'stream-hidden-usage')).text()
    await (await viaGateway(gw, { stream: true, stream_options: { include_usage: true }, max_tokens: 4 }, 'stream-usage')).text()
    await (await viaGateway(gw, { max_tokens: 2 }, 'other-key', other)).text()

    const expected = {
      'team-a/prompt': 3 * PROMPT_TOKENS,
      'team-a/completion': 5 + 3 + 4,
      'team-b/prompt': PROMPT_TOKENS,
      'team-b/completion': 2,
    }
    expect(await tokenSeries(gw, expected)).toEqual(expected)
  })

  it('writes the tokens on the access log line of whole and streamed answers', async () => {
    const backend = await cleanups.standIn({ tokens: 6 })
    const gw = await gateway(backend)

    await (await viaGateway(gw, {}, 'log-whole')).text()
    await (await viaGateway(gw, { stream: true }, 'log-stream')).text()

    const whole = await accessLine(gw, 'log-whole')
    const stream = await accessLine(gw, 'log-stream')
    expect(whole).toMatchObject({ status: 200, principal: 'team-a', model: 'm', backend: 'b1', prompt_tokens: PROMPT_TOKENS, completion_tokens: 6 })
    expect(stream).toMatchObject({ status: 200, principal: 'team-a', model: 'm', backend: 'b1', prompt_tokens: PROMPT_TOKENS, completion_tokens: 6 })
    expect(gw.logText()).not.toContain(key.token)
  })
})
