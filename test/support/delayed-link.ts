/**
 * A TCP relay on a free loopback port that holds every chunk `delayMs` in
 * each direction before passing it on, in order: a server that far away
 * (a Redis in another zone), for tests of what counts as slow.
 */
import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'

export interface DelayedLink {
  readonly port: number
  close(): Promise<void>
}

export async function delayedLink(targetPort: number, delayMs: number): Promise<DelayedLink> {
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const target = connect(targetPort, '127.0.0.1')
    for (const socket of [client, target]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      // Either side gone: so is the other (an error is the close that follows it).
      socket.on('error', () => undefined)
      socket.on('close', () => {
        client.destroy()
        target.destroy()
      })
    }
    // Equal delays keep the order: timers of one duration fire in the order they were set.
    client.on('data', (chunk: Buffer) => setTimeout(() => target.write(chunk), delayMs))
    target.on('data', (chunk: Buffer) => setTimeout(() => client.write(chunk), delayMs))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
