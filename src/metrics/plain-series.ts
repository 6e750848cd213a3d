/**
 * The counters and histograms every request updates, kept as plain numbers
 * per label set and handed to prom-client's registry when it is scraped.
 *
 * Why not prom-client's own: it validates the label names and builds a hash
 * string from the label object on every `inc`/`observe` (a child from
 * `labels()` does the same each call), five times per request, ~2 µs in all
 * and ~1.2 KB of garbage. Here a series is found by its label values, one map
 * level per label. The exposition is prom-client's: these objects implement
 * what its registry reads (`name`, `help`, `type`, `get`, `reset`) and hand
 * back the same value records its Counter and Histogram do.
 */
import type { Metric, Registry } from 'prom-client'

type Labels<L extends string> = Readonly<Record<L, string>>

/** One exported sample, as prom-client's registry reads it (its typings name `type` an enum; at run time it is this string). */
interface Sample {
  readonly labels: Readonly<Record<string, string | number>>
  readonly value: number
  readonly metricName?: string
}

interface Exported {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly values: Sample[]
  readonly aggregator: 'sum'
}

export interface SeriesOptions<L extends string> {
  readonly name: string
  readonly help: string
  readonly labelNames: readonly L[]
  readonly registers: readonly Registry[]
}

interface Series<L extends string, V> {
  readonly labels: Labels<L>
  readonly value: V
}

/** What the registry reads off a metric, with the series map both kinds share. */
abstract class PlainSeries<L extends string, V> {
  readonly name: string
  readonly help: string
  abstract readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum'
  readonly #labelNames: readonly L[]
  /** Series by their label values, one map level per label name (no key string is built per update). */
  #index = new Map<string, unknown>()
  #series: Series<L, V>[] = []

  constructor(options: SeriesOptions<L>) {
    this.name = options.name
    this.help = options.help
    this.#labelNames = options.labelNames
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric)
  }

  /** The value record of `labels`, created empty on first use. */
  protected seriesOf(labels: Labels<L>): V {
    const names = this.#labelNames
    let level = this.#index
    const last = names.length - 1
    for (let i = 0; i < last; i++) {
      const value = labels[names[i]!]
      let next = level.get(value) as Map<string, unknown> | undefined
      if (next === undefined) level.set(value, (next = new Map()))
      level = next
    }
    const leaf = last < 0 ? '' : labels[names[last]!]
    const found = level.get(leaf) as Series<L, V> | undefined
    if (found !== undefined) return found.value
    return this.#add(level, leaf, labels)
  }

  #add(level: Map<string, unknown>, leaf: string, labels: Labels<L>): V {
    // A copy: the caller's object may be reused or changed after this call.
    const own = {} as Record<L, string>
    for (const name of this.#labelNames) own[name] = labels[name]
    const series = { labels: own, value: this.emptyValue() }
    level.set(leaf, series)
    this.#series.push(series)
    return series.value
  }

  protected abstract emptyValue(): V
  protected abstract exported(series: Series<L, V>): Sample[]

  get(): Promise<Exported> {
    const values: Sample[] = []
    for (const series of this.#series) values.push(...this.exported(series))
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator })
  }

  reset(): void {
    this.#index = new Map()
    this.#series = []
  }
}

interface CounterValue {
  total: number
}

export class PlainCounter<L extends string> extends PlainSeries<L, CounterValue> {
  readonly type = 'counter'

  /** Adds `by` (default 1). Counters only go up: a negative or non-finite `by` is refused as prom-client refuses it. */
  inc(labels: Labels<L>, by = 1): void {
    if (!(by >= 0) || by === Infinity) throw new RangeError(`${this.name}: a counter only goes up by a finite amount (got ${by})`)
    this.seriesOf(labels).total += by
  }

  protected emptyValue(): CounterValue {
    return { total: 0 }
  }

  protected exported({ labels, value }: Series<L, CounterValue>): Sample[] {
    return [{ labels, value: value.total }]
  }
}

interface HistogramValue {
  /** Observations per bucket (not cumulative); the last one is above every bound. */
  readonly counts: number[]
  sum: number
  count: number
}

export interface HistogramOptions<L extends string> extends SeriesOptions<L> {
  /** Upper bounds, ascending. */
  readonly buckets: readonly number[]
}

export class PlainHistogram<L extends string> extends PlainSeries<L, HistogramValue> {
  readonly type = 'histogram'
  readonly #bounds: readonly number[]

  constructor(options: HistogramOptions<L>) {
    super(options)
    this.#bounds = [...options.buckets]
  }

  observe(labels: Labels<L>, value: number): void {
    if (!Number.isFinite(value)) throw new RangeError(`${this.name}: cannot observe ${value}`)
    const series = this.seriesOf(labels)
    const bounds = this.#bounds
    let bucket = 0
    while (bucket < bounds.length && value > bounds[bucket]!) bucket++
    series.counts[bucket]!++
    series.sum += value
    series.count++
  }

  protected emptyValue(): HistogramValue {
    return { counts: new Array<number>(this.#bounds.length + 1).fill(0), sum: 0, count: 0 }
  }

  /** Cumulative buckets, `+Inf`, sum and count, in the order and label order prom-client's Histogram exports them (`le` first). */
  protected exported({ labels, value }: Series<L, HistogramValue>): Sample[] {
    const out: Sample[] = []
    let cumulative = 0
    this.#bounds.forEach((bound, i) => {
      cumulative += value.counts[i]!
      out.push({ labels: { le: bound, ...labels }, value: cumulative, metricName: `${this.name}_bucket` })
    })
    out.push({ labels: { le: '+Inf', ...labels }, value: value.count, metricName: `${this.name}_bucket` })
    out.push({ labels, value: value.sum, metricName: `${this.name}_sum` })
    out.push({ labels, value: value.count, metricName: `${this.name}_count` })
    return out
  }
}
