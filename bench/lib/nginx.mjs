// nginx proxy_pass with an upstream keepalive pool: the reference a C reverse
// proxy sets. Started only when nginx is installed (apt-get install nginx-light).
import { spawn, execFileSync } from 'node:child_process'
import { mkdtemp, writeFile, mkdir } from 'node:fs/promises'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export function nginxAvailable() {
  try {
    execFileSync('nginx', ['-v'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

async function freePort() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

async function acceptsConnections(port, attempts = 100) {
  for (let i = 0; i < attempts; i++) {
    const ok = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end()
        resolve(true)
      })
      socket.once('error', () => resolve(false))
    })
    if (ok) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`nginx did not start listening on ${port}`)
}

export async function startNginx(backendUrl) {
  const prefix = await mkdtemp(join(tmpdir(), 'sluice-bench-nginx-'))
  await mkdir(join(prefix, 'tmp'))
  const port = await freePort()
  const upstream = new URL(backendUrl).host
  const conf = `
worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/tmp;
  proxy_temp_path ${prefix}/tmp;
  # Below the stand-in backend's keep-alive (Node's default, 5 s): with
  # nginx's default 60 s it reused sockets the backend had just closed after
  # the idle gaps of the turns, and a POST on one is a 502, not a retry.
  upstream backend { server ${upstream}; keepalive 256; keepalive_timeout 4s; }
  server {
    listen 127.0.0.1:${port} reuseport;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`
  const file = join(prefix, 'nginx.conf')
  await writeFile(file, conf)
  const child = spawn('nginx', ['-p', prefix, '-c', file], { stdio: ['ignore', 'ignore', 'inherit'] })
  await acceptsConnections(port)
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', resolve)
        child.kill('SIGQUIT')
      }),
  }
}
