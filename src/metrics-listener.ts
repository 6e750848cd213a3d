/**
 * `/metrics` on its own port (`server.metrics_port`), so a scraper can reach
 * it on an internal interface while the public listener does not expose it.
 * Plain node:http: one route, no auth, nothing else to serve.
 */
import { createServer, type Server } from 'node:http'
import { exposition } from './metrics/exposition.js'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'
import { GatewayError } from './errors/gateway-error.js'
import { listenOn, urlOf } from './listen.js'

const NOT_SERVED = JSON.stringify(new GatewayError('not_found', 'Only GET (or HEAD) /metrics is served here.').toBody())

export interface MetricsListener {
  readonly url: string
  close(): Promise<void>
}

export async function startMetricsListener(registry: Registry, host: string, port: number): Promise<MetricsListener> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0]
    // As on the public port: a trailing slash and HEAD (a probe checking the scrape target) are served too.
    if ((request.method !== 'GET' && request.method !== 'HEAD') || (path !== '/metrics' && path !== '/metrics/')) {
      response.writeHead(404, { 'content-type': 'application/json' })
      response.end(NOT_SERVED)
      return
    }
    exposition(registry).then(
      (text) => {
        response.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) })
        response.end(request.method === 'HEAD' ? undefined : text)
      },
      () => {
        response.writeHead(500)
        response.end()
      },
    )
  })
  await listenOn(server, host, port)
  return {
    url: urlOf(host, (server.address() as AddressInfo).port),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
