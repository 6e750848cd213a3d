/**
 * A client reading a large whole (non-streamed) chat answer slowly but
 * steadily keeps its connection and gets all of it: the guard against a
 * client that reads nothing (stalled-reader.ts) must see its progress.
 */
import { createServer } from 'node:http'
import { connect } from 'node:net'
import { once } from 'node:events'
import { expect, it } from 'vitest'
import { makeKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const key = makeKey('k', ['chat'])

// Regression (diff review, session 27): written in one piece, the answer counted whole in the response's
// writableLength until the kernel had taken all of it, so a steady reader showed no progress and was cut off
// part-way after idle_ms: a truncated 200.
it('a steady slow reader of a large whole answer gets all of it', async () => {
  const content = 'x'.repeat(24 * 1024 * 1024)
  const body = JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })
  const backend = await listenForTest(
    createServer((req, res) => {
      req.resume()
      req.on('end', () => (req.url === '/health' ? res.end('ok') : res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)))
    }),
    cleanups,
  )
  const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', timeouts: { idle_ms: 2500 }, backends: [{ url: backend }] }] })
  const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
  const socket = connect({ port: Number(new URL(gw.url).port), host: '127.0.0.1' })
  cleanups.push(() => socket.destroy())
  let received = 0
  // In short reads with pauses: 24 MiB take several times idle_ms, always making progress, fast enough to
  // drain the kernel's socket buffers (a few MiB on loopback) within idle_ms, which is all the gateway can see.
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length
    socket.pause()
    setTimeout(() => socket.resume(), 10)
  })
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key.token}\r\nContent-Type: application/json\r\nContent-Length: ${chat.length}\r\nConnection: close\r\n\r\n${chat}`)
  await once(socket, 'close')
  expect(received).toBeGreaterThan(Buffer.byteLength(body))
  expect(gw.logLines().filter((line) => line.msg === 'request completed' && line.route === 'chat').map((line) => line.status)).toEqual([200])
}, 60_000)
