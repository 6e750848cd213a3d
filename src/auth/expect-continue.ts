/**
 * `Expect: 100-continue`: the client sends its body only once told to. Node
 * says "100 Continue" on arrival, before any check, so a client without
 * credentials, or announcing a body over the limit, started uploading a body
 * that would be refused (the audit saw 100 then 401, 100 then 413). The
 * server takes that over (server.ts, 'checkContinue', which Node emits only
 * for HTTP/1.1 requests that expect it): a route with credentials says it
 * once they passed (require-auth.ts), any other route at once (app.ts), and
 * neither when the announced length is over the limit. A request answered
 * before "100 Continue" has its connection closed by Node, which cannot
 * tell whether the client will still send the body it held back.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'

/** Responses whose client waits for "100 Continue" (few: a WeakSet costs the others nothing). */
const waiting = new WeakSet<ServerResponse>()

/** For the server's 'checkContinue' event: the request is answered like any other, with no "100 Continue" yet. */
export function holdContinue(response: ServerResponse): void {
  waiting.add(response)
}

/** "100 Continue", once, to a client waiting for it, unless the body it announced is over the limit. */
export function sendContinue(headers: IncomingHttpHeaders, response: ServerResponse, bodyLimitBytes: number): void {
  if (headers.expect === undefined || !waiting.delete(response)) return
  if (Number(headers['content-length'] ?? 0) > bodyLimitBytes) return
  response.writeContinue()
}
