/**
 * `Expect: 100-continue`: the client sends its body only once told to. Node
 * says "100 Continue" on arrival, before any check, so a client without
 * credentials, or announcing a body over the limit, started uploading a body
 * that would be refused (the audit saw 100 then 401, 100 then 413). The
 * server takes that over (server.ts, 'checkContinue'); the route's auth hook
 * says it once the credentials passed and the announced length fits, and
 * otherwise the refusal is the first thing the client hears.
 *
 * Such a request's connection is closed after its answer: a client told a
 * final status before "100 Continue" may or may not send the body it held
 * back, and the gateway cannot tell the body from the next request.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'

/** For the server's 'checkContinue' event: answer like any request, with no "100 Continue" yet. */
export function holdContinue(response: ServerResponse): void {
  response.setHeader('connection', 'close')
}

/** After the credentials passed: "100 Continue" if the client waits for it and its body may come. */
export function continueIfExpected(headers: IncomingHttpHeaders, response: ServerResponse, bodyLimitBytes: number): void {
  const expect = headers.expect
  if (expect === undefined || expect.toLowerCase() !== '100-continue') return
  if (Number(headers['content-length'] ?? 0) > bodyLimitBytes) return
  response.writeContinue()
}
