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

/** A full queue by its bodies' bytes (queued-bodies.ts), not by its count. */
export function bodiesRefusal(budget: BodyBudget): AdmissionRefused {
  const mib = (bytes: number) => (bytes / 1048576).toFixed(1)
  return new AdmissionRefused('queue_full', QUEUE_RETRY_MS, `The requests waiting at this gateway already hold ${mib(budget.held)} MiB of request bodies, near its limit (server.queued_body_limit_bytes, ${mib(budget.limit)} MiB); retry later or send a smaller body.`)
}
