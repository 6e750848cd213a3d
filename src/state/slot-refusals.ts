/** The refusals of a model's queue, worded once for the memory and the Redis store. */
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
