import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { afterEach, describe, expect, it } from 'vitest'
import { UpstreamCall, type BodySink } from '../../src/proxy/upstream-call.js'
import { until } from '../support/metrics.js'
import { untilStalled } from '../support/stall.js'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

const open: Array<{ server: Server; pool: Pool }> = []

async function serve(handler: Handler, connections = 4): Promise<{ pool: Pool; server: Server; sockets: Set<unknown>; requests: () => number }> {
  let requests = 0
  const sockets = new Set<unknown>()
  const server = createServer((req, res) => {
    requests++
    handler(req, res)
  })
  server.on('connection', (socket) => sockets.add(socket))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections })
  open.push({ server, pool })
  return { pool, server, sockets, requests: () => requests }
}

afterEach(async () => {
  for (const { server, pool } of open.splice(0)) {
    await pool.destroy()
    server.closeAllConnections()
    server.close()
  }
})

const post = { path: '/v1/chat/completions', method: 'POST' as const, body: '{}' }

function collector(): { sink: BodySink; chunks: Buffer[]; ended: Promise<void>; failed: Promise<Error> } {
  const chunks: Buffer[] = []
  let end!: () => void
  let fail!: (error: Error) => void
  const ended = new Promise<void>((resolve) => (end = resolve))
  const failed = new Promise<Error>((resolve) => (fail = resolve))
  return { chunks, ended, failed, sink: { data: (chunk) => chunks.push(chunk) > 0, end, error: fail } }
}

describe('UpstreamCall', () => {
  it('hands over status, headers and every chunk, also those that arrived before anyone consumed', async () => {
    let sentAll!: Promise<unknown>
    const { pool } = await serve((_req, res) => {
      sentAll = once(res, 'finish')
      res.writeHead(201, { 'content-type': 'text/plain', 'x-extra': 'yes' })
      res.write('one,')
      res.end('two')
    })
    const call = new UpstreamCall(pool, post)
    const head = await call.head
    expect(head.statusCode).toBe(201)
    expect(head.headers['x-extra']).toBe('yes')
    // The whole answer arrives before a sink is attached: the server sent it all, and the
    // pool counts the exchange as over only once its end came in (no event says so: bounded poll).
    await sentAll
    await until(() => pool.stats.running === 0, 'the answer to have come in whole')
    expect((await call.readAll()).toString()).toBe('one,two')
  })

  it('pauses the backend while the sink is full and resumes it on request', async () => {
    /** Far more than the socket buffers between server and call hold, far less than the answer. */
    const STALLED_BYTES_CAP = 8 * 2 ** 20
    const total = 32 * 2 ** 20
    let blocked!: () => void
    const serverBlocked = new Promise<void>((resolve) => (blocked = resolve))
    let sent = 0
    let finished = false
    const { pool, server } = await serve((req, res) => {
      // Round trips on another connection while the big answer is held up.
      if (req.url === '/ping') return void res.end()
      res.writeHead(200, { 'content-length': String(total) })
      const chunk = Buffer.alloc(64 * 1024, 'x')
      const pump = () => {
        while (sent < total) {
          sent += chunk.length
          if (!res.write(chunk)) {
            blocked()
            res.once('drain', pump)
            return
          }
        }
        finished = true
        res.end()
      }
      pump()
    })
    const ping = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ping`
    const call = new UpstreamCall(pool, post)
    await call.head
    let received = 0
    let full = true
    let end!: () => void
    const ended = new Promise<void>((resolve) => (end = resolve))
    call.consume({
      data: (chunk) => {
        received += chunk.length
        return !full
      },
      end,
      error: (error) => {
        throw error
      },
    })
    // The server's first blocked write comes once the socket buffers filled, whatever
    // the sink said; wait until it stopped getting anywhere while other I/O went on.
    await serverBlocked
    const stalledAt = await untilStalled(() => sent, async () => (await fetch(ping)).text(), 'the bytes the server wrote')
    // Socket buffers hold a few MiB at most; the rest waits for resume(). Had the
    // call not paused, the server would have written all 32 MiB and finished.
    expect(stalledAt).toBeLessThan(STALLED_BYTES_CAP)
    expect(finished).toBe(false)
    expect(received).toBeLessThanOrEqual(stalledAt)
    full = false
    call.resume()
    await ended
    expect(received).toBe(total)
  })

  it('aborts a call still queued for a connection: the backend never sees it', async () => {
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    const backend = await serve((_req, res) => {
      void held.then(() => res.end('done'))
    }, 1)
    const first = new UpstreamCall(backend.pool, post)
    const second = new UpstreamCall(backend.pool, post)
    const reason = new Error('client went away')
    second.abort(reason)
    await expect(second.head).rejects.toBe(reason)
    expect(second.aborted).toBe(true)
    release()
    expect((await (await first.head, first.readAll())).toString()).toBe('done')
    expect(backend.requests()).toBe(1)
  })

  it('reports a backend that dies after its headers as a body error', async () => {
    const { pool } = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100' })
      res.write('partial', () => res.destroy())
    })
    const call = new UpstreamCall(pool, post)
    expect((await call.head).statusCode).toBe(200)
    const { sink, failed } = collector()
    call.consume(sink)
    const error = await failed
    expect((error as Error & { code?: string }).code).toBe('UND_ERR_SOCKET')
  })

  it('rejects the head when the backend cannot be reached', async () => {
    const { pool, server } = await serve(() => undefined)
    server.close()
    await once(server, 'close')
    const call = new UpstreamCall(pool, post)
    await expect(call.head).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })

  it('drop() after a whole small answer keeps the connection for the next call', async () => {
    // Headers and body leave in one write, so both are in when the head settles.
    const backend = await serve((_req, res) => res.writeHead(503, { 'content-length': 1 }).end('x'), 1)
    const first = new UpstreamCall(backend.pool, post)
    await first.head
    first.drop()
    const second = new UpstreamCall(backend.pool, post)
    await second.head
    expect((await second.readAll()).toString()).toBe('x')
    expect(backend.sockets.size).toBe(1)
  })

  it('drop() does not wait for a body that is still coming: the exchange is aborted', async () => {
    const closed: Promise<unknown>[] = []
    const backend = await serve((req, res) => {
      closed.push(once(req.socket, 'close'))
      res.writeHead(503, { 'content-type': 'application/json' })
      res.write('{"error": "overloaded, and this body never ends')
    }, 1)
    const first = new UpstreamCall(backend.pool, post)
    await first.head
    first.drop()
    await closed[0]
    expect(first.aborted).toBe(true)
  })
})
