/**
 * The requests the gateway may have to cut off: when a shutdown's grace
 * period runs out, each one still in flight ends with 503 `shutting_down`
 * (no answer started yet) or, for a stream, an error event and `[DONE]`
 * (DESIGN.md's chat path), instead of a connection closed without a word
 * and an access line saying the client left (499).
 *
 * A request marks its own response; the shutdown finds them through the
 * connections it tracks anyway (connection-drain.ts). Before a route takes
 * over, a request whose body is still arriving is marked on its incoming
 * message by the body reader, which ends the read with the reason (a slow
 * upload was cut without an answer, its access line a 499). Why not a set of
 * requests in flight: adding and deleting one per request cost ~50,000
 * instructions per request in extra garbage collection (`npm run bench --
 * instructions`: 353,584 against 305,138 without it), where a property on
 * the response costs nothing measurable.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { GatewayError } from '../errors/gateway-error.js'

/** A request the gateway can end with an error of its own. */
export interface CutOffable {
  cutOff(reason: GatewayError): void
}

const CUT_OFF = Symbol('sluice.cutOff')

type Marked = { [CUT_OFF]?: CutOffable | undefined }

/**
 * Marks `carrier` (a response, or the incoming message of one whose body is
 * being read) as answering `request`, which a shutdown may cut off; `undefined` unmarks it.
 */
export function markCutOffable(carrier: ServerResponse | IncomingMessage, request: CutOffable | undefined): void {
  ;(carrier as Marked)[CUT_OFF] = request
}

/** Cuts off the requests answered by `responses`; returns how many there were. */
export function cutOffAll(responses: Iterable<ServerResponse>): number {
  const reason = new GatewayError('shutting_down', 'The gateway shut down before this answer was complete (its grace period ran out); retry on another replica.')
  let count = 0
  for (const response of responses) {
    // The route's mark, else the body reader's while the body is still coming.
    const request = (response as Marked)[CUT_OFF] ?? (response.req as Marked)[CUT_OFF]
    // Ended already, only its last bytes still leaving: nothing to cut.
    if (request === undefined || response.writableEnded) continue
    request.cutOff(reason)
    count++
  }
  return count
}
