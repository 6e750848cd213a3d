/**
 * A generation's idle() and close() with more than one caller: a shutdown
 * during a reload waits on a retiring generation the reload already waits
 * on, and both then close it. A real generation behind a node:http server on
 * port 0, in front of a backend that holds its answer until the test lets it go.
 */
import { createServer } from 'node:http'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { startGeneration } from '../../src/generation.js'
import { createLogger } from '../../src/logger.js'
import { cleanupsAfterEach } from '../support/cleanups.js'
import { deferred } from '../support/deferred.js'
import { configFrom, makeKey } from '../support/gateway.js'
import { listenForTest } from '../support/listen.js'

const key = makeKey('gen', ['chat'])
const cleanups = cleanupsAfterEach()
const silent = createLogger('silent', new Writable({ write: (_chunk, _encoding, done) => done() }))

describe('a generation with a request in flight', () => {
  it('resolves every idle() waiter when its last request ends, and close() twice closes once', async () => {
    const arrived = deferred()
    const release = deferred()
    const backend = createServer((request, response) => {
      if (request.url !== '/v1/chat/completions') return void response.writeHead(200).end()
      request.resume()
      arrived.resolve()
      void release.promise.then(() => {
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ id: 'c', object: 'chat.completion', model: 'm', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
      })
    })
    const backendUrl = await listenForTest(backend, cleanups)
    const generation = await startGeneration(
      configFrom({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backendUrl }] }] }),
      silent,
      {},
    )
    cleanups.push(() => generation.close())
    const url = await listenForTest(createServer((request, response) => generation.handle(request, response)), cleanups)

    const answer = fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    })
    await arrived.promise
    const settled: string[] = []
    const reloadWaits = generation.idle().then(() => settled.push('reload'))
    const shutdownWaits = generation.idle().then(() => settled.push('shutdown'))
    expect(settled).toEqual([])

    release.resolve()
    expect((await answer).status).toBe(200)
    await Promise.all([reloadWaits, shutdownWaits])
    expect(settled.sort()).toEqual(['reload', 'shutdown'])

    const first = generation.close()
    expect(generation.close()).toBe(first)
    await first
  })
})
