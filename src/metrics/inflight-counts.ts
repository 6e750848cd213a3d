/**
 * `sluice_inflight_requests` changes twice per request. prom-client hashes
 * the labels and validates them on every `inc`/`dec` (~0.5 µs each, in the
 * hot path's profile), so the counts live here as plain numbers, one per
 * (model, backend), and are copied into the gauge when it is scraped.
 */
interface Series {
  readonly labels: { readonly model: string; readonly backend: string }
  value: number
}

export class InflightCounts {
  readonly #series = new Map<string, Series>()

  add(model: string, backend: string, delta: number): void {
    const key = `${model}\u0000${backend}`
    const series = this.#series.get(key)
    if (series === undefined) this.#series.set(key, { labels: { model, backend }, value: delta })
    else series.value += delta
  }

  /** Drops a series (its backend is no longer configured). */
  remove(model: string, backend: string): void {
    this.#series.delete(`${model}\u0000${backend}`)
  }

  /** Every series ever touched (zeros included), for the gauge's collect. */
  series(): Iterable<Series> {
    return this.#series.values()
  }
}
