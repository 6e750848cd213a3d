/**
 * A backend or platform upstream that answers 401 refused the gateway's own
 * credentials: clients' are checked here and never forwarded, so its
 * `api_key` (or the upstream's `auth`) is what is wrong. The client still
 * gets the answer as it came (DESIGN.md), which reads like its own key was
 * refused; the operator gets a warn line and
 * `sluice_upstream_errors_total{reason="auth_refused"}` (an operator audit
 * found nothing but the access line's 401). A 403 is left alone: an
 * upstream may refuse one resource to a caller it did authenticate.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Metrics } from '../metrics/registry.js'

export function noteRefusedCredentials(metrics: Metrics, log: FastifyBaseLogger, where: { readonly model: string; readonly backend: string }, status: number): void {
  if (status !== 401) return
  metrics.upstreamErrors.inc({ model: where.model, backend: where.backend, reason: 'auth_refused' })
  log.warn({ model: where.model === '' ? null : where.model, backend: where.backend, status }, 'the backend refused the gateway’s own credentials (401): check its api_key, or the upstream’s auth')
}
