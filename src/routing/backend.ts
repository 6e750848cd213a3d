/** One configured model server: its settings, its connection pool, its state. */
import { Pool } from 'undici'
import { exactConnector } from './exact-connector.js'
import type { BackendSettings, ModelSettings } from '../config/resolve.js'
import { INITIAL_HEALTH, isUsableWith, type HealthState, type SharedVerdict } from './health-state.js'
import type { VllmLoad } from './vllm-load.js'
import type { RefusalPace } from '../proxy/refused-credentials.js'
import { echoForms } from '../proxy/credential-echo.js'

export class Backend {
  readonly model: string
  readonly name: string
  readonly url: string
  /** scheme://host:port, where the pool connects (paths are `pathFor`'s). */
  readonly origin: string
  readonly weight: number
  readonly apiKey: string | undefined
  /** How long a chat answer's headers, and its body's first byte, may take (the call's own timer: undici's runs up to ~1 s late). */
  readonly firstByteMs: number
  /** The longest silence inside a chat answer once its body began (upstream-call.ts). */
  readonly idleMs: number
  /** The api_key as an answer could echo it (proxy/credential-echo.ts). */
  readonly echoableSecrets: readonly string[]
  readonly pool: Pool
  readonly #prefix: string
  /** Written by the backend monitor (active checks) and by real traffic (passive). */
  health: HealthState = INITIAL_HEALTH
  /** Another replica's verdict from the shared health board (Redis mode), or null. */
  shared: SharedVerdict | null = null
  /** The pacing of the "refused the gateway's credentials" warn line (proxy/refused-credentials.ts). */
  refusalPace: RefusalPace | null = null
  /** The backend's own load from its /metrics, with when it was read. */
  load: { readonly value: VllmLoad; readonly at: number } | null = null

  constructor(settings: BackendSettings, model: ModelSettings) {
    this.model = model.name
    this.name = settings.name
    this.url = settings.url
    this.origin = new URL(settings.url).origin
    this.weight = settings.weight
    this.apiKey = settings.api_key === '' ? undefined : settings.api_key
    this.firstByteMs = model.timeouts.first_byte_ms
    this.idleMs = model.timeouts.idle_ms
    this.echoableSecrets = this.apiKey === undefined ? [] : echoForms([this.apiKey])
    this.#prefix = new URL(settings.url).pathname.replace(/\/+$/, '')
    this.pool = new Pool(this.origin, {
      // One socket per admitted request (HTTP/1.1 has no multiplexing), plus
      // spares so health and metrics probes never wait behind a long stream.
      connections: model.max_concurrency_per_backend + 2,
      connect: exactConnector(model.timeouts.connect_ms),
      headersTimeout: model.timeouts.first_byte_ms,
      bodyTimeout: model.timeouts.idle_ms,
      keepAliveTimeout: model.timeouts.keep_alive_ms,
      // Also the most a server's own `Keep-Alive: timeout=N` may stretch it to.
      keepAliveMaxTimeout: model.timeouts.keep_alive_ms,
    })
  }

  /** This replica's own view and the shared verdict merged. */
  usable(now: number): boolean {
    return isUsableWith(this.health, this.shared, now)
  }

  /** The path on this backend: its URL's own path prefix (`http://h/prefix`), then `path`. */
  pathFor(path: string): string {
    return `${this.#prefix}${path}`
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}
