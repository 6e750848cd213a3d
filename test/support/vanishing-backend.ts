/**
 * A backend that passes its health checks and then stops listening: how a
 * test gets a refused connection (ECONNREFUSED) at the chat path. A closed
 * port from the start no longer does: its first failed check takes it out of
 * routing (src/routing/health-state.ts), so whether a request met it would be
 * a race with that check. Its /health answers close their connection, so no
 * idle keep-alive socket in the gateway's pool outlives `vanish()`.
 */
import { createServer } from 'node:http'
import type { Cleanups } from './cleanups.js'
import { listenForTest } from './listen.js'
import { untilMetric } from './metrics.js'

export interface VanishingBackend {
  readonly url: string
  /** Stops listening: from now on every connection is refused. */
  vanish(): Promise<void>
}

export async function vanishingBackend(cleanups: Cleanups): Promise<VanishingBackend> {
  let vanished = false
  const server = createServer((req, res) => {
    req.resume()
    const status = req.method === 'GET' && req.url === '/health' ? 200 : 404
    res.writeHead(status, { 'content-length': 0, connection: 'close' }).end()
  })
  const url = await listenForTest(server, cleanups)
  return {
    url,
    vanish: async () => {
      if (vanished) return
      vanished = true
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}

/**
 * Waits until the gateway's checks have confirmed each named backend of
 * `model` (`sluice_backend_up` 1), then makes them all vanish.
 */
export async function vanishOnceConfirmed(gatewayUrl: string, model: string, backends: Readonly<Record<string, VanishingBackend>>): Promise<void> {
  for (const name of Object.keys(backends)) await untilMetric(gatewayUrl, 'sluice_backend_up', { model, backend: name }, 1)
  for (const backend of Object.values(backends)) await backend.vanish()
}
