/** A platform upstream (training, checkpoints, objects): its settings and connection pool. */
import { Pool } from 'undici'
import { exactConnector } from './exact-connector.js'
import type { UpstreamName, UpstreamSettings } from '../config/schema.js'
import type { RefusalPace } from '../proxy/refused-credentials.js'
import { echoableSecrets } from '../proxy/credential-echo.js'

export class Upstream {
  readonly name: UpstreamName
  readonly settings: UpstreamSettings
  readonly pool: Pool
  /** The gateway's credential for this upstream as an answer could echo it (proxy/credential-echo.ts). */
  readonly echoableSecrets: readonly string[]
  /** The pacing of the "refused the gateway's credentials" warn line (proxy/refused-credentials.ts). */
  refusalPace: RefusalPace | null = null
  readonly #prefix: string

  constructor(name: UpstreamName, settings: UpstreamSettings) {
    this.name = name
    this.settings = settings
    this.echoableSecrets = echoableSecrets(settings.auth)
    const url = new URL(settings.url)
    this.#prefix = url.pathname.replace(/\/+$/, '')
    this.pool = new Pool(url.origin, {
      connect: exactConnector(settings.timeouts.connect_ms),
      headersTimeout: settings.timeouts.first_byte_ms,
      bodyTimeout: settings.timeouts.first_byte_ms,
      keepAliveTimeout: settings.timeouts.keep_alive_ms,
      keepAliveMaxTimeout: settings.timeouts.keep_alive_ms,
    })
  }

  /** Whether the upstream gets the client's own credentials: its 401 is then about those, not the gateway's. */
  get forwardsClient(): boolean {
    return this.settings.auth !== undefined && 'forward_client' in this.settings.auth
  }

  /** The request path appended to the upstream URL's own path. */
  pathFor(path: string): string {
    return `${this.#prefix}${path}`
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}
