/**
 * The servers of a reload that moves backend "x" to another URL under the
 * same name: its old URL fails every health check (and counts them), its new
 * one passes, and "c" holds one stream open until released, so the
 * generation that served it stays alive past the reload and goes on checking
 * x's old URL.
 */
import { createServer } from 'node:http'
import type { Cleanups } from './cleanups.js'
import { deferred } from './deferred.js'
import { listenForTest } from './listen.js'

export interface MovedBackend {
  readonly oldUrl: string
  readonly newUrl: string
  /** Backend "c": answers GETs 200; a chat request gets a stream that ends at release(). */
  readonly holding: string
  /** Health checks x's old URL has answered so far. */
  oldUrlChecks(): number
  release(): void
}

export async function movedBackend(cleanups: Cleanups): Promise<MovedBackend> {
  let checks = 0
  const oldUrl = await listenForTest(
    createServer((_req, res) => {
      checks++
      res.writeHead(500, { 'content-length': 0 }).end()
    }),
    cleanups,
  )
  const newUrl = await listenForTest(createServer((_req, res) => res.writeHead(200, { 'content-length': 0 }).end()), cleanups)
  const released = deferred()
  const holding = await listenForTest(
    createServer((req, res) => {
      if (req.method !== 'POST') return void res.writeHead(200, { 'content-length': 0 }).end()
      req.resume()
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: {"choices":[]}\n\n')
      void released.promise.then(() => res.end('data: [DONE]\n\n'))
    }),
    cleanups,
  )
  cleanups.push(async () => released.resolve())
  return { oldUrl, newUrl, holding, oldUrlChecks: () => checks, release: () => released.resolve() }
}
