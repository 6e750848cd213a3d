// The floor for a Node proxy on this machine: node:http in, one undici Pool
// out, the request body forwarded as received and the answer written as it
// arrives. No auth, no validation, no admission, no metrics, no logs. It is a
// reference, not a product: what the gateway costs above it is our code,
// what it costs above nginx is Node's.
import { createServer } from 'node:http'
import { Pool } from 'undici'

const [backendUrl] = process.argv.slice(2)
const pool = new Pool(backendUrl, { connections: 4096, keepAliveTimeout: 30_000 })

/** Writes the backend's answer to `res` chunk by chunk (undici's dispatch handler API). */
function relayTo(res) {
  return {
    onRequestStart() {},
    onResponseStart(_controller, statusCode, headers) {
      const out = { 'content-type': headers['content-type'] }
      if (headers['content-length'] !== undefined) out['content-length'] = headers['content-length']
      res.writeHead(statusCode, out)
    },
    onResponseData(_controller, chunk) {
      res.write(chunk)
    },
    onResponseEnd() {
      res.end()
    },
    onResponseError(_controller, error) {
      if (!res.headersSent) res.writeHead(502)
      res.end(String(error.message))
    },
  }
}

const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
    const headers = { 'content-type': 'application/json' }
    if (req.headers['x-request-id'] !== undefined) headers['x-request-id'] = req.headers['x-request-id']
    pool.dispatch({ path: req.url, method: req.method, headers, body }, relayTo(res))
  })
})
server.keepAliveTimeout = 30_000
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })))
process.once('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  pool.close().then(() => process.exit(0))
})
