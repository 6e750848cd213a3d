/** Waiting on what a stand-in backend reports (its `events` emitter), instead of sleeping. */
import type { ReceivedRequest, VllmStandIn } from '../../src/dev/vllm-stand-in.js'

/** Resolves with the next `count` events of that name, in order. */
export function nextEvents(backend: VllmStandIn, event: string, count: number): Promise<ReceivedRequest[]> {
  return new Promise((resolve) => {
    const seen: ReceivedRequest[] = []
    const listener = (received: ReceivedRequest) => {
      seen.push(received)
      if (seen.length < count) return
      backend.events.off(event, listener)
      resolve(seen)
    }
    backend.events.on(event, listener)
  })
}
