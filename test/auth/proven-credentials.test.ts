import { EventEmitter } from 'node:events'
/**
 * A connection's proven Authorization header: the memo as a unit, and over
 * one real keep-alive connection (undici Client: one socket) to a gateway,
 * where every request must still be judged by its own header.
 */
import { Client } from 'undici'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Authenticators } from '../../src/auth/authenticate.js'
import { BearerKeyring } from '../../src/auth/bearer.js'
import type { Principal } from '../../src/auth/principal.js'
import { ProvenCredentials, sameText } from '../../src/auth/proven-credentials.js'
import { requireAuth } from '../../src/auth/require-auth.js'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { configFrom, makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'

const alice: Principal = { kind: 'user', id: 'alice', scopes: ['objects'] }

describe('sameText', () => {
  it.each([
    ['abc', 'abc', true],
    ['', '', true],
    ['abc', 'abd', false],
    ['abc', 'ab', false],
    ['ab', 'abc', false],
    ['abc', '', false],
    ['', 'abc', false],
    ['Bearer sk-1', 'bearer sk-1', false],
    ['a\u0000', 'a', false],
  ])('%j vs %j → %s', (known, presented, same) => {
    expect(sameText(known, presented)).toBe(same)
  })
})

describe('ProvenCredentials', () => {
  it('recalls a principal only for the same connection, scheme and exact header', () => {
    const memo = new ProvenCredentials()
    const connection = {}
    memo.remember(connection, 'Basic YWxpY2U6cHc=', 'basic', alice)
    expect(memo.recall(connection, 'Basic YWxpY2U6cHc=', 'basic')).toBe(alice)
    expect(memo.recall(connection, 'Basic YWxpY2U6cHc', 'basic')).toBeNull()
    expect(memo.recall(connection, 'Basic YWxpY2U6cHc=', 'bearer')).toBeNull()
    expect(memo.recall({}, 'Basic YWxpY2U6cHc=', 'basic')).toBeNull()
  })

  it('keeps only the latest proof per connection', () => {
    const memo = new ProvenCredentials()
    const connection = {}
    const bob: Principal = { kind: 'user', id: 'bob', scopes: ['objects'] }
    memo.remember(connection, 'first', 'basic', alice)
    memo.remember(connection, 'second', 'basic', bob)
    expect(memo.recall(connection, 'first', 'basic')).toBeNull()
    expect(memo.recall(connection, 'second', 'basic')).toBe(bob)
  })
})

describe('requireAuth with a proven connection', () => {
  const header = `Basic ${Buffer.from('alice:pw').toString('base64')}`
  function setup() {
    let checks = 0
    const authenticators: Authenticators = {
      bearer: new BearerKeyring([]),
      proven: new ProvenCredentials(),
      basic: async (username, password) => {
        checks++
        return username === 'alice' && password === 'pw' ? alice : null
      },
    }
    const hook = requireAuth(authenticators, { scheme: 'basic', scope: 'objects' }, 1024)
    const run = (socket: object, authorization: string) =>
      new Promise<{ error: Error | undefined; principal: unknown }>((resolve) => {
        const request = { raw: { rawHeaders: ['Authorization', authorization], socket }, headers: { authorization }, facts: { principal: null } }
        const done = (error?: Error) => resolve({ error, principal: request.facts.principal })
        ;(hook as unknown as (r: FastifyRequest, s: FastifyReply, d: (e?: Error) => void) => void)(request as unknown as FastifyRequest, { raw: new EventEmitter() } as unknown as FastifyReply, done)
      })
    return { run, checks: () => checks }
  }

  it('checks a header once per connection: the same header again is not re-verified, another connection is', async () => {
    const { run, checks } = setup()
    const first = {}
    expect(await run(first, header)).toEqual({ error: undefined, principal: alice })
    expect(await run(first, header)).toEqual({ error: undefined, principal: alice })
    expect(checks()).toBe(1)
    expect(await run({}, header)).toEqual({ error: undefined, principal: alice })
    expect(checks()).toBe(2)
  })

  it('never remembers a refusal: a wrong password is verified, and refused, every time', async () => {
    const { run, checks } = setup()
    const connection = {}
    const wrong = `Basic ${Buffer.from('alice:nope').toString('base64')}`
    for (let i = 0; i < 3; i++) expect((await run(connection, wrong)).error).toMatchObject({ code: 'invalid_credentials' })
    expect(checks()).toBe(3)
  })
})

describe('one keep-alive connection carrying several credentials', () => {
  const chatKey = makeKey('chat', ['chat'])
  const otherChatKey = makeKey('other-chat', ['chat'])
  const trainingKey = makeKey('training', ['training'])
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
  const configObject = (keys: object[]) => ({ server: { port: 0 }, auth: { keys }, models: [{ name: 'm', backends: [{ url: backend.url }] }] })
  let backend: VllmStandIn
  let gw: TestGateway
  let client: Client

  beforeEach(async () => {
    backend = await startVllmStandIn()
    gw = await startTestGateway(configObject([chatKey.entry, otherChatKey.entry, trainingKey.entry]))
    client = new Client(gw.url, { pipelining: 1 })
  })

  afterEach(async () => {
    await client.close()
    await gw.shutdown()
    await backend.close()
  })

  async function chat(authorization: string): Promise<{ status: number; code: unknown }> {
    const response = await client.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', authorization }, body })
    const answer = (await response.body.json()) as { error?: { code: unknown } }
    return { status: response.statusCode, code: answer.error?.code ?? null }
  }

  it('judges every request by its own header, whatever the connection proved before', async () => {
    expect(await chat(`Bearer ${chatKey.token}`)).toEqual({ status: 200, code: null })
    expect(await chat(`Bearer ${chatKey.token}x`)).toEqual({ status: 401, code: 'invalid_credentials' })
    expect(await chat(`Bearer ${chatKey.token}`)).toEqual({ status: 200, code: null })
    expect(await chat(`Bearer ${trainingKey.token}`)).toEqual({ status: 403, code: 'insufficient_scope' })
    expect(await chat(`Bearer ${chatKey.token.slice(0, -1)}`)).toEqual({ status: 401, code: 'invalid_credentials' })
    expect(await chat(`Bearer ${otherChatKey.token}`)).toEqual({ status: 200, code: null })
    expect(await chat(`Bearer ${chatKey.token}`)).toEqual({ status: 200, code: null })
    // All of it over one connection, and only the 200s reached the backend.
    expect(gw.openConnections()).toBe(1)
    expect(backend.received).toHaveLength(4)
  })

  it('the access log names the key each request proved, not the one before it', async () => {
    await chat(`Bearer ${chatKey.token}`)
    await chat(`Bearer ${otherChatKey.token}`)
    await chat(`Bearer ${chatKey.token}`)
    const principals = gw
      .logLines()
      .filter((line) => line.msg === 'request completed')
      .map((line) => line.principal)
    expect(principals).toEqual(['chat', 'other-chat', 'chat'])
  })

  it('after a reload that removes the key, the same connection’s next request with it is refused', async () => {
    expect(await chat(`Bearer ${chatKey.token}`)).toEqual({ status: 200, code: null })
    await gw.reload(configFrom(configObject([otherChatKey.entry])))
    expect(await chat(`Bearer ${chatKey.token}`)).toEqual({ status: 401, code: 'invalid_credentials' })
    expect(await chat(`Bearer ${otherChatKey.token}`)).toEqual({ status: 200, code: null })
    expect(gw.openConnections()).toBe(1)
  })
})
