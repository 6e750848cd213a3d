/** The refusals of a model's queue, worded once for the memory and the Redis store. */
import type { BodyBudget } from '../scheduling/queued-bodies.js'
import { AdmissionRefused, type SlotRejection } from './store.js'

/** Retry-After for queue refusals: the queue moves continuously, so "soon". */
export const QUEUE_RETRY_MS = 1000

export function slotRefusal(reason: SlotRejection, model: string, maxWaitMs: number): AdmissionRefused {
  const messages: Record<SlotRejection, string> = {
    queue_full: `Model "${model}" has too many requests waiting; retry later.`,
    queue_timeout: `Model "${model}" stayed busy longer than its queue wait limit (${maxWaitMs} ms); retry later.`,
    shutting_down: 'The gateway is shutting down; retry on another replica.',
  }
  return new AdmissionRefused(reason, QUEUE_RETRY_MS, messages[reason])
}

/** A full queue by its bodies' bytes (queued-bodies.ts), not by its count: the arrival's `bytes` do not fit. */
export function bodiesRefusal(budget: BodyBudget, bytes: number): AdmissionRefused {
  const mib = (count: number) => (count / 1048576).toFixed(2)
  return new AdmissionRefused(
    'queue_full',
    QUEUE_RETRY_MS,
    `This request would wait for a slot, and its body (${mib(bytes)} MiB) does not fit in what the requests waiting at this gateway leave of server.queued_body_limit_bytes (${mib(budget.held)} of ${mib(budget.limit)} MiB held); retry later or send a smaller body.`,
  )
}
