/**
 * The chat request id: the `X-Request-Id` header, else the body's
 * `request_id`, else a new one (vLLM's own order). Ids travel in headers and
 * logs, so they are limited to a safe alphabet and length.
 */

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

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
