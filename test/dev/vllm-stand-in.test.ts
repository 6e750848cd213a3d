import { once } from 'node:events'
import { describe, it, expect, afterEach } from 'vitest'
import { fetch, request } from 'undici'
import { startVllmStandIn, type StandInOptions, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'

const started: VllmStandIn[] = []

async function start(options?: StandInOptions): Promise<VllmStandIn> {
  const standIn = await startVllmStandIn(options)
  started.push(standIn)
  return standIn
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((standIn) => standIn.close()))
})

// 'Hello there!' is 12 characters: 3 prompt tokens.
const MESSAGES = [{ role: 'user', content: 'Hello there!' }]

function chat(standIn: VllmStandIn, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return request(`${standIn.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm1', messages: MESSAGES, ...body }),
  })
}

/** The `data:` payloads of an SSE body, JSON-parsed except the final `[DONE]`. */
function sseData(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      expect(event.startsWith('data: ')).toBe(true)
      const data = event.slice('data: '.length)
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown)
    })
}

describe('vLLM stand-in: chat completions', () => {
  it('answers a non-streaming request in the vLLM shape and records it', async () => {
    const standIn = await start()
    const res = await chat(standIn, {}, { 'x-request-id': 'req-1' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json')
    expect(await res.body.json()).toEqual({
      id: 'chatcmpl-req-1',
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'm1',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 ', tool_calls: [] },
          logprobs: null,
          finish_reason: 'stop',
          stop_reason: null,
        },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 8, total_tokens: 11, prompt_tokens_details: null },
      prompt_logprobs: null,
      kv_transfer_params: null,
    })
    expect(standIn.received).toHaveLength(1)
    expect(standIn.received[0]).toMatchObject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { 'x-request-id': 'req-1' },
      body: { model: 'm1', messages: MESSAGES },
    })
    expect(standIn.inFlight()).toBe(0)
  })

  it('streams role, content, finish and usage chunks, then [DONE], when include_usage is set', async () => {
    const standIn = await start({ tokens: 3 })
    const chunkIndexes: number[] = []
    standIn.events.on('chunk', (index: number) => chunkIndexes.push(index))
    const res = await chat(standIn, { stream: true, stream_options: { include_usage: true } })
    expect(res.headers['content-type']).toBe('text/event-stream')
    expect(res.headers['cache-control']).toBe('no-cache')
    const events = sseData(await res.body.text())
    const header = { id: expect.stringMatching(/^chatcmpl-/), object: 'chat.completion.chunk', created: expect.any(Number), model: 'm1' }
    const choice = (delta: object, finish: string | null) => ({ index: 0, delta, logprobs: null, finish_reason: finish })
    expect(events).toEqual([
      { ...header, choices: [choice({ role: 'assistant', content: '' }, null)], usage: null },
      { ...header, choices: [choice({ content: 'tok0 ' }, null)], usage: null },
      { ...header, choices: [choice({ content: 'tok1 ' }, null)], usage: null },
      { ...header, choices: [choice({ content: 'tok2 ' }, null)], usage: null },
      { ...header, choices: [{ ...choice({}, 'stop'), stop_reason: null }], usage: null },
      { ...header, choices: [], usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } },
      '[DONE]',
    ])
    expect(chunkIndexes).toEqual([0, 1, 2])
  })

  it('streams without a usage chunk or usage members when include_usage is not set', async () => {
    const standIn = await start({ tokens: 2 })
    const res = await chat(standIn, { stream: true })
    const events = sseData(await res.body.text())
    expect(events).toHaveLength(5)
    expect(events.at(-1)).toBe('[DONE]')
    for (const event of events.slice(0, -1)) {
      expect(event).not.toHaveProperty('usage')
      expect(event).toMatchObject({ choices: [{ index: 0 }] })
    }
  })

  it('follows vLLM (since March 2026): only include_usage true asks for usage', async () => {
    const standIn = await start({ tokens: 2 })
    const usageChunks = async (options: Record<string, unknown>) =>
      sseData(await (await chat(standIn, { stream: true, stream_options: options })).body.text()).filter((e) => typeof e === 'object' && e !== null && 'usage' in e && e.usage !== null)
    expect(await usageChunks({ include_usage: true })).toHaveLength(1)
    expect(await usageChunks({})).toHaveLength(0)
    expect(await usageChunks({ continuous_usage_stats: true })).toHaveLength(0)
    expect(await usageChunks({ include_usage: false })).toHaveLength(0)
  })

  it('stops at max_completion_tokens with finish_reason length', async () => {
    const standIn = await start({ tokens: 8 })
    const whole = await (await chat(standIn, { max_completion_tokens: 2 })).body.json()
    expect(whole).toMatchObject({
      choices: [{ message: { content: 'tok0 tok1 ' }, finish_reason: 'length' }],
      usage: { completion_tokens: 2 },
    })
    const streamed = sseData(await (await chat(standIn, { stream: true, max_tokens: 1 })).body.text())
    expect(streamed).toHaveLength(4)
    expect(streamed[2]).toMatchObject({ choices: [{ delta: {}, finish_reason: 'length' }] })
  })

  it('echoes the request id from the header, else the body, else a fresh UUID', async () => {
    const standIn = await start()
    const fromHeader = await chat(standIn, { request_id: 'from-body' }, { 'x-request-id': 'from-header' })
    expect(fromHeader.headers['x-request-id']).toBe('from-header')
    expect(await fromHeader.body.json()).toMatchObject({ id: 'chatcmpl-from-header' })
    const fromBody = await chat(standIn, { request_id: 'from-body' })
    expect(fromBody.headers['x-request-id']).toBe('from-body')
    expect(await fromBody.body.json()).toMatchObject({ id: 'chatcmpl-from-body' })
    const fresh = await chat(standIn, {})
    expect(fresh.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    await fresh.body.dump()
  })

  it('rejects a body that is not JSON with the vLLM error shape', async () => {
    const standIn = await start()
    const res = await request(`${standIn.url}/v1/chat/completions`, { method: 'POST', body: '{nope' })
    expect(res.statusCode).toBe(400)
    expect(await res.body.json()).toEqual({
      error: { message: expect.any(String), type: 'BadRequestError', param: null, code: 400 },
    })
    expect(standIn.received[0]?.body).toBe('{nope')
  })

  it('emits answered once a response has fully ended', async () => {
    const standIn = await start()
    const answered = once(standIn.events, 'answered')
    await (await chat(standIn, { stream: true })).body.dump()
    const [received] = await answered
    expect(received).toBe(standIn.received[0])
  })
})

describe('vLLM stand-in: api key', () => {
  it('requires the exact bearer token on /v1/* only', async () => {
    const standIn = await start({ apiKey: 'sk-test' })
    const missing = await chat(standIn, {})
    expect(missing.statusCode).toBe(401)
    expect(await missing.body.json()).toEqual({ error: 'Unauthorized' })
    const wrong = await chat(standIn, {}, { authorization: 'Bearer sk-other' })
    expect(wrong.statusCode).toBe(401)
    await wrong.body.dump()
    const right = await chat(standIn, {}, { authorization: 'Bearer sk-test' })
    expect(right.statusCode).toBe(200)
    await right.body.dump()
    const models = await request(`${standIn.url}/v1/models`)
    expect(models.statusCode).toBe(401)
    await models.body.dump()
    const health = await request(`${standIn.url}/health`)
    expect(health.statusCode).toBe(200)
    await health.body.dump()
    expect(standIn.received).toHaveLength(3)
  })
})

describe('vLLM stand-in: other endpoints', () => {
  it('lists the served model, reports health and answers 404 elsewhere', async () => {
    const standIn = await start({ modelName: 'served' })
    const models = await request(`${standIn.url}/v1/models`)
    expect(await models.body.json()).toEqual({
      object: 'list',
      data: [{ id: 'served', object: 'model', created: expect.any(Number), owned_by: 'vllm' }],
    })
    const health = await request(`${standIn.url}/health`)
    expect(health.statusCode).toBe(200)
    expect(await health.body.text()).toBe('')
    const unknown = await request(`${standIn.url}/v2/nothing`)
    expect(unknown.statusCode).toBe(404)
    expect(await unknown.body.json()).toEqual({ detail: 'Not Found' })
  })

  it('reports in-flight requests in /metrics while a hanging request is open', async () => {
    const standIn = await start({ fail: 'hang' })
    const metrics = async () => (await request(`${standIn.url}/metrics`)).body.text()
    expect(await metrics()).toContain('vllm:num_requests_running{model_name="stand-in-model"} 0.0')
    const controller = new AbortController()
    const arrived = once(standIn.events, 'request')
    const pending = fetch(`${standIn.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm1', messages: MESSAGES }),
      signal: controller.signal,
    }).catch((error: unknown) => error)
    await arrived
    expect(standIn.inFlight()).toBe(1)
    const text = await metrics()
    expect(text).toContain('# TYPE vllm:num_requests_running gauge')
    expect(text).toContain('vllm:num_requests_running{model_name="stand-in-model"} 1.0')
    expect(text).toContain('vllm:num_requests_waiting{model_name="stand-in-model"} 0.0')
    expect(text).toContain('vllm:kv_cache_usage_perc{model_name="stand-in-model"} 0.0')
    const closed = once(standIn.events, 'client-closed')
    controller.abort()
    await closed
    expect(await pending).toBeInstanceOf(Error)
    expect(standIn.inFlight()).toBe(0)
  })
})

describe('vLLM stand-in: failure modes', () => {
  it('status500 fails chat completions and /health', async () => {
    const standIn = await start({ fail: 'status500' })
    const res = await chat(standIn, {})
    expect(res.statusCode).toBe(500)
    expect(await res.body.json()).toEqual({
      error: { message: 'stand-in failure', type: 'InternalServerError', param: null, code: 500 },
    })
    const health = await request(`${standIn.url}/health`)
    expect(health.statusCode).toBe(500)
    await health.body.dump()
    standIn.options.fail = 'none'
    const recovered = await chat(standIn, {})
    expect(recovered.statusCode).toBe(200)
    await recovered.body.dump()
  })

  it('close_before_headers gives the client a socket error', async () => {
    const standIn = await start({ fail: 'close_before_headers' })
    await expect(chat(standIn, {})).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' })
    expect(standIn.received).toHaveLength(1)
  })

  it('close_mid_stream cuts a stream after two content chunks', async () => {
    const standIn = await start({ fail: 'close_mid_stream', tokens: 8 })
    const res = await chat(standIn, { stream: true })
    expect(res.statusCode).toBe(200)
    let text = ''
    const read = async () => {
      for await (const part of res.body) text += String(part)
    }
    await expect(read()).rejects.toThrow()
    expect(text).toContain('tok1 ')
    expect(text).not.toContain('tok2 ')
    expect(text).not.toContain('[DONE]')
  })

  it('close_mid_stream cuts a non-streaming body halfway', async () => {
    const standIn = await start({ fail: 'close_mid_stream' })
    const res = await chat(standIn, {})
    expect(res.statusCode).toBe(200)
    await expect(res.body.text()).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' })
  })

  it('emits client-closed and stops streaming when the client aborts', async () => {
    const standIn = await start({ tokens: 1000, interTokenDelayMs: 5 })
    const controller = new AbortController()
    const firstChunk = once(standIn.events, 'chunk')
    const res = await fetch(`${standIn.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm1', messages: MESSAGES, stream: true }),
      signal: controller.signal,
    })
    await firstChunk
    const closed = once(standIn.events, 'client-closed')
    controller.abort()
    const [received] = await closed
    expect(received).toBe(standIn.received[0])
    expect(standIn.inFlight()).toBe(0)
    await expect(res.text()).rejects.toThrow()
  })

  it('hang keeps the request open until close() ends it', async () => {
    const standIn = await start({ fail: 'hang' })
    const arrived = once(standIn.events, 'request')
    const pending = chat(standIn, {}).catch((error: unknown) => error)
    await arrived
    await standIn.close()
    expect(await pending).toBeInstanceOf(Error)
    await standIn.close()
  })
})
