/** A test's own node:http server on a free loopback port, closed with its connections after the test. */
import { once } from 'node:events'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { RecordingServer } from '../../src/dev/recording-server.js'
import type { Cleanups } from './cleanups.js'

/** Listens on 127.0.0.1:0 and returns the server's http:// URL. */
export async function listenForTest(server: Server, cleanups: Cleanups): Promise<string> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanups.push(() => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeAllConnections()
    return closed
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** A platform upstream that records every request and answers 200 `{}` (the caller closes it). */
export async function okUpstream(): Promise<RecordingServer> {
  const upstream = new RecordingServer((_request, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{}')
  })
  await upstream.listen()
  return upstream
}
