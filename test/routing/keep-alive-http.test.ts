/**
 * `timeouts.keep_alive_ms`: the gateway closes an idle pooled connection to
 * a backend or upstream itself, before the server's own idle timeout can
 * close it under a request being written (uvicorn: 5 s, unannounced; the
 * 30 s the pools used before gave occasional 502s). Here the servers never
 * close idle connections, so a close that arrives can only be the gateway's.
 */
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { makeKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { listenForTest } from '../support/listen.js'

const key = makeKey('team-a', ['chat', 'training'])
const cleanups = trackedAfterEach()

const COMPLETION = JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] })

interface PatientServer {
  readonly url: string
  /** Resolves with the socket that carried the first request to `path`, once its peer (the gateway) ends it. */
  readonly endedByPeer: (path: string) => Promise<Socket>
}

/**
 * Answers everything, and never closes an idle connection within a test's
 * time. `announce`: say so in `Keep-Alive: timeout=600` (a client may keep
 * the connection that long); otherwise say nothing, as uvicorn does.
 */
async function patientServer(announce: boolean): Promise<PatientServer> {
  const ended = new Map<string, Promise<Socket>>()
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!
      if (!ended.has(path)) {
        const socket = req.socket
        ended.set(path, once(socket, 'end').then(() => socket))
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) }).end(COMPLETION)
    })
  })
  // 0: no idle timeout at all, and no Keep-Alive header.
  server.keepAliveTimeout = announce ? 600_000 : 0
  const url = await listenForTest(server, cleanups)
  return {
    url,
    endedByPeer: (path) => ended.get(path) ?? Promise.reject(new Error(`no request to ${path} yet`)),
  }
}

describe('timeouts.keep_alive_ms', () => {
  it('closes the idle connection to a chat backend and to a platform upstream, whatever the server announces', async () => {
    const backend = await patientServer(false)
    const upstream = await patientServer(true)
    const gw = await cleanups.gateway({
      auth: { keys: [key.entry] },
      models: [{ name: 'm', timeouts: { keep_alive_ms: 150 }, backends: [{ url: backend.url, name: 'b' }] }],
      upstreams: { training: { url: upstream.url, timeouts: { keep_alive_ms: 150 } } },
    })
    const headers = { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' }

    const chat = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) })
    expect(chat.status).toBe(200)
    await chat.text()
    const job = { model_id: '00000000-0000-4000-8000-000000000000', trajectory_groups: [] }
    const training = await fetch(`${gw.url}/v1/preview/training-jobs`, { method: 'POST', headers, body: JSON.stringify(job) })
    expect(training.status).toBe(200)
    await training.text()

    // Each resolves only when the gateway ended the connection (the servers never do).
    const [chatSocket, trainingSocket] = await Promise.all([backend.endedByPeer('/v1/chat/completions'), upstream.endedByPeer('/v1/preview/training-jobs')])
    expect(chatSocket.readableEnded).toBe(true)
    expect(trainingSocket.readableEnded).toBe(true)
  })
})
