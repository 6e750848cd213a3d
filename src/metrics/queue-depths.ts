/**
 * `sluice_queue_depth`, read when /metrics is scraped from the queues of every
 * generation still serving, summed per model. Set by each queue whenever it
 * changed, the gauge showed the last writer: with two generations live after
 * a reload, three requests waiting read as one.
 */
export type QueueDepthSource = () => Iterable<readonly [model: string, depth: number]>

export class QueueDepths {
  readonly #sources = new Set<QueueDepthSource>()

  /** Counts `source` until the returned function is called (its generation closed). */
  add(source: QueueDepthSource): () => void {
    this.#sources.add(source)
    return () => this.#sources.delete(source)
  }

  /** Requests waiting per model, over every source. */
  totals(): Map<string, number> {
    const totals = new Map<string, number>()
    for (const source of this.#sources) for (const [model, depth] of source()) totals.set(model, (totals.get(model) ?? 0) + depth)
    return totals
  }
}
