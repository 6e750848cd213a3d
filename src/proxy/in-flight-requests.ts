/**
 * The requests a generation is answering that the gateway may have to cut
 * off: when a shutdown's grace period runs out, each one still in flight
 * ends with 503 `shutting_down` (no answer started yet) or, for a stream,
 * an error event and `[DONE]` (DESIGN.md's chat path), instead of a
 * connection closed without a word and an access line saying the client
 * left (499).
 */
import { GatewayError } from '../errors/gateway-error.js'

/** A request the gateway can end with an error of its own. */
export interface CutOffable {
  cutOff(reason: GatewayError): void
}

export class InFlightRequests {
  readonly #requests = new Set<CutOffable>()

  add(request: CutOffable): void {
    this.#requests.add(request)
  }

  delete(request: CutOffable): void {
    this.#requests.delete(request)
  }

  /** Cuts off every request still in flight; returns how many there were. */
  cutOffAll(): number {
    const requests = [...this.#requests]
    this.#requests.clear()
    const reason = new GatewayError('shutting_down', 'The gateway shut down before this answer was complete (its grace period ran out); retry on another replica.')
    for (const request of requests) request.cutOff(reason)
    return requests.length
  }
}
