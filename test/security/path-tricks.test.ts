/**
 * Path and routing tricks (issue 9, item 3), sent as exact bytes over a raw
 * socket: encoded slashes and dots, double encoding, `//`, trailing
 * slashes, method overrides, Transfer-Encoding/Content-Length conflicts
 * (request smuggling), absolute-form targets and Host header games.
 *
 * For each: the answer is the one stated (or the connection closes, where
 * Node's parser refuses the bytes), a gateway error is in DESIGN.md's shape,
 * at most the trick's own route reaches an upstream, and every request any
 * upstream received is its route's one canonical method and path (checked on
 * the stand-ins' raw request targets), with the upstream's own Host — never
 * the client's — and no override or forwarding header.
 */
import { describe, expect, it } from 'vitest'
import type { RecordedRequest } from '../../src/dev/recording-server.js'
import { expectErrorBody, rawExchange } from '../support/raw-http.js'
import { basicHeader, CHECKPOINT_MODEL, useSecurityFixture, TRAINING_MODEL, type SecurityFixture, type StandInCounts } from '../support/security-fixture.js'

let fx: SecurityFixture

useSecurityFixture((started) => (fx = started))

type Upstream = keyof StandInCounts

const BODIES = {
  chat: '{"messages":[{"role":"user","content":"hi"}]}',
  training: `{"model_id":"${TRAINING_MODEL}","trajectory_groups":[]}`,
  objects: '{"project_id":"demo/project","object_id":"config","digest":"latest"}',
} as const

/** What each upstream may ever be asked: its route's method and raw request target. */
const CANONICAL: Record<Upstream, { method: string; target: RegExp }> = {
  chat: { method: 'POST', target: /^\/v1\/chat\/completions$/ },
  training: { method: 'POST', target: /^\/v1\/preview\/training-jobs$/ },
  checkpoints: { method: 'GET', target: /^\/v1\/preview\/models\/[^/?#]+\/checkpoints\?limit=\d+&order=(asc|desc)(&[^#]*)?$/ },
  objects: { method: 'POST', target: /^\/obj\/read$/ },
}

/** Headers no upstream may receive from a client. */
const NEVER_FORWARDED = ['x-http-method-override', 'x-method-override', 'x-forwarded-host', 'x-forwarded-for', 'forwarded', 'x-original-url', 'x-rewrite-url']

interface Request {
  readonly method?: string
  readonly target: string
  /** Credentials and a body for this route family (none: no Authorization, no body). */
  readonly as?: 'chat' | 'models' | 'training' | 'checkpoints' | 'objects'
  /** Extra header lines, each ending in CRLF. */
  readonly lines?: string
  /** Replaces the Host line (empty: no Host line at all). */
  readonly host?: string
  readonly version?: string
}

function requestBytes(request: Request): string {
  const as = request.as
  const authorization = as === undefined ? '' : `Authorization: ${as === 'objects' ? basicHeader(fx.users.alice) : `Bearer ${fx.keys.all.token}`}\r\n`
  const body = as === 'chat' || as === 'training' || as === 'objects' ? BODIES[as] : ''
  const method = request.method ?? (body === '' ? 'GET' : 'POST')
  const framing = body === '' ? '' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
  const host = request.host ?? 'Host: gateway.test\r\n'
  return `${method} ${request.target} ${request.version ?? 'HTTP/1.1'}\r\n${host}${authorization}${framing}${request.lines ?? ''}Connection: close\r\n\r\n${body}`
}

interface Trick {
  readonly name: string
  readonly bytes: () => string
  /** Allowed statuses of the first answer; empty: the connection closes without one. */
  readonly statuses: readonly number[]
  /** The one upstream this request may reach (at its canonical path). */
  readonly reaches?: Upstream
}

const trick = (name: string, request: Request, statuses: readonly number[], reaches?: Upstream): Trick => ({ name, bytes: () => requestBytes(request), statuses, reaches })
const raw = (name: string, bytes: () => string, statuses: readonly number[], reaches?: Upstream): Trick => ({ name, bytes, statuses, reaches })

const ckpt = `/v1/preview/models/${CHECKPOINT_MODEL}/checkpoints`

const TRICKS: Record<string, Trick[]> = {
  'encoded slashes and dots': [
    trick('POST /v1%2Fchat%2Fcompletions', { target: '/v1%2Fchat%2Fcompletions', as: 'chat' }, [404]),
    trick('POST /v1/chat%2Fcompletions', { target: '/v1/chat%2Fcompletions', as: 'chat' }, [404]),
    trick('POST /v1/chat/completions%2F', { target: '/v1/chat/completions%2F', as: 'chat' }, [404]),
    trick('POST /obj%2fread', { target: '/obj%2fread', as: 'objects' }, [404]),
    trick('POST /v1/%2e%2e/obj/read', { target: '/v1/%2e%2e/obj/read', as: 'objects' }, [404]),
    trick('POST /obj/read/..%2F..%2Fv1%2Fchat%2Fcompletions', { target: '/obj/read/..%2F..%2Fv1%2Fchat%2Fcompletions', as: 'objects' }, [404]),
    trick('POST /v1/preview/training-jobs/%2e%2e/%2e%2e/%2e%2e/obj/read', { target: '/v1/preview/training-jobs/%2e%2e/%2e%2e/%2e%2e/obj/read', as: 'objects' }, [404]),
    trick('GET /v1/x/../models (dot segments are not resolved)', { target: '/v1/x/../models', as: 'models' }, [404]),
    trick('POST /v1/chat/./completions', { target: '/v1/chat/./completions', as: 'chat' }, [404]),
    // Refused, not re-encoded: a proxy or app server that decodes before routing would walk the path with the gateway's credential.
    trick('GET checkpoints of model ..%2F..%2Fobj%2Fread', { target: '/v1/preview/models/..%2F..%2Fobj%2Fread/checkpoints', as: 'checkpoints' }, [400]),
    trick('GET checkpoints of model a%5Cb (an encoded backslash)', { target: '/v1/preview/models/a%5Cb/checkpoints', as: 'checkpoints' }, [400]),
    trick('GET checkpoints of model %2e%2e', { target: '/v1/preview/models/%2e%2e/checkpoints', as: 'checkpoints' }, [400]),
    trick('GET checkpoints of model %252e%252e (double-encoded)', { target: '/v1/preview/models/%252e%252e/checkpoints', as: 'checkpoints' }, [400]),
    trick('GET checkpoints of model %252F (double-encoded slash)', { target: '/v1/preview/models/a%252Fb/checkpoints', as: 'checkpoints' }, [400]),
    trick('GET /v1/preview/models/x/checkpoints/../../training-jobs', { target: '/v1/preview/models/x/checkpoints/../../training-jobs', as: 'training' }, [404]),
    trick('GET /v1\\models (backslash)', { target: '/v1\\models', as: 'models' }, [404]),
    trick('GET /v1/models;x=/../obj/read (path parameter)', { target: '/v1/models;x=/../obj/read', as: 'models' }, [404]),
    trick('GET /v1/%6dodels (an encoded unreserved letter is the same path)', { target: '/v1/%6dodels', as: 'models' }, [200]),
  ],
  'doubled and trailing slashes': [
    trick('POST //v1/chat/completions', { target: '//v1/chat/completions', as: 'chat' }, [404]),
    trick('POST /v1//chat/completions', { target: '/v1//chat/completions', as: 'chat' }, [404]),
    trick('POST /obj//read', { target: '/obj//read', as: 'objects' }, [404]),
    trick('GET /v1/preview/models//checkpoints', { target: '/v1/preview/models//checkpoints', as: 'checkpoints' }, [400]),
    trick('POST /v1/chat/completions/ (trailing slash: same route)', { target: '/v1/chat/completions/', as: 'chat' }, [200], 'chat'),
    trick('POST /obj/read/ (trailing slash: same route)', { target: '/obj/read/', as: 'objects' }, [200], 'objects'),
    trick('POST /v1/preview/training-jobs/ (trailing slash: same route)', { target: '/v1/preview/training-jobs/', as: 'training' }, [200], 'training'),
    trick('GET checkpoints/ (trailing slash: same route)', { target: `${ckpt}/`, as: 'checkpoints' }, [200], 'checkpoints'),
    trick('GET /v1/models/ (trailing slash: same route)', { target: '/v1/models/', as: 'models' }, [200]),
    trick('POST /v1/chat/completions// (two trailing slashes)', { target: '/v1/chat/completions//', as: 'chat' }, [404]),
    trick('POST /obj/read?/../../v1/chat/completions (a query never reaches the object store)', { target: '/obj/read?/../../v1/chat/completions', as: 'objects' }, [200], 'objects'),
    trick('POST /v1/preview/training-jobs?x=/../../obj/read', { target: '/v1/preview/training-jobs?x=/../../obj/read', as: 'training' }, [200], 'training'),
    trick('GET checkpoints#/../../training-jobs (a fragment in the target: refused)', { target: `${ckpt}#/../../training-jobs`, as: 'checkpoints' }, [400]),
    trick('GET checkpoints?limit=3#x (a fragment after a query: refused)', { target: `${ckpt}?limit=3#x`, as: 'checkpoints' }, [400]),
    trick('GET checkpoints?after=a#b (not forwarded as a%23b)', { target: `${ckpt}?after=a#b`, as: 'checkpoints' }, [400]),
    trick('POST /v1/chat/completions#x', { target: '/v1/chat/completions#x', as: 'chat' }, [400]),
  ],
  'method overrides do not change the method': [
    trick('GET /v1/chat/completions with X-HTTP-Method-Override: POST', { method: 'GET', target: '/v1/chat/completions', as: 'models', lines: 'X-HTTP-Method-Override: POST\r\n' }, [404]),
    trick('POST /v1/models with X-HTTP-Method-Override: GET', { method: 'POST', target: '/v1/models', as: 'chat', lines: 'X-HTTP-Method-Override: GET\r\nX-Method-Override: GET\r\n' }, [404]),
    trick('GET /v1/preview/training-jobs with X-Method-Override: POST', { method: 'GET', target: '/v1/preview/training-jobs', as: 'checkpoints', lines: 'X-Method-Override: POST\r\n' }, [404]),
    trick('POST checkpoints with X-HTTP-Method-Override: GET', { method: 'POST', target: ckpt, as: 'training', lines: 'X-HTTP-Method-Override: GET\r\n' }, [404]),
    trick('POST /v1/models?_method=GET', { method: 'POST', target: '/v1/models?_method=GET', as: 'chat' }, [404]),
    trick('POST /obj/read with X-HTTP-Method-Override: DELETE: forwarded as POST, override dropped', { target: '/obj/read', as: 'objects', lines: 'X-HTTP-Method-Override: DELETE\r\nX-Method-Override: PUT\r\n' }, [200], 'objects'),
    trick('DELETE /obj/read', { method: 'DELETE', target: '/obj/read', as: 'objects' }, [404]),
    trick('TRACE /v1/models', { method: 'TRACE', target: '/v1/models', as: 'models' }, [404]),
    trick('OPTIONS * ', { method: 'OPTIONS', target: '*', as: 'models' }, [404]),
    trick('CONNECT to an upstream port: 404, then the connection closes', { method: 'CONNECT', target: '127.0.0.1:9', as: 'models' }, [404]),
  ],
  'absolute-form targets and Host games': [
    trick('POST http://evil.example/v1/chat/completions (routed by path; scheme and authority ignored)', { target: 'http://evil.example/v1/chat/completions', as: 'chat' }, [200], 'chat'),
    trick('POST http://evil.example/obj/read', { target: 'http://evil.example/obj/read', as: 'objects' }, [200], 'objects'),
    trick('POST https://user:pw@evil.example:8443/v1/preview/training-jobs', { target: 'https://user:pw@evil.example:8443/v1/preview/training-jobs', as: 'training' }, [200], 'training'),
    trick('GET http://evil.example/v1/preview/models/.../checkpoints', { target: `http://evil.example${ckpt}`, as: 'checkpoints' }, [200], 'checkpoints'),
    trick('GET http://evil.example (no path)', { target: 'http://evil.example', as: 'models' }, [404]),
    trick('Host: evil.example', { target: '/obj/read', as: 'objects', host: 'Host: evil.example\r\n' }, [200], 'objects'),
    trick("Host: an upstream's own address", { target: '/v1/preview/training-jobs', as: 'training', host: 'Host: 127.0.0.1:9\r\n' }, [200], 'training'),
    trick('no Host (HTTP/1.1 requires one)', { target: '/obj/read', as: 'objects', host: '' }, [400]),
    // RFC 9112 §3.2: 400 for two Host lines or a value that is not host[:port] (a platform review, session 24).
    trick('two Host headers', { target: '/v1/chat/completions', as: 'chat', host: 'Host: gateway.test\r\nHost: evil.example\r\n' }, [400]),
    trick('two Host headers, the same value', { target: '/obj/read', as: 'objects', host: 'Host: gateway.test\r\nhost: gateway.test\r\n' }, [400]),
    trick('Host with a space', { target: '/obj/read', as: 'objects', host: 'Host: a b\r\n' }, [400]),
    trick('Host with userinfo and a path', { target: '/v1/preview/training-jobs', as: 'training', host: 'Host: a@b/../x\r\n' }, [400]),
    trick('Host as an IPv6 literal with a port', { target: '/obj/read', as: 'objects', host: 'Host: [::1]:8080\r\n' }, [200], 'objects'),
    trick('an empty Host', { target: '/obj/read', as: 'objects', host: 'Host: \r\n' }, [200], 'objects'),
    trick('HTTP/1.0 with no Host', { target: '/v1/preview/training-jobs', as: 'training', host: '', version: 'HTTP/1.0' }, [200], 'training'),
    trick('X-Forwarded-Host, Forwarded and X-Original-URL are not passed on or obeyed', {
      target: '/obj/read',
      as: 'objects',
      lines: 'X-Forwarded-Host: evil.example\r\nX-Forwarded-For: 10.0.0.1\r\nForwarded: host=evil.example;proto=https\r\nX-Original-URL: /v1/chat/completions\r\nX-Rewrite-URL: /v1/chat/completions\r\n',
    }, [200], 'objects'),
  ],
}

/** Smuggling: a second request hidden in the first one's body, behind conflicting framing. */
function smuggle(framing: string, body: string): string {
  return `POST /obj/read HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: ${basicHeader(fx.users.alice)}\r\nContent-Type: application/json\r\n${framing}\r\n${body}`
}
const INNER = () => `POST /v1/preview/training-jobs HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${fx.keys.all.token}\r\nContent-Type: application/json\r\nContent-Length: ${BODIES.training.length}\r\n\r\n${BODIES.training}`
const chunked = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n0\r\n\r\n`

TRICKS['request smuggling: conflicting framing is refused'] = [
  raw('Content-Length and Transfer-Encoding: chunked (CL.TE)', () => smuggle(`Content-Length: ${chunked(BODIES.objects).length}\r\nTransfer-Encoding: chunked\r\n`, `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('Transfer-Encoding: chunked then Content-Length (TE.CL)', () => smuggle(`Transfer-Encoding: chunked\r\nContent-Length: 4\r\n`, `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('two Content-Length headers that differ', () => smuggle(`Content-Length: ${BODIES.objects.length}\r\nContent-Length: 3\r\n`, `${BODIES.objects}${INNER()}`), [400]),
  raw('Content-Length: N, 3 (a list)', () => smuggle(`Content-Length: ${BODIES.objects.length}, 3\r\n`, `${BODIES.objects}${INNER()}`), [400]),
  raw('Content-Length with a plus sign', () => smuggle(`Content-Length: +${BODIES.objects.length}\r\n`, `${BODIES.objects}${INNER()}`), [400]),
  raw('Transfer-Encoding: chunked, identity', () => smuggle('Transfer-Encoding: chunked, identity\r\n', `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('Transfer-Encoding: xchunked', () => smuggle('Transfer-Encoding: xchunked\r\n', `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('Transfer-Encoding twice (chunked, then identity)', () => smuggle('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n', `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('Transfer-Encoding with a space before the colon', () => smuggle('Transfer-Encoding : chunked\r\n', `${chunked(BODIES.objects)}${INNER()}`), [400]),
  raw('a chunk size that overflows', () => smuggle('Transfer-Encoding: chunked\r\n', `ffffffffffffffffffff\r\n${BODIES.objects}\r\n0\r\n\r\n${INNER()}`), [400]),
  // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; a front proxy reading it as
  // HTTP/1.0 sees no body and takes the chunks for the next request (an HTTP review, session 26).
  raw('HTTP/1.0 with Transfer-Encoding: chunked and keep-alive', () => smuggle('Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n', `${chunked(BODIES.objects)}${INNER()}`).replace(' HTTP/1.1\r\n', ' HTTP/1.0\r\n'), [400]),
  raw('chunk lines ended by a bare LF', () => smuggle('Transfer-Encoding: chunked\r\n', `${BODIES.objects.length.toString(16)}\n${BODIES.objects}\n0\n\n${INNER()}`), [400]),
]

function sinceBefore(before: StandInCounts): RecordedOrChat[] {
  const now: RecordedOrChat[] = []
  now.push(...fx.vllm.received.slice(before.chat).map((r) => ({ upstream: 'chat' as const, method: r.method, url: r.url, headers: r.headers })))
  now.push(...fx.training.received.slice(before.training).map((r) => tag('training', r)))
  now.push(...fx.checkpoints.received.slice(before.checkpoints).map((r) => tag('checkpoints', r)))
  now.push(...fx.store.received.slice(before.objects).map((r) => tag('objects', r)))
  return now
}

interface RecordedOrChat {
  readonly upstream: Upstream
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string | string[] | undefined>
}

const tag = (upstream: Upstream, r: RecordedRequest): RecordedOrChat => ({ upstream, method: r.method, url: r.url, headers: r.headers })

function hostOf(upstream: Upstream): string {
  const url = { chat: fx.vllm.url, training: fx.training.url, checkpoints: fx.checkpoints.url, objects: fx.store.url }[upstream]
  return new URL(url).host
}

function expectCanonical(request: RecordedOrChat): void {
  const canonical = CANONICAL[request.upstream]
  expect(request.method, `${request.upstream} got ${request.method} ${request.url}`).toBe(canonical.method)
  expect(request.url, `${request.upstream} got ${request.url}`).toMatch(canonical.target)
  expect(request.headers.host).toBe(hostOf(request.upstream))
  for (const name of NEVER_FORWARDED) expect(request.headers[name], `${name} reached ${request.upstream}`).toBeUndefined()
}

describe.each(Object.entries(TRICKS))('%s', (_group, tricks) => {
  it.each(tricks.map((t) => [t.name, t] as const))('%s', async (_name, t) => {
    const before = fx.counts()
    const exchange = await rawExchange(fx.url, t.bytes(), 3000)
    const reached = sinceBefore(before)
    const first = exchange.responses[0]
    expect(exchange.closed, 'the connection is closed after the answer (Connection: close)').toBe(true)
    if (t.statuses.length === 0) expect(exchange.responses).toEqual([])
    else expect(t.statuses, `answered ${JSON.stringify(exchange.wire.slice(0, 300))}`).toContain(first?.status)
    // Only one request was sent: a second answer would mean a second request was parsed out of it.
    expect(exchange.responses.length).toBeLessThanOrEqual(1)
    // Every refusal is in DESIGN.md's shape, the HTTP parser's included.
    if (reached.length === 0 && first !== undefined && first.status >= 400) expectErrorBody(first)
    expect(reached.length, `upstream requests: ${JSON.stringify(reached.map((r) => `${r.upstream} ${r.method} ${r.url}`))}`).toBeLessThanOrEqual(t.reaches === undefined ? 0 : 1)
    for (const request of reached) {
      expect(request.upstream).toBe(t.reaches)
      expectCanonical(request)
    }
    if (t.reaches !== undefined && first?.status === 200) expect(reached).toHaveLength(1)
  })
})

describe('afterwards', () => {
  it('every request any upstream ever received is its route’s canonical one, with the upstream’s own Host', () => {
    const all = sinceBefore({ chat: 0, training: 0, checkpoints: 0, objects: 0 })
    expect(all.length).toBeGreaterThan(10)
    for (const request of all) expectCanonical(request)
  })

  it('an absolute-form target whose host or port does not parse is refused with a message that says so', async () => {
    for (const target of ['http://x:99999/v1/models', 'http://x:abc/v1/models', 'http://[::1/v1/models']) {
      const exchange = await rawExchange(fx.url, requestBytes({ target, as: 'models' }), 3000)
      expect(exchange.responses[0]?.status, target).toBe(400)
      expect(expectErrorBody(exchange.responses[0]!).message, target).toMatch(/host or port/)
    }
  })

  it('a pipelined second request after a valid one is handled as its own request, with its own credentials check', async () => {
    const before = fx.counts()
    const first = requestBytes({ target: '/obj/read', as: 'objects' }).replace('Connection: close\r\n', '')
    const second = `POST /v1/preview/training-jobs HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\nContent-Length: ${BODIES.training.length}\r\nConnection: close\r\n\r\n${BODIES.training}`
    const exchange = await rawExchange(fx.url, `${first}${second}`, 3000)
    expect(exchange.responses.map((r) => r.status)).toEqual([200, 401])
    expect(sinceBefore(before).map((r) => r.upstream)).toEqual(['objects'])
  })
})
