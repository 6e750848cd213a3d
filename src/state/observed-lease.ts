/**
 * A slot lease as both stores hand it out: it reports the grant and the wait
 * to the observer (metrics) and, on the first release only, the release.
 * What a release does to the store itself is the store's `onRelease`.
 */
import type { Clock } from '../context.js'
import type { AdmissionObserver, SlotLease } from './store.js'

export interface LeaseGrant {
  readonly model: string
  readonly backend: string
  readonly arrivedAt: number
  /**
   * A retry's slot on another backend (tryAcquire): not a wait in the queue.
   * The request's wait was observed with its first slot; counting it again
   * made sluice_queue_wait_seconds count attempts, not requests. (A request
   * put back in the queue after a refused connection does wait again, and
   * that wait is observed: README, sluice_queue_wait_seconds.)
   */
  readonly retry?: boolean
}

export function observedLease(grant: LeaseGrant, clock: Clock, observer: AdmissionObserver, onRelease: () => void): SlotLease {
  const { model, backend } = grant
  observer.slotTaken(model, backend)
  const waitedMs = clock.now() - grant.arrivedAt
  if (grant.retry !== true) observer.waited(model, waitedMs)
  let released = false
  return {
    backend,
    waitedMs,
    release: () => {
      if (released) return
      released = true
      observer.slotReleased(model, backend)
      onRelease()
    },
  }
}
