/**
 * An upstream whose error answer quotes the credential the gateway sent it
 * ("Incorrect API key provided: Bearer …", as OpenAI-style servers and
 * proxies write a 401): the client gets the answer with that credential
 * replaced by `[redacted]`, status and every other byte as they were.
 * Regression (security review, 2026-11-28): the gateway's own api_key,
 * bearer token and Basic credentials reached the client that way.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { gunzipSync, gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'
import { listenForTest } from '../support/listen.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { exactRequest } from '../support/raw-http.js'
import { GOOD_COMPLETION } from '../support/good-completion.js'

const cleanups = trackedAfterEach()
const key = makeKey('client', ['chat', 'training', 'checkpoints'])
const API_KEY = 'sk-BACKEND-SECRET-1234'
const TRAINING_TOKEN = 'TRAINING-SECRET-5678'
const MODEL_ID = '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43'
// A `/` and a `+`: JSON writers escape them (`\/` in PHP, `\u002B` in .NET), and a search for the bytes alone missed those.
const CHECKPOINTS_TOKEN = 'ckpt/TOKEN+9012'

/** Answers every request 401, quoting the Authorization header it received. */
async function echoingUpstream(): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const body = JSON.stringify({ error: { message: `Incorrect API key provided: ${req.headers.authorization ?? ''}`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
      res.writeHead(401, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    })
  })
  return listenForTest(server, cleanups)
}

async function gatewayFor(url: string): Promise<TestGateway> {
  return cleanups.gateway({
    auth: { keys: [key.entry] },
    models: [{ name: 'm', retries: 0, health: { unhealthy_after: 10 }, backends: [{ url, name: 'b', api_key: API_KEY }] }],
    upstreams: { training: { url, auth: { bearer: TRAINING_TOKEN } }, checkpoints: { url, auth: { bearer: CHECKPOINTS_TOKEN } } },
  })
}

function post(gw: TestGateway, path: string, body: unknown) {
  return exactRequest(gw.url, { method: 'POST', path, headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body), timeoutMs: 5000 })
}

describe('an upstream error answer that quotes the gateway credential', () => {
  it('chat: the backend api_key is replaced, the status and the rest of the body kept', async () => {
    const gw = await gatewayFor(await echoingUpstream())
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(401)
    expect(answer.text).not.toContain(API_KEY)
    expect(JSON.parse(answer.text)).toEqual({ error: { message: 'Incorrect API key provided: Bearer [redacted]', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.text))
  })

  it('training: the upstream bearer token is replaced likewise', async () => {
    const gw = await gatewayFor(await echoingUpstream())
    const answer = await post(gw, '/v1/preview/training-jobs', { model_id: MODEL_ID, trajectory_groups: [] })
    expect(answer.status).toBe(401)
    expect(answer.text).not.toContain(TRAINING_TOKEN)
    expect(JSON.parse(answer.text).error.message).toBe('Incorrect API key provided: Bearer [redacted]')
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.text))
  })
})

/**
 * Answers every request 401, quoting the Authorization it received in its body and in `x-echo`,
 * gzipped when the request accepts gzip (as many servers do for any answer); records what it got.
 */
async function compressingUpstream(received: IncomingHttpHeaders[], coding?: { label: string; body: Buffer }): Promise<string> {
  const server = createServer((req, res) => {
    // The chat backend's health checks come here too.
    if (req.method === 'POST') received.push(req.headers)
    req.resume()
    req.on('end', () => {
      const text = Buffer.from(JSON.stringify({ error: { message: `Incorrect API key provided: ${req.headers.authorization ?? ''}` } }))
      const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '')
      const [label, body] = coding !== undefined ? [coding.label, coding.body] : gzip ? ['gzip', gzipSync(text)] : [undefined, text]
      res.writeHead(401, { 'x-echo': req.headers.authorization ?? '', 'content-length': body.length, ...(label === undefined ? {} : { 'content-encoding': label }) }).end(body)
    })
  })
  return listenForTest(server, cleanups)
}

function postAccepting(gw: TestGateway, acceptEncoding: string) {
  const headers = { authorization: `Bearer ${key.token}`, 'content-type': 'application/json', 'accept-encoding': acceptEncoding }
  return exactRequest(gw.url, { method: 'POST', path: '/v1/preview/training-jobs', headers, body: JSON.stringify({ model_id: MODEL_ID, trajectory_groups: [] }), timeoutMs: 5000 })
}

// Regression (platform review): with Accept-Encoding: gzip the upstream compressed its error answer,
// and the search for the credential found nothing in the compressed bytes; a header echo was never searched.
describe('an upstream error answer that quotes the gateway credential, compressed or in a header', () => {
  it('gzipped because the client accepts gzip: sent decoded, the token replaced, no Content-Encoding left', async () => {
    const received: IncomingHttpHeaders[] = []
    const gw = await gatewayFor(await compressingUpstream(received))
    const answer = await postAccepting(gw, 'gzip')
    expect(answer.status).toBe(401)
    expect(answer.headers['content-encoding']).toBeUndefined()
    expect(JSON.parse(answer.text).error.message).toBe('Incorrect API key provided: Bearer [redacted]')
    expect(Number(answer.headers['content-length'])).toBe(answer.body.length)
    expect(answer.headers['x-echo']).toBe('Bearer [redacted]')
  })

  it('the upstream is offered only the codings the gateway can decode', async () => {
    const received: IncomingHttpHeaders[] = []
    const gw = await gatewayFor(await compressingUpstream(received))
    await postAccepting(gw, 'zstd, gzip;q=0.8, *')
    await postAccepting(gw, 'zstd')
    expect(received.map((headers) => headers['accept-encoding'])).toEqual(['gzip;q=0.8', 'identity'])
  })

  it('an error body in a coding the gateway cannot decode: the status goes on, the body does not', async () => {
    const received: IncomingHttpHeaders[] = []
    const secret = Buffer.from(`opaque ${TRAINING_TOKEN}`)
    const gw = await gatewayFor(await compressingUpstream(received, { label: 'zstd', body: secret }))
    const answer = await postAccepting(gw, 'identity')
    expect(answer.status).toBe(401)
    expect(answer.body.length).toBe(0)
    expect(answer.headers['content-encoding']).toBeUndefined()
    expect(gw.logLines().some((line) => line.level === 40 && line.backend === 'training' && line.content_encoding === 'zstd')).toBe(true)
  })

  it('a compressed error answer that quotes nothing goes on as it came, compressed', async () => {
    const body = gzipSync('{"error":{"message":"no such model"}}')
    const gw = await gatewayFor(await compressingUpstream([], { label: 'gzip', body }))
    const answer = await postAccepting(gw, 'gzip')
    expect(answer.headers['content-encoding']).toBe('gzip')
    expect(answer.body.equals(body)).toBe(true)
    expect(gunzipSync(answer.body).toString()).toContain('no such model')
  })
})

/**
 * Answers every POST with `status`, quoting the Authorization it received in `x-echo`, in a
 * redirect's Location and in its body (a completion for chat on 200, so the answer is one).
 */
async function quotingUpstream(status: number): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const auth = req.headers.authorization ?? ''
      const body = status === 200 && req.url === '/v1/chat/completions' ? GOOD_COMPLETION : `quoted: ${auth}`
      const headers = { 'x-echo': auth, 'content-length': Buffer.byteLength(body), ...(status < 400 && status >= 300 ? { location: `https://login.example/?sent=${encodeURIComponent(auth)}&raw=${auth.slice(7)}` } : {}) }
      res.writeHead(status, headers).end(body)
    })
  })
  return listenForTest(server, cleanups)
}

// Regression (session 23): only answers from 400 up were searched, so a redirect's Location
// and body, or any header of a success, handed the gateway's credential to the client.
describe('a redirect or a success that quotes the gateway credential', () => {
  it('platform redirect: Location, other headers and body have the token replaced', async () => {
    const gw = await gatewayFor(await quotingUpstream(302))
    const answer = await post(gw, '/v1/preview/training-jobs', { model_id: MODEL_ID, trajectory_groups: [] })
    expect(answer.status).toBe(302)
    expect(answer.headers.location).toBe('https://login.example/?sent=Bearer%20[redacted]&raw=[redacted]')
    expect(answer.headers['x-echo']).toBe('Bearer [redacted]')
    expect(answer.text).toBe('quoted: Bearer [redacted]')
    expect(Number(answer.headers['content-length'])).toBe(answer.body.length)
  })

  it('platform success: headers searched, the body (the client\'s data) passed on as it came', async () => {
    const gw = await gatewayFor(await quotingUpstream(200))
    const answer = await post(gw, '/v1/preview/training-jobs', { model_id: MODEL_ID, trajectory_groups: [] })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-echo']).toBe('Bearer [redacted]')
    expect(answer.text).toBe(`quoted: Bearer ${TRAINING_TOKEN}`)
  })

  it('chat success: the backend api_key is cut from its headers', async () => {
    const gw = await gatewayFor(await quotingUpstream(200))
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-echo']).toBe('Bearer [redacted]')
    expect(answer.text).toBe(GOOD_COMPLETION)
  })

  it('chat redirect: Location and body searched', async () => {
    const gw = await gatewayFor(await quotingUpstream(307))
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(307)
    expect(answer.headers.location).not.toContain(API_KEY)
    expect(answer.text).toBe('quoted: Bearer [redacted]')
  })
})

/** Answers every request 401 with `body(authorization)` as its body, gzipped when `gzip`, and the Authorization in `x-echo`. */
async function writingUpstream(body: (authorization: string) => string, gzip = false): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const auth = req.headers.authorization ?? ''
      const bytes = gzip ? gzipSync(body(auth)) : Buffer.from(body(auth))
      res.writeHead(401, { 'x-echo': auth, 'content-length': bytes.length, ...(gzip ? { 'content-encoding': 'gzip' } : {}) })
      res.end(req.method === 'HEAD' ? undefined : bytes)
    })
  })
  return listenForTest(server, cleanups)
}

const checkpointsPath = `/v1/preview/models/${MODEL_ID}/checkpoints`

// Regressions (session 23 auth review).
describe('an error answer that quotes the gateway credential in another form or way', () => {
  it('HEAD: the answer\'s headers have the token replaced (HEAD skipped the search)', async () => {
    const gw = await gatewayFor(await writingUpstream(() => ''))
    const answer = await exactRequest(gw.url, { method: 'HEAD', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.status).toBe(401)
    expect(answer.headers['x-echo']).toBe('Bearer [redacted]')
  })

  it('JSON-escaped as PHP (`\\/`) and .NET (`\\u002B`) write it: replaced', async () => {
    const gw = await gatewayFor(await writingUpstream((auth) => `{"php":"${auth.replaceAll('/', '\\/')}","dotnet":"${auth.replaceAll('+', '\\u002B')}"}`))
    const answer = await exactRequest(gw.url, { method: 'GET', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.status).toBe(401)
    expect(answer.text).toBe('{"php":"Bearer [redacted]","dotnet":"Bearer [redacted]"}')
  })

  // Regression (diff review, session 27): Go's html/template writes `+` as `&#43;`, .NET's HtmlEncoder as `&#x2B;`.
  it('HTML-escaped as Go and .NET write it, in an error page: replaced', async () => {
    const gw = await gatewayFor(await writingUpstream((auth) => `<p>go: ${auth.replaceAll('+', '&#43;')}</p><p>net: ${auth.replaceAll('+', '&#x2B;').replaceAll('/', '&#x2F;')}</p>`))
    const answer = await exactRequest(gw.url, { method: 'GET', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.status).toBe(401)
    expect(answer.text).toBe('<p>go: Bearer [redacted]</p><p>net: Bearer [redacted]</p>')
  })

  // Session 23 diff review: only encodeURIComponent's uppercase form was searched.
  it('percent-encoded as Python\'s quote writes it (keeping "/") and in lowercase hex: replaced', async () => {
    const gw = await gatewayFor(await writingUpstream(() => 'python=ckpt/TOKEN%2B9012&lower=ckpt%2fTOKEN%2b9012'))
    const answer = await exactRequest(gw.url, { method: 'GET', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.text).toBe('python=[redacted]&lower=[redacted]')
  })

  it('chat: a backend that gzips its 401 though asked for identity: sent decoded, the api_key replaced', async () => {
    const gw = await gatewayFor(await writingUpstream((auth) => `{"error":{"message":"Incorrect API key provided: ${auth}"}}`, true))
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(401)
    expect(answer.headers['content-encoding']).toBeUndefined()
    expect(answer.text).toBe('{"error":{"message":"Incorrect API key provided: Bearer [redacted]"}}')
  })
})

/** Answers every request 401 with a JSON error quoting the Authorization it received, as `encode` writes the text, under `contentType`. */
async function encodingUpstream(contentType: string, encode: (text: string) => Buffer): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const bytes = encode(`{"error":{"message":"bad key ${req.headers.authorization ?? ''}"}}`)
      res.writeHead(401, { 'content-type': contentType, 'content-length': bytes.length }).end(bytes)
    })
  })
  return listenForTest(server, cleanups)
}

const utf16be = (text: string) => Buffer.from(text, 'utf16le').swap16()

// Regression (auth review, session 27): a body in UTF-16 was searched for the credential's UTF-8 bytes only,
// so an upstream answering in charset=utf-16le quoted the gateway's token to the client on every route.
describe('an error answer that quotes the gateway credential in another charset', () => {
  it.each([
    ['utf-16le', 'application/json; charset=utf-16le', (text: string) => Buffer.from(text, 'utf16le'), (body: Buffer) => body.toString('utf16le')],
    ['utf-16 big-endian with a BOM', 'application/json; charset=utf-16', (text: string) => utf16be(`\ufeff${text}`), (body: Buffer) => utf16be(body.toString('latin1')).toString('latin1')],
  ])('%s: replaced in that encoding, the rest of the body kept', async (_name, contentType, encode, decode) => {
    const gw = await gatewayFor(await encodingUpstream(contentType, encode))
    const answer = await exactRequest(gw.url, { method: 'GET', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.status).toBe(401)
    expect(answer.headers['content-type']).toBe(contentType)
    expect(answer.body.equals(encode('{"error":{"message":"bad key Bearer [redacted]"}}'))).toBe(true)
    expect(decode(answer.body)).not.toContain('TOKEN')
  })

  it('chat, in UTF-16: the backend api_key is replaced', async () => {
    const gw = await gatewayFor(await encodingUpstream('application/json; charset=UTF-16LE', (text) => Buffer.from(text, 'utf16le')))
    const answer = await post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    expect(answer.status).toBe(401)
    expect(answer.body.toString('utf16le')).toBe('{"error":{"message":"bad key Bearer [redacted]"}}')
  })

  // Diff review, session 27: EBCDIC code pages and an undeclared UTF-32 body with a BOM still went on.
  it.each([
    ['application/json; charset="utf-32"', false],
    ['application/json', true],
    ['application/json; charset=IBM1047', false],
  ])('a charset a search would miss (%s, BOM %s): the status goes on, the body does not', async (contentType, bom) => {
    const utf32 = (text: string) => Buffer.concat([...(bom ? '\ufeff' : ''), ...text].map((char) => Buffer.from([0, 0, char.charCodeAt(0) >> 8, char.charCodeAt(0) & 0xff])))
    const gw = await gatewayFor(await encodingUpstream(contentType, utf32))
    const answer = await exactRequest(gw.url, { method: 'GET', path: checkpointsPath, headers: { authorization: `Bearer ${key.token}` }, timeoutMs: 5000 })
    expect(answer.status).toBe(401)
    expect(answer.body.length).toBe(0)
    expect(gw.logLines().some((line) => line.level === 40 && String(line.msg).includes('cannot read was sent without its body'))).toBe(true)
  })
})
