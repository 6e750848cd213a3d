/** The refusals of a key's limits, worded once for the memory and the Redis limiter. */
import type { KeyLimitSettings } from '../config/schema.js'
import { AdmissionRefused } from './store.js'

/** Retry-After for a key at its concurrency limit: one of its requests usually ends soon. */
export const CONCURRENCY_RETRY_MS = 1000

/** `bucketsWaitMs`: how long the key's rate limits would refuse it anyway (the Retry-After is the longer). */
export function concurrencyRefusal(keyId: string, active: number, limits: KeyLimitSettings, bucketsWaitMs = 0): AdmissionRefused {
  const retryAfterMs = Math.max(CONCURRENCY_RETRY_MS, bucketsWaitMs)
  return new AdmissionRefused('concurrency', retryAfterMs, `Key "${keyId}" already has ${active} requests queued or in flight (limit ${limits.max_concurrency}).`)
}

export function tokensRefusal(keyId: string, retryAfterMs: number, limits: KeyLimitSettings): AdmissionRefused {
  return new AdmissionRefused('rate_limit_tokens', retryAfterMs, `Key "${keyId}" used its ${limits.tokens_per_minute} tokens per minute.`)
}

export function requestsRefusal(keyId: string, retryAfterMs: number, limits: KeyLimitSettings): AdmissionRefused {
  return new AdmissionRefused('rate_limit_requests', retryAfterMs, `Key "${keyId}" sent its ${limits.requests_per_minute} requests per minute.`)
}
