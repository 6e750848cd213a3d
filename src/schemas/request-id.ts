/**
 * The chat request id: the `X-Request-Id` header, else the body's
 * `request_id`, else a new one (vLLM's own order); on the platform routes,
 * the header else a new one. Ids travel in headers and logs, so they are
 * limited to a safe alphabet and length.
 */
import { GatewayError } from '../errors/gateway-error.js'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
export const REQUEST_ID_RULE = 'must be 1 to 128 characters of A-Z a-z 0-9 . _ : -'

export function isValidRequestId(id: string): boolean {
  return REQUEST_ID.test(id)
}

export type RequestIdChoice =
  | { readonly ok: true; readonly id: string }
  | { readonly ok: false; readonly source: 'header' | 'body' }

export function chooseRequestId(header: string | undefined, body: string | undefined, generate: () => string): RequestIdChoice {
  // An empty header counts as absent, as in vLLM (`headers.get(...) or ...`).
  if (header !== undefined && header !== '') return isValidRequestId(header) ? { ok: true, id: header } : { ok: false, source: 'header' }
  if (body !== undefined) return isValidRequestId(body) ? { ok: true, id: body } : { ok: false, source: 'body' }
  return { ok: true, id: generate() }
}

/**
 * Routes whose id can only come from the header: an invalid one is refused
 * (400) as on the chat route, not silently replaced by a generated one.
 */
export function checkRequestIdHeader(header: string | string[] | undefined): void {
  const text = typeof header === 'string' ? header : header?.join(',')
  // Empty counts as absent, as in chooseRequestId.
  if (text === undefined || text === '' || isValidRequestId(text)) return
  throw new GatewayError('invalid_request_id', `The X-Request-Id header ${REQUEST_ID_RULE}.`)
}
