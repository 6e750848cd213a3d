/**
 * Reading a gateway's `/metrics` in tests: samples by name and labels, and
 * polling until a condition holds (each poll a real round trip, bounded by
 * a deadline, never a fixed sleep standing in for an event).
 */
import parsePrometheusText from 'parse-prometheus-text-format'

export type Labels = Readonly<Record<string, string>>

export interface Sample {
  readonly labels: Labels
  readonly value: number
}

/** Every sample of `name` in a Prometheus text exposition. */
export function metricSamples(text: string, name: string): Sample[] {
  const family = parsePrometheusText(text).find((f) => f.name === name)
  return (family?.metrics ?? []).map((m) => ({ labels: m.labels ?? {}, value: Number(m.value) }))
}

const matches = (sample: Sample, labels: Labels) => Object.entries(labels).every(([k, v]) => sample.labels[k] === v)

/** The first sample of `name` carrying `labels` (others may be present too), or undefined when there is none. */
export function metricValue(text: string, name: string, labels: Labels = {}): number | undefined {
  return metricSamples(text, name).find((s) => matches(s, labels))?.value
}

/** The sum of the samples of `name` carrying `labels` (0 when there are none). */
export function metricSum(text: string, name: string, labels: Labels = {}): number {
  return metricSamples(text, name)
    .filter((s) => matches(s, labels))
    .reduce((sum, s) => sum + s.value, 0)
}

/** `GET <baseUrl>/metrics` as text. */
export async function scrape(baseUrl: string): Promise<string> {
  return (await fetch(`${baseUrl}/metrics`)).text()
}

/** One sample of a gateway's metric, or undefined when absent. */
export async function scrapeMetric(baseUrl: string, name: string, labels: Labels = {}): Promise<number | undefined> {
  return metricValue(await scrape(baseUrl), name, labels)
}

/** The sum of a gateway's matching samples (0 when none). */
export async function scrapeMetricSum(baseUrl: string, name: string, labels: Labels = {}): Promise<number> {
  return metricSum(await scrape(baseUrl), name, labels)
}

/** Polls `check` every `everyMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 5000, everyMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

/** Polls a gateway's metric until it equals `expected`; bounded. */
export async function untilMetric(baseUrl: string, name: string, labels: Labels, expected: number, timeoutMs = 5000): Promise<void> {
  let last: number | undefined
  await until(
    async () => (last = await scrapeMetric(baseUrl, name, labels)) === expected,
    `${name}${JSON.stringify(labels)} to be ${expected} (last ${last})`,
    timeoutMs,
  ).catch(() => {
    throw new Error(`${name}${JSON.stringify(labels)} stayed ${last}, expected ${expected}`)
  })
}
