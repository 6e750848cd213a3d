// Open-loop load: requests are started on a fixed schedule whatever the
// answers do, so a slow target is charged for the queue it causes (no
// coordinated omission): latency runs from the scheduled start, or from the
// actual send when the load generator sent early (a request is sent at once
// when its time is less than 1 ms away, and a latency must not come out
// shorter than the exchange, or negative).
//
// `leadInSeconds` of the same schedule go first and are not counted. The
// client opens its connections then: a run that starts from none makes the
// target accept several at once while the first requests queue behind them
// (10-24 ms for the gateway and the bare Node proxy alike, on 2026-11-25).
// One continuous 10 s run pays that once; measured in 5 slices, each slice
// paid it again, into a p99 that is the 50th-slowest request.
import { Pool } from 'undici'
import { percentile } from './interleaved.mjs'

export async function openLoop({ url, path, headers, body, rate, seconds, leadInSeconds = 0 }) {
  const pool = new Pool(url, { connections: 512, pipelining: 1 })
  const latencies = []
  let errors = 0
  let non2xx = 0
  const leadIn = Math.round(rate * leadInSeconds)
  const total = leadIn + rate * seconds
  const intervalMs = 1000 / rate
  const start = performance.now()
  const pending = []
  for (let i = 0; i < total; i++) {
    const scheduled = start + i * intervalMs
    const wait = scheduled - performance.now()
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait))
    const from = Math.min(scheduled, performance.now())
    const counted = i >= leadIn
    pending.push(
      pool
        .request({ path, method: 'POST', headers, body })
        .then(async (response) => {
          await response.body.dump()
          if (!counted) return
          if (response.statusCode >= 300) non2xx++
          latencies.push(performance.now() - from)
        })
        .catch(() => {
          if (counted) errors++
        }),
    )
  }
  await Promise.all(pending)
  await pool.close()
  latencies.sort((a, b) => a - b)
  return { sent: total - leadIn, completed: latencies.length, errors, non2xx, p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99), latencies_ms: latencies }
}

/**
 * Streaming: `connections` workers in a loop; time to first byte and last
 * byte of each answer. Runs for `seconds`, or until `streams` answers have
 * ended when that comes first (a warm-up is a count of requests: V8 optimizes
 * a function after enough calls, not after enough time).
 */
export async function streamLoop({ url, path, headers, body, connections, seconds, streams = Infinity }) {
  const pool = new Pool(url, { connections })
  const firstByte = []
  const lastByte = []
  let errors = 0
  const deadline = performance.now() + seconds * 1000
  const worker = async () => {
    while (performance.now() < deadline && lastByte.length < streams) {
      const started = performance.now()
      try {
        const response = await pool.request({ path, method: 'POST', headers, body })
        let first = true
        for await (const _chunk of response.body) {
          if (first) {
            firstByte.push(performance.now() - started)
            first = false
          }
        }
        lastByte.push(performance.now() - started)
      } catch {
        errors++
      }
    }
  }
  const began = performance.now()
  await Promise.all(Array.from({ length: connections }, worker))
  const elapsed = (performance.now() - began) / 1000
  await pool.close()
  firstByte.sort((a, b) => a - b)
  lastByte.sort((a, b) => a - b)
  return { completed: lastByte.length, errors, seconds: elapsed, rps: lastByte.length / elapsed, ttfb_p50_ms: percentile(firstByte, 50), ttlb_p50_ms: percentile(lastByte, 50), first_byte_ms: firstByte, last_byte_ms: lastByte }
}
