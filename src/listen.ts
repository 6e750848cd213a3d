/** Opening a node:http listener, shared by the gateway's port and the metrics port. */
import type { Server } from 'node:http'

/** Resolves once the server listens; rejects with the listen error (address in use, not permitted), leaving no listener behind. */
export function listenOn(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

/** The http:// URL of a listener, an IPv6 host in brackets. */
export function urlOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}
