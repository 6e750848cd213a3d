/**
 * A configured model with its backends and its balancer state: the thing the
 * chat path asks "which backend next?".
 */
import type { ModelSettings } from '../config/resolve.js'
import { Backend } from './backend.js'
import type { BackendStats, BalancerRequest, Rng } from './balancers/balancer.js'
import { pickBackend } from './balancers/pick.js'
import { isConfirmedWith, type HealthState } from './health-state.js'

/**
 * What another generation knows of a backend's health: the same model,
 * backend name and URL, else undefined (a backend renamed or moved is
 * another backend, as for slots in generation-peers.ts).
 */
export type KnownHealth = (model: string, backend: string, url: string) => HealthState | undefined

export class ModelRoute {
  readonly settings: ModelSettings
  readonly backends: readonly Backend[]
  #roundRobin: ReadonlyMap<string, number> = new Map()

  constructor(settings: ModelSettings, known: KnownHealth = () => undefined) {
    this.settings = settings
    this.backends = settings.backends.map((b) => new Backend(b, settings))
    for (const backend of this.backends) backend.health = known(this.name, backend.name, backend.url) ?? backend.health
  }

  get name(): string {
    return this.settings.name
  }

  /** Routing's question: may a request be tried at all (optimistic before the first check, health-state.ts). */
  hasUsableBackend(now: number): boolean {
    return this.backends.some((b) => b.usable(now))
  }

  /** Readiness's question: has some backend been shown healthy and can it take requests now. */
  hasConfirmedBackend(now: number): boolean {
    return this.backends.some((b) => isConfirmedWith(b.health, b.shared, now))
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

/** Every configured model by public name; a backend another generation knows starts from its health there. */
export function buildModelRoutes(models: readonly ModelSettings[], known?: KnownHealth): Map<string, ModelRoute> {
  return new Map(models.map((m) => [m.name, new ModelRoute(m, known)]))
}

/** The health of the backends of `generations` (their model routes), the first that has the backend winning. */
export function healthKnownTo(generations: readonly ReadonlyMap<string, ModelRoute>[]): KnownHealth {
  return (model, backend, url) => {
    for (const routes of generations) {
      const found = routes.get(model)?.backends.find((b) => b.name === backend && b.url === url)
      if (found !== undefined) return found.health
    }
    return undefined
  }
}
