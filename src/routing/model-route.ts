/**
 * A configured model with its backends and its balancer state: the thing the
 * chat path asks "which backend next?".
 */
import type { ModelSettings } from '../config/resolve.js'
import { Backend } from './backend.js'
import type { BackendStats, BalancerRequest, Rng } from './balancers/balancer.js'
import { pickBackend } from './balancers/pick.js'

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

  hasUsableBackend(now: number): boolean {
    return this.backends.some((b) => b.usable(now))
  }

  /** The backend of that name (names come from this model's own configuration). */
  backend(name: string): Backend {
    const found = this.backends.find((b) => b.name === name)
    if (found === undefined) throw new Error(`model "${this.name}" has no backend "${name}"`)
    return found
  }

  /** The configured balancer's pick among backends that have a free slot (given by name). */
  choose(names: readonly string[], request: BalancerRequest, stats: ReadonlyMap<string, BackendStats>, rng: Rng): string {
    const candidates = this.backends.filter((b) => names.includes(b.name))
    if (candidates.length === 0) throw new Error(`model "${this.name}": no candidate among ${names.join(', ')}`)
    const { index, roundRobinState } = pickBackend(this.settings.balance, candidates, stats, request, rng, this.#roundRobin)
    this.#roundRobin = roundRobinState
    return candidates[index]!.name
  }

  async close(): Promise<void> {
    await Promise.all(this.backends.map((b) => b.close()))
  }
}

/** Every configured model by public name. */
export function buildModelRoutes(models: readonly ModelSettings[]): Map<string, ModelRoute> {
  return new Map(models.map((m) => [m.name, new ModelRoute(m)]))
}
