/**
 * The per-key checks: a chat request, before it may queue, passes the key's
 * smallest allowed `priority` (403), then its limits (429 with Retry-After).
 * The key's training and checkpoint calls pass its limits alone (they carry
 * no priority): DESIGN.md's limits are per key, not per route. Also turns
 * admission refusals into gateway errors, in one place.
 */
import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors/gateway-error.js'
import type { Metrics } from '../metrics/registry.js'
import { AdmissionRefused, UNLIMITED_TICKET, type AdmissionState, type KeyTicket } from '../state/store.js'
import { retryAfterSeconds } from './admission.js'


export async function admitKey(state: AdmissionState, metrics: Metrics, principal: Principal | null, priority: number): Promise<KeyTicket> {
  if (principal?.kind !== 'key') return UNLIMITED_TICKET
  const { key } = principal
  if (key.min_priority !== undefined && priority < key.min_priority) {
    metrics.rejections.inc({ reason: 'priority_forbidden' })
    throw new GatewayError('priority_forbidden', `priority ${priority} is below the smallest this key may use (${key.min_priority}).`, { param: 'priority' })
  }
  return admitKeyLimits(state, metrics, principal)
}

/** The key's limits alone: concurrency, requests and tokens per minute. Other principals (Basic users) have none. */
export async function admitKeyLimits(state: AdmissionState, metrics: Metrics, principal: Principal | null): Promise<KeyTicket> {
  if (principal?.kind !== 'key' || principal.key.limits === undefined) return UNLIMITED_TICKET
  try {
    return await state.keys.admit(principal.key.id, principal.key.limits)
  } catch (error) {
    throw refusalToError(error, metrics)
  }
}

/** AdmissionRefused → the DESIGN.md error (429/503 with Retry-After); anything else unchanged. */
export function refusalToError(error: unknown, metrics: Metrics): unknown {
  if (!(error instanceof AdmissionRefused)) return error
  metrics.rejections.inc({ reason: error.reason })
  const headers: Record<string, string> = error.reason === 'shutting_down' ? {} : { 'retry-after': String(retryAfterSeconds(error.retryAfterMs)) }
  return new GatewayError(error.reason, error.message, { headers })
}
