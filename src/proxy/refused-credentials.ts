/**
 * A backend or platform upstream that answers 401 refused the gateway's own
 * credentials: clients' are checked here and not forwarded (except to an
 * upstream with `forward_client: true`, whose 401 is about the client and
 * is left alone), so its `api_key` (or the upstream's `auth`, or its lack)
 * is what is wrong. The client still gets the answer as it came
 * (DESIGN.md), which reads like its own key was refused; the operator gets
 * `sluice_upstream_errors_total{reason="auth_refused"}` for each, and a
 * warn line at most once a minute per backend with how many it stands for
 * (an operator audit found nothing but the access line's 401). A 403 is
 * left alone: an upstream may refuse one resource to a caller it did
 * authenticate.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Metrics } from '../metrics/registry.js'

/** Once a minute per backend or upstream: a wrong key refuses every request. */
const WARN_EVERY_MS = 60_000

/** When a backend's or upstream's last warn line was written, and the refusals since. */
export interface RefusalPace {
  at: number
  since: number
}

export interface RefusalSite {
  readonly model: string
  readonly backend: string
  /** The backend or upstream itself, which keeps the warn line's pacing. */
  readonly target: { refusalPace: RefusalPace | null }
}

/** For an answer with status 401 (the caller checks: nothing is built for other answers). */
export function noteRefusedCredentials(metrics: Metrics, log: FastifyBaseLogger, site: RefusalSite, requestId: string, now: number): void {
  metrics.upstreamErrors.inc({ model: site.model, backend: site.backend, reason: 'auth_refused' })
  const last = site.target.refusalPace
  if (last !== null && now - last.at < WARN_EVERY_MS) {
    last.since++
    return
  }
  site.target.refusalPace = { at: now, since: 0 }
  const fields = { request_id: requestId, model: site.model === '' ? null : site.model, backend: site.backend, status: 401, refused_since_last_line: last?.since ?? 0 }
  log.warn(fields, 'the backend refused the gateway’s own credentials (401): check its api_key, or the upstream’s auth')
}
