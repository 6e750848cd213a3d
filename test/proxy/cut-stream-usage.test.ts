/**
 * A stream that ends without reporting its usage is charged an estimate
 * (src/proxy/usage-estimate.ts): a client that reads nearly a whole answer
 * and leaves before the usage chunk must not spend nothing of its token
 * budget, and a backend that ignores `include_usage` is counted too. A raw
 * node:http backend on port 0 plays each stream out exactly.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { estimatedCompletionUsage, estimatedStreamUsage, promptCharacters } from '../../src/proxy/usage-estimate.js'
import { makeKey, type TestGateway, type TestKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { untilMetric } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const key = makeKey('team-a', ['chat'])
/** 40 characters: 10 prompt tokens by the estimate. */
const PROMPT = 'x'.repeat(40)

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'served-m', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`

interface StreamBackend {
  readonly url: string
  /** The chat request's upstream response closed (the gateway let go of it). */
  readonly closed: Promise<void>
}

/** Streams a role event and `tokens` content events; then ends with a finish event and [DONE] (no usage), or holds. */
async function streamBackend(tokens: number, then: 'end' | 'hold'): Promise<StreamBackend> {
  let closed!: () => void
  const backend = { url: '', closed: new Promise<void>((resolve) => (closed = resolve)) }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
    req.resume()
    req.on('end', () => {
      res.on('close', closed)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(chunk({ role: 'assistant', content: '' }))
      for (let i = 0; i < tokens; i++) res.write(chunk({ content: `tok${i} ` }))
      if (then === 'end') res.end(chunk({}, 'stop') + 'data: [DONE]\n\n')
    })
  })
  return Object.assign(backend, { url: await listenForTest(server, cleanups) })
}

function gateway(url: string, keys: readonly TestKey[] = [key]): Promise<TestGateway> {
  return cleanups.gateway({
    server: { shutdown_grace_ms: 200 },
    auth: { keys: keys.map((k) => k.entry) },
    models: [{ name: 'm', served_name: 'served-m', backends: [{ url, name: 'b' }] }],
  })
}

function stream(gw: TestGateway, as: TestKey, requestId: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as.token}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream: true }),
    signal,
  })
}

/** Reads the stream until `text` has arrived, then leaves. */
async function readUntilThenLeave(response: Response, text: string, controller: AbortController): Promise<void> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let seen = ''
  while (!seen.includes(text)) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`the stream ended before ${text}: ${seen}`)
    seen += decoder.decode(value, { stream: true })
  }
  controller.abort()
}

const tokenSeries = (kind: 'prompt' | 'completion') => ({ model: 'm', key: key.id, kind })

describe('the estimate', () => {
  it('counts the text of string contents, string parts and text parts, nothing else', () => {
    const messages = [
      { role: 'system', content: 'abcd' },
      { role: 'user', content: [{ type: 'text', text: 'efghij' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { image_url: 'https://example.com/a.png' }] },
      { role: 'user', content: ['klm'] },
      { role: 'assistant', content: null },
      { role: 'user' },
    ]
    expect(promptCharacters(messages)).toBe(13)
    expect(estimatedStreamUsage(messages, 5)).toEqual({ prompt: 4, completion: 4 })
  })

  // Newer vLLM names the reasoning `reasoning`; only `reasoning_content` was counted.
  it('counts the reasoning of a completion under either name, once', () => {
    const choice = (message: Record<string, unknown>) => [{ index: 0, message: { role: 'assistant', content: 'abcd', ...message } }]
    const user = [{ role: 'user', content: 'abcd' }]
    expect(estimatedCompletionUsage(user, choice({ reasoning: 'efghijkl' }))).toEqual({ prompt: 1, completion: 3 })
    expect(estimatedCompletionUsage(user, choice({ reasoning_content: 'efghijkl' }))).toEqual({ prompt: 1, completion: 3 })
    expect(estimatedCompletionUsage(user, choice({ reasoning: 'efghijkl', reasoning_content: 'efghijkl' }))).toEqual({ prompt: 1, completion: 3 })
  })

  it('charges no completion for a stream cut before any event', () => {
    expect(estimatedStreamUsage([{ role: 'user', content: PROMPT }], 0)).toEqual({ prompt: 10, completion: 0 })
  })
})

describe('a stream cut by its client before the usage chunk', () => {
  it('is charged the estimate: in sluice_tokens_total, on the access line, and against the key budget', async () => {
    const limited = makeKey('limited', ['chat'], { limits: { tokens_per_minute: 12 } })
    const backend = await streamBackend(3, 'hold')
    const gw = await gateway(backend.url, [key, limited])

    const controller = new AbortController()
    const cut = await stream(gw, limited, 'cut-1', controller.signal)
    expect(cut.status).toBe(200)
    await readUntilThenLeave(cut, 'tok2', controller)
    await backend.closed

    // The role event and 3 tokens: 3 completion tokens; 40 characters: 10 prompt tokens; 13 > the budget of 12.
    await untilMetric(gw.url, 'sluice_tokens_total', { ...tokenSeries('prompt'), key: limited.id }, 10)
    await untilMetric(gw.url, 'sluice_tokens_total', { ...tokenSeries('completion'), key: limited.id }, 3)
    const line = gw.logLines().find((l) => l.msg === 'request completed' && l.request_id === 'cut-1')
    expect(line).toMatchObject({ status: 499, prompt_tokens: 10, completion_tokens: 3 })
    const next = await stream(gw, limited, 'next-1')
    expect(next.status).toBe(429)
    expect(((await next.json()) as { error: { code: string } }).error.code).toBe('rate_limit_tokens')
  })
})

describe('a backend that ignores include_usage', () => {
  it('is charged the estimate once its stream ends: [DONE] is not a token', async () => {
    const backend = await streamBackend(4, 'end')
    const gw = await gateway(backend.url)

    const answer = await stream(gw, key, 'whole-1')
    const text = await answer.text()
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true)

    // Events: role, 4 tokens, finish, [DONE]: 5 completion tokens (the finish event counts: vLLM puts the last token there).
    await untilMetric(gw.url, 'sluice_tokens_total', tokenSeries('prompt'), 10)
    await untilMetric(gw.url, 'sluice_tokens_total', tokenSeries('completion'), 5)
  })
})

// Regression (limits review, session 24): a whole completion without usage was charged nothing, where
// the same backend's stream was estimated.
describe('a backend whose completion reports no usage', () => {
  it('is charged the estimate: the prompt, and a token per 4 characters of what it generated', async () => {
    // 12 characters of content, 8 of reasoning, 4 of tool call arguments: 24 characters, 6 tokens.
    const completion = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'served-m',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'abcdefghijkl', reasoning_content: 'thinking', tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"a"' } }] } }],
    }
    const server = createServer((req, res) => {
      req.resume()
      if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion)))
    })
    const gw = await gateway(await listenForTest(server, cleanups))

    const answer = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }] }),
    })
    expect(answer.status).toBe(200)
    expect(await answer.json()).toEqual(completion)

    await untilMetric(gw.url, 'sluice_tokens_total', tokenSeries('prompt'), 10)
    await untilMetric(gw.url, 'sluice_tokens_total', tokenSeries('completion'), 6)
  })
})
