// A redis-server of the benchmark's own, on a free port, no persistence (like
// test/support/redis-server.ts): never the machine's shared one.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { connect, createServer } from 'node:net'

export async function startRedisServer() {
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  const deadline = Date.now() + 5000
  while (!(await pings(port))) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode} (port ${port} taken?)`)
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 5 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    /** CPU seconds (user + system) the server has used, from /proc. */
    async cpuSeconds() {
      const fields = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1].split(' ')
      return (Number(fields[11]) + Number(fields[12])) / 100
    },
    async stop() {
      if (child.exitCode !== null) return
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      await exited
    },
  }
}

async function freePort() {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

function pings(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    socket.setTimeout(500, () => socket.destroy())
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      answer += chunk.toString()
      if (answer.includes('\r\n')) socket.end()
    })
    socket.on('close', () => resolve(answer.startsWith('+PONG')))
    socket.on('error', () => undefined)
  })
}
