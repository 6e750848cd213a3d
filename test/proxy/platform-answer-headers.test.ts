/**
 * A platform upstream's answer headers reach the client as they were sent
 * (DESIGN.md: "its headers less hop-by-hop ones"), on success and error
 * answers alike. Regressions (platform review, 2026-11-28): a header byte past
 * ASCII (a latin1 `é` in a filename) reached the client as two bytes on a
 * 200, because Node wrote the head `flushHeaders()` sends as UTF-8; and an
 * error answer without a Content-Type gained `application/octet-stream`.
 */
import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import { makeKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { rawExchange } from '../support/raw-http.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const key = makeKey('client', ['checkpoints'])
const MODEL_ID = '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43'
/** `résumé.json` with é as the single latin1 byte 0xE9, as a header value string holds it. */
const FILENAME = 'attachment; filename="r\u00e9sum\u00e9.json"'

async function gatewayBefore(status: number, headers: Record<string, string>): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    // A Buffer: with a string body Node writes the head as UTF-8 too (é as two bytes).
    res.writeHead(status, { ...headers, 'content-length': 2 }).end(Buffer.from('{}'))
  })
  const url = await listenForTest(server, cleanups)
  const gw = await cleanups.gateway({
    auth: { keys: [key.entry] },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: { checkpoints: { url, auth: { bearer: 'upstream-token' } } },
  })
  return gw.url
}

function listCheckpoints(url: string) {
  return rawExchange(url, `GET /v1/preview/models/${MODEL_ID}/checkpoints HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nConnection: close\r\n\r\n`)
}

describe('platform answer headers', () => {
  it.each([200, 404])('a header byte past ASCII reaches the client as the one byte it was (%i)', async (status) => {
    const exchange = await listCheckpoints(await gatewayBefore(status, { 'content-type': 'application/json', 'content-disposition': FILENAME }))
    expect(exchange.responses[0]?.status).toBe(status)
    // The wire read as latin1: one byte per character.
    expect(exchange.wire).toContain(`content-disposition: ${FILENAME}`)
  })

  it.each([200, 404])('an answer without a Content-Type gets none (%i)', async (status) => {
    const exchange = await listCheckpoints(await gatewayBefore(status, {}))
    expect(exchange.responses[0]?.status).toBe(status)
    expect(exchange.responses[0]?.headers['content-type']).toBeUndefined()
    expect(exchange.responses[0]?.text).toBe('{}')
  })
})
