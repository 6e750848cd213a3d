// Loaded into a target with `node --import` by bench/first-byte.mjs: where a
// stream's first byte goes inside the target. Per response: when Node had
// parsed its request's headers (http.server.request.start), when the answer's
// head was written (writeHead: for a stream, once the upstream head came) and
// when its first bytes were. Per upstream request (undici's diagnostics
// channels): from its creation to the upstream head. Steps
// (lib/signal-steps.mjs), repeated per round: start; stop, the timings.
import dc from 'node:diagnostics_channel'
import http from 'node:http'
import { serveSteps } from './signal-steps.mjs'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10)
const timings = new WeakMap()
let recording = false
let responses = []
let upstream = []

dc.subscribe('http.server.request.start', ({ response }) => {
  if (recording) timings.set(response, { arrived: performance.now(), head: 0 })
})
dc.subscribe('undici:request:create', ({ request }) => {
  if (recording) timings.set(request, performance.now())
})
dc.subscribe('undici:request:headers', ({ request }) => {
  const created = timings.get(request)
  if (created !== undefined) upstream.push(performance.now() - created)
})

const { writeHead, write } = http.ServerResponse.prototype
http.ServerResponse.prototype.writeHead = function (...args) {
  const t = timings.get(this)
  if (t !== undefined && t.head === 0) t.head = performance.now()
  return writeHead.apply(this, args)
}
http.ServerResponse.prototype.write = function (...args) {
  const t = timings.get(this)
  if (t !== undefined && t.head > 0) {
    responses.push({ to_head_ms: t.head - t.arrived, to_first_write_ms: performance.now() - t.arrived })
    timings.delete(this)
  }
  return write.apply(this, args)
}

const start = () => {
  recording = true
  responses = []
  upstream = []
  return ''
}
const stop = () => {
  recording = false
  return JSON.stringify({ responses, upstream })
}
serveSteps(Array.from({ length: 2 * ROUNDS }, (_, i) => (i % 2 === 0 ? start : stop)))
