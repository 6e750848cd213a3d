/**
 * `Expect: 100-continue` on the body routes, as raw bytes on a socket: the
 * client hears "100 Continue" only once its credentials passed and the body
 * it announced fits `server.body_limit_bytes`; otherwise the refusal comes
 * first and no body is asked for (Node used to say 100 on arrival).
 */
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseResponses } from '../support/raw-http.js'
import { BODY_LIMIT, startSecurityFixture, type SecurityFixture } from '../support/security-fixture.js'

let fx: SecurityFixture

beforeAll(async () => {
  fx = await startSecurityFixture()
}, 20_000)

afterAll(async () => {
  await fx?.close()
})

const BODY = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })

interface Conversation {
  /** Everything the gateway wrote, as latin1 text. */
  readonly wire: string
  /** Whether the body was sent (only after "100 Continue"). */
  readonly sentBody: boolean
}

/**
 * Sends a chat request's head with `Expect: 100-continue` and holds the
 * body back until the gateway says "100 Continue"; reads until the gateway
 * closes the connection (bounded: 3 s).
 */
function converse(authorization: string | null, contentLength: number): Promise<Conversation> {
  const url = new URL(fx.url)
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname)
    let wire = ''
    let sentBody = false
    const timer = setTimeout(() => socket.destroy(), 3000)
    socket.on('data', (chunk: Buffer) => {
      wire += chunk.toString('latin1')
      if (!sentBody && wire.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
        sentBody = true
        socket.write(BODY)
      }
    })
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ wire, sentBody })
    })
    const auth = authorization === null ? '' : `Authorization: ${authorization}\r\n`
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n${auth}Content-Type: application/json\r\nContent-Length: ${contentLength}\r\nExpect: 100-continue\r\n\r\n`)
  })
}

describe('Expect: 100-continue', () => {
  it('without credentials: 401 first, no "100 Continue", nothing forwarded, the connection closed', async () => {
    const before = fx.counts().chat
    const { wire, sentBody } = await converse(null, Buffer.byteLength(BODY))
    expect(sentBody).toBe(false)
    expect(wire.startsWith('HTTP/1.1 401 ')).toBe(true)
    expect(parseResponses(Buffer.from(wire, 'latin1'))[0]!.headers.connection).toBe('close')
    expect(fx.counts().chat).toBe(before)
  })

  it('with credentials and a body announced over the limit: 413 first, no "100 Continue"', async () => {
    const { wire, sentBody } = await converse(`Bearer ${fx.keys.all.token}`, BODY_LIMIT + 1)
    expect(sentBody).toBe(false)
    expect(wire.startsWith('HTTP/1.1 413 ')).toBe(true)
  })

  it('with credentials and a body that fits: "100 Continue", then the body, then the answer', async () => {
    const before = fx.counts().chat
    const { wire, sentBody } = await converse(`Bearer ${fx.keys.all.token}`, Buffer.byteLength(BODY))
    expect(sentBody).toBe(true)
    const answers = parseResponses(Buffer.from(wire.slice('HTTP/1.1 100 Continue\r\n\r\n'.length), 'latin1'))
    expect(answers.map((answer) => answer.status)).toEqual([200])
    expect(fx.counts().chat).toBe(before + 1)
  })
})
