// Adversarial chat bodies, 1 to 8 MiB (server.body_limit_bytes' default):
// how long each holds the gateway's event loop. A body costs more to check
// and parse by its shape than by its size, and two shapes found by reviews
// on 2026-11-26 held the loop for 6-32 s while passing every limit. Each
// shape is sent at 1, 2, 4 and 8 MiB, one request at a time, while GET
// /healthz is polled back to back: its longest round trip is the longest the
// loop was held. The backend parses the body too, but in its own process.
// `npm run bench -- bodies`; ~1 minute.
import { request } from 'undici'
import { BENCH_TOKEN } from './lib/bench-gateway.mjs'
import { startChildServer } from './lib/child-server.mjs'
import { machine, writeResult } from './lib/results.mjs'

const MIB = 1024 * 1024
const SIZES_MIB = [1, 2, 4, 8]
const message = '{"role":"user","content":"hi"}'
const withMembers = (members) => `{"model":"bench","messages":[${message}]${members}`

/** `prefix`, then `item` (or item(i)) joined by `separator` while the whole stays within `bytes`, then `suffix`. */
function filled(prefix, item, suffix, bytes, separator = ',') {
  const parts = []
  let length = prefix.length + suffix.length
  for (let i = 0; ; i++) {
    const next = typeof item === 'function' ? item(i) : item
    if (length + next.length + separator.length > bytes) break
    parts.push(next)
    length += next.length + separator.length
  }
  return prefix + parts.join(separator) + suffix
}

const SHAPES = {
  'one long prompt': (bytes) => filled('{"model":"bench","messages":[{"role":"user","content":"', 'x', '"}]}', bytes, ''),
  'a prompt of escaped quotes': (bytes) => filled('{"model":"bench","messages":[{"role":"user","content":"', '\\"', '"}]}', bytes, ''),
  'many messages': (bytes) => filled('{"model":"bench","messages":[', message, ']}', bytes),
  'stop_token_ids of 1s': (bytes) => filled(withMembers(',"stop_token_ids":['), '1', ']}', bytes),
  'a "constructor" member, then numbers': (bytes) => filled(withMembers(',"constructor":1,"x":['), '1', ']}', bytes),
  '1e308 (finite), then numbers': (bytes) => filled(withMembers(',"z":1e308,"x":['), '1', ']}', bytes),
  '40-name objects, no backslash': (bytes) => {
    const names = Array.from({ length: 40 }, (_, i) => `"n${String(i).padStart(8, '0')}":0`).join(',')
    return filled(withMembers(',"x":['), `{${names}}`, ']}', bytes)
  },
  'objects with an escaped name': (bytes) => filled(withMembers(',"x":['), '{"\\u0061bcdefghi":1}', ']}', bytes),
  'logit_bias over token ids': (bytes) => filled(withMembers(',"logit_bias":{'), (i) => `"${i}":-1`, '}}', bytes),
  'tiny strings': (bytes) => filled(withMembers(',"x":['), '"a"', ']}', bytes),
  'empty objects (over the container cap)': (bytes) => filled(withMembers(',"x":['), '{}', ']}', bytes),
  'distinct names (over the layout cap)': (bytes) => filled(withMembers(',"x":['), (i) => `{"k${i}":1}`, ']}', bytes),
  'distinct top-level names, up to the layout cap': (bytes) => filled(withMembers(','), (i) => `"\\u0041${i}":1`, '}', Math.min(bytes, 131000 * 14)),
}

/** The longest GET /healthz round trip while `work` runs, polled back to back. */
async function longestHealthzWhile(url, work) {
  let running = true
  let longest = 0
  const poll = (async () => {
    while (running) {
      const started = performance.now()
      const response = await request(`${url}/healthz`)
      await response.body.dump()
      longest = Math.max(longest, performance.now() - started)
    }
  })()
  let result
  try {
    result = await work()
  } finally {
    running = false
    // The poll under way when the work ended may be the one it held up.
    await poll
  }
  return { result, longestMs: longest }
}

async function send(url, body) {
  const started = performance.now()
  const response = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_TOKEN}`, 'content-type': 'application/json' },
    body,
  })
  const text = await response.body.text()
  const code = response.statusCode === 200 ? null : (JSON.parse(text).error?.code ?? null)
  return { status: response.statusCode, code, ms: performance.now() - started }
}

async function main() {
  const backend = await startChildServer('bench/servers/backend.mjs', [])
  const gateway = await startChildServer('bench/servers/gateway.mjs', [backend.url])
  const rows = []
  try {
    console.log(`Sluice adversarial bodies — ${new Date().toISOString()}, ${machine().cores} cores, ${machine().cpu}, Node ${process.version}`)
    console.log('shape'.padEnd(48), SIZES_MIB.map((mib) => `${mib} MiB: answer, longest /healthz`.padEnd(38)).join(''))
    for (const [shape, make] of Object.entries(SHAPES)) {
      const cells = []
      for (const mib of SIZES_MIB) {
        const body = Buffer.from(make(mib * MIB - 4096))
        const { result, longestMs } = await longestHealthzWhile(gateway.url, () => send(gateway.url, body))
        rows.push({ shape, bytes: body.length, status: result.status, code: result.code, answer_ms: Math.round(result.ms), longest_healthz_ms: Math.round(longestMs) })
        cells.push(`${result.status}${result.code === null ? '' : ` ${result.code}`} in ${result.ms.toFixed(0)} ms, ${longestMs.toFixed(0)} ms`.padEnd(38))
      }
      console.log(shape.padEnd(48), cells.join(''))
    }
  } finally {
    await Promise.all([gateway.stop(), backend.stop()])
  }
  const worst = rows.reduce((a, b) => (b.longest_healthz_ms > a.longest_healthz_ms ? b : a))
  console.log(`longest hold: ${worst.longest_healthz_ms} ms (${worst.shape}, ${(worst.bytes / MIB).toFixed(2)} MiB)`)
  const json = { date: new Date().toISOString(), command: 'npm run bench -- bodies', machine: machine(), rows }
  console.log(`written to ${await writeResult('bodies.json', json)}`)
}

await main()
