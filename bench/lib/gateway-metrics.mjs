// Reads a gateway's /metrics from outside: samples as { name, labels, value }
// and sums over the samples that match a name and some labels. Also the
// latency of GET /healthz, the outside view of the gateway's event-loop lag.
import { request } from 'undici'

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export async function scrapeMetrics(url) {
  const response = await request(`${url}/metrics`)
  const text = await response.body.text()
  if (response.statusCode !== 200) throw new Error(`/metrics: status ${response.statusCode}`)
  const samples = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = SAMPLE.exec(line)
    if (match === null) continue
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(LABEL)].map((m) => [m[1], m[2]]))
    samples.push({ name: match[1], labels, value: Number(match[3]) })
  }
  return samples
}

export function sumOf(samples, name, labels = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((total, s) => total + s.value, 0)
}

/** `sluice_requests_total` for one model, by status code. */
export function requestsByStatus(samples, model) {
  const byStatus = {}
  for (const s of samples) {
    if (s.name !== 'sluice_requests_total' || s.labels.model !== model) continue
    byStatus[s.labels.status] = (byStatus[s.labels.status] ?? 0) + s.value
  }
  return byStatus
}

/** Milliseconds each of `probes` sequential GET /healthz took: median and max. */
export async function healthzLatency(url, probes = 10) {
  const times = []
  for (let i = 0; i < probes; i++) {
    const started = performance.now()
    const response = await request(`${url}/healthz`)
    await response.body.dump()
    times.push(performance.now() - started)
  }
  times.sort((a, b) => a - b)
  return { median_ms: times[Math.floor(times.length / 2)], max_ms: times.at(-1) }
}

/** Least-squares slope of y over x. */
export function slope(xs, ys) {
  const n = xs.length
  if (n < 2) return NaN
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my)
    den += (xs[i] - mx) ** 2
  }
  return den === 0 ? NaN : num / den
}
