/**
 * A configured model with its backends and its balancer state: the thing the
 * chat path asks "which backend next?".
 */
import type { ModelSettings } from '../config/resolve.js'
import { Backend } from './backend.js'
import { pickSmoothWeighted } from './balancers/round-robin.js'

export class ModelRoute {
  readonly settings: ModelSettings
  readonly backends: readonly Backend[]
  #roundRobin: ReadonlyMap<string, number> = new Map()

  constructor(settings: ModelSettings) {
    this.settings = settings
    this.backends = settings.backends.map((b) => new Backend(b, settings))
  }

  get name(): string {
    return this.settings.name
  }

  /** The next backend among healthy ones not yet tried for this request, or null. */
  pick(exclude: ReadonlySet<Backend>): Backend | null {
    const candidates = this.backends.filter((b) => b.healthy && !exclude.has(b))
    if (candidates.length === 0) return null
    const { index, current } = pickSmoothWeighted(candidates, this.#roundRobin)
    this.#roundRobin = current
    return candidates[index]!
  }

  async close(): Promise<void> {
    await Promise.all(this.backends.map((b) => b.close()))
  }
}

/** Every configured model by public name. */
export function buildModelRoutes(models: readonly ModelSettings[]): Map<string, ModelRoute> {
  return new Map(models.map((m) => [m.name, new ModelRoute(m)]))
}
