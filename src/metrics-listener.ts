/**
 * `/metrics` on its own port (`server.metrics_port`), so a scraper can reach
 * it on an internal interface while the public listener does not expose it.
 * Plain node:http: one route, no auth, nothing else to serve.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'

export interface MetricsListener {
  readonly url: string
  close(): Promise<void>
}

export async function startMetricsListener(registry: Registry, host: string, port: number): Promise<MetricsListener> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0]
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ error: { message: 'Only GET /metrics is served here.', type: 'not_found_error', param: null, code: 'not_found' } }))
      return
    }
    registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': registry.contentType })
        response.end(text)
      },
      () => {
        response.writeHead(500)
        response.end()
      },
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const address = server.address() as AddressInfo
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
