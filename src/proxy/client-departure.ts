/**
 * "The client of this request went away": a one-shot signal with exactly
 * what the admission queue reads of an AbortSignal (`aborted`, `reason`,
 * abort listeners), so queues accept either.
 *
 * Why not an AbortController per request: creating one (and its signal's
 * event target) cost about 4 % of the gateway's CPU at full load in the
 * profile of bench/proxy-overhead.mjs, and nearly every request neither
 * waits in a queue nor loses its client. This costs one small object.
 */
import type { ServerResponse } from 'node:http'
import type { GatewayError } from '../errors/gateway-error.js'
import type { DepartureSignal } from '../state/store.js'
import type { CutOffable } from './in-flight-requests.js'

export class ClientDeparture implements DepartureSignal, CutOffable {
  aborted = false
  reason: Error | undefined = undefined
  /** Set when the gateway, not the client, ended the request: what the client is to be told. */
  cutOffBy: GatewayError | null = null
  #listeners: Array<() => void> | null = null

  /** The client left: listeners run once, in the order they were added. */
  depart(): void {
    this.#end(clientGone())
  }

  /** The gateway ends the request (a shutdown's grace period ran out): as a departure, but the client is still there to hear `reason`. */
  cutOff(reason: GatewayError): void {
    if (this.aborted) return
    this.cutOffBy = reason
    this.#end(reason)
  }

  #end(reason: Error): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    const listeners = this.#listeners
    this.#listeners = null
    if (listeners !== null) for (const listener of listeners) listener()
  }

  /** As on an AbortSignal: a listener added after the departure never runs. */
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return
    ;(this.#listeners ??= []).push(listener)
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const index = this.#listeners?.indexOf(listener) ?? -1
    if (index >= 0) this.#listeners!.splice(index, 1)
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason
  }
}

/**
 * Whether the response closed already: its 'close' event is past, and a
 * listener added now would never run. A pipelined request's response has
 * no socket until the answers before it are sent: the connection is its
 * request's (taking a missing socket for a closed one hung every pipelined
 * chat request after the first).
 */
export function responseClosed(res: ServerResponse): boolean {
  return res.destroyed || res.req.socket.destroyed
}

function clientGone(): Error {
  const error = new Error('The client closed the connection.')
  // The name undici and fetch give an abort, so code that tells aborts apart keeps doing so.
  error.name = 'AbortError'
  return error
}
