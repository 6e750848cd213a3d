import { describe, expect, it } from 'vitest'
import { forwardedRequestHeaders, responseHeadersFromUpstream } from '../../src/proxy/headers.js'

describe('responseHeadersFromUpstream', () => {
  it('drops hop-by-hop headers, Proxy-Connection, those Connection names, and the framing; keeps the rest', () => {
    const out = responseHeadersFromUpstream({
      'content-type': 'application/json',
      'x-trace': 'abc',
      'set-cookie': ['a=1', 'b=2'],
      connection: 'keep-alive, X-Private',
      'x-private': 'hop',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      'transfer-encoding': 'chunked',
      'content-length': '12',
      upgrade: 'h2c',
      te: 'trailers',
      trailer: 'x-checksum',
      'proxy-authenticate': 'Basic',
      gone: undefined,
    })
    expect(out).toEqual({ 'content-type': 'application/json', 'x-trace': 'abc', 'set-cookie': ['a=1', 'b=2'] })
  })
})

describe('forwardedRequestHeaders', () => {
  it('passes on only content negotiation and tracing headers, never credentials or cookies', () => {
    const out = forwardedRequestHeaders({ accept: 'application/json', 'accept-encoding': 'gzip', 'user-agent': 'ua', traceparent: 't', authorization: 'Bearer x', cookie: 'c=1', 'proxy-connection': 'keep-alive' })
    expect(out).toEqual({ accept: 'application/json', 'accept-encoding': 'gzip', 'user-agent': 'ua', traceparent: 't' })
  })

  it('leaves out an allow-listed header the client\'s Connection names: it is for this hop only', () => {
    const client = { accept: 'application/json', 'user-agent': 'ua', traceparent: 't', connection: 'keep-alive, User-Agent ,TRACEPARENT' }
    expect(forwardedRequestHeaders(client)).toEqual({ accept: 'application/json' })
    expect(forwardedRequestHeaders({ ...client, connection: 'keep-alive' })).toEqual({ accept: 'application/json', 'user-agent': 'ua', traceparent: 't' })
  })
})
