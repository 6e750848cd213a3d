/** Listening and closing for the stand-in servers: one place for the address and the forced close. */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Listens and resolves with the server's URL (IPv6 hosts bracketed). */
export function listenOn(server: Server, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      const address = server.address() as AddressInfo
      resolve(`http://${host.includes(':') ? `[${host}]` : host}:${address.port}`)
    })
  })
}

/** Stops listening and destroys open sockets, so a hanging request never holds a test up. */
export function closeForcefully(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()))
    server.closeAllConnections()
  })
}
