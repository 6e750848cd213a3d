/**
 * Builds the gateway app from its context: global hooks first (request facts,
 * request id header, access log, draining), then routes, in an explicit order.
 * Never listens: it hands back its request handler, and server.ts routes the
 * listener's requests to the current app (so a reload can swap apps while
 * the old one finishes its requests).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type HTTPMethods } from 'fastify'
import type { GatewayContext } from './context.js'
import { recordOnClose } from './access-log.js'
import { shownPath, targetPath } from './target-path.js'
import { errorHandler, sendError, toGatewayError } from './errors/error-handler.js'
import { GatewayError } from './errors/gateway-error.js'
import { newRequestFacts, type RequestFacts } from './request-facts.js'
import { isValidRequestId } from './schemas/request-id.js'
import { registerChatRoutes } from './routes/chat.js'
import { registerModelRoutes } from './routes/models.js'
import { registerServiceRoutes } from './routes/service.js'
import { PLATFORM_ROUTES, registerPlatformRoutes } from './routes/platform.js'
import { requireAuth, type CredentialCheck } from './auth/require-auth.js'
import { registerJsonBodyParser } from './proxy/json-body-parser.js'
import { sendContinue } from './auth/expect-continue.js'
import { announcesBody, answeringBeforeBody } from './unread-body.js'
import { isClosing } from './closing-connections.js'
import { isValidHostHeader } from './host-header.js'

export type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void

export interface GatewayApp {
  readonly app: FastifyInstance
  /** Answers one request of the shared listener. */
  readonly handle: RequestHandler
  /** Turns new requests away with 503 while in-flight ones finish. */
  startDraining(): void
}

export async function buildApp(ctx: GatewayContext): Promise<GatewayApp> {
  let draining = false
  let handle: RequestHandler | null = null
  const checkpointsCredentials = unroutableCheckpointsCheck(ctx)
  const app = Fastify({
    // The listener belongs to server.ts; fastify gets a server it never listens on.
    serverFactory: (handler) => {
      handle = handler
      return createServer()
    },
    loggerInstance: ctx.logger as FastifyBaseLogger,
    // access-log.ts writes the one line per request.
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request (a measurable cost on the hot path): every
    // line about a request names its request_id itself.
    childLoggerFactory: (logger) => logger,
    bodyLimit: ctx.config.server.body_limit_bytes,
    // Node caps the request line and headers at 16 KiB, so any segment that
    // arrives fits: the route runs, credentials first, then its own length rule.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 16384 },
    requestIdHeader: false,
    genReqId: (raw) => {
      const header = raw.headers['x-request-id']
      return typeof header === 'string' && isValidRequestId(header) ? header : ctx.newId()
    },
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: false,
    // Requests the router refuses before any hook runs still get the DESIGN.md shape and a log line.
    frameworkErrors: (error, request, reply) => {
      // DESIGN.md checks credentials and scope before the body and query: a checkpoint listing whose
      // model_id the router cannot decode is still that route's, and its client is checked first.
      const method = request.raw.method
      const checkpoints = checkpointsCredentials !== null && (method === 'GET' || method === 'HEAD') && CHECKPOINTS_TARGET.test(targetPath(request.raw.url ?? ''))
      request.facts = newRequestFacts(checkpoints ? 'checkpoints' : 'unknown', request.id)
      recordOnClose(ctx.metrics, request, reply)
      reply.header('x-request-id', request.id)
      // Only when Node's header limit is raised past maxParamLength (--max-http-header-size): a route's own checks answer first otherwise.
      const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      const refusal = tooLong
        ? new GatewayError('uri_too_long', 'A path segment is longer than this gateway accepts.')
        : new GatewayError('invalid_url', badUrlMessage(request.raw.url ?? ''))
      if (!checkpoints) return sendError(request, reply, refusal)
      checkpointsCredentials(request, reply, (failure) => void sendError(request, reply, failure === undefined ? refusal : toGatewayError(failure)))
    },
  })

  app.decorateRequest('facts', null as unknown as RequestFacts)
  // Callback-style hooks, not async ones: no promise per request on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    request.facts = newRequestFacts(request.routeOptions.config.family ?? 'unknown', request.id)
    recordOnClose(ctx.metrics, request, reply)
    // Every answer names its request; the chat route replaces it when the body chose the id.
    reply.header('x-request-id', request.id)
    if (request.raw.httpVersionMinor === 1 && request.headers.host === undefined) {
      // Malformed like what Node's parser refuses, and answered the same way: the connection goes.
      done(new GatewayError('malformed_http', 'An HTTP/1.1 request must carry a Host header (RFC 9112 §3.2).', { headers: CLOSES }))
      return
    }
    // A request read off a connection whose last answer was sent (lingering-close.ts reads on after it), or
    // pipelined behind an answer that closes it (closing-connections.ts): not served, and not counted or logged
    // as the 400 the error below would be, since it never reaches the client (an HTTP review). The answer
    // before it, if still being made, is left to finish; Node drops this one's when the connection closes.
    const socket = request.raw.socket
    if (socket.writableEnded || isClosing(socket)) {
      request.facts.unanswered = true
      request.log.debug({ route: request.facts.route }, 'request read off a closing connection: not served')
      if (socket.writableEnded) socket.destroy()
      done(new GatewayError('malformed_http', 'The connection was closing: send the request on a new one.', { headers: CLOSES }))
      return
    }
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty framing. A proxy in front that reads
    // it as HTTP/1.0 does (no body) would see the chunks as the next request; nothing after it is served.
    if (request.raw.httpVersionMinor === 0 && request.headers['transfer-encoding'] !== undefined) {
      done(new GatewayError('malformed_http', 'An HTTP/1.0 request cannot use Transfer-Encoding (RFC 9112 §6.1): send a Content-Length.', { headers: CLOSES }))
      return
    }
    if (!isValidHostHeader(request.headers.host, request.raw.rawHeaders)) {
      done(new GatewayError('malformed_http', 'A request must carry one Host header, host[:port] (RFC 9112 §3.2).', { headers: CLOSES }))
      return
    }
    if (draining && request.facts.route !== 'service') {
      done(new GatewayError('shutting_down', 'The gateway is shutting down; retry on another replica.', { headers: CLOSES }))
      return
    }
    // A GET route reads no body: one sent anyway is left to Node to drain only when short.
    const method = request.raw.method
    if ((method === 'GET' || method === 'HEAD') && announcesBody(request.headers) && answeringBeforeBody(request.raw, reply.raw)) reply.header('connection', 'close')
    // Answered before the body is read: nothing would use it (a JSON body up to the limit was parsed for a 404).
    if (request.facts.route === 'unknown') {
      done(notFound(app, request))
      return
    }
    // RFC 9112 §3.2: a request target has no fragment. Node's parser passes one; the router dropped it from a
    // path but a query kept it (`?limit=3#x` refused as no integer, `?after=a#b` forwarded as `a%23b`): an
    // HTTP review. Refused the same way wherever it is, as the router refuses one in an absolute-form target.
    if (request.raw.url?.includes('#') === true) {
      done(new GatewayError('invalid_url', FRAGMENT_REFUSED))
      return
    }
    // Routes without credentials to check say "100 Continue" at once.
    if (request.facts.route === 'service') sendContinue(request.headers, reply.raw, ctx.config.server.body_limit_bytes)
    done()
  })
  registerJsonBodyParser(app, ctx.config.server.body_limit_bytes)
  app.setErrorHandler(errorHandler)
  // The onRequest hook answers unknown paths first; this keeps fastify's own 404 body out should one get past it.
  app.setNotFoundHandler((request, reply) => sendError(request, reply, notFound(app, request)))

  registerServiceRoutes(app, ctx)
  registerModelRoutes(app, ctx, ctx.clock.now())
  registerChatRoutes(app, ctx)
  registerPlatformRoutes(app, ctx)
  await app.ready()
  if (handle === null) throw new Error('fastify did not hand over its request handler')
  return {
    app,
    handle,
    startDraining() {
      draining = true
    },
  }
}

/** An answer's header that closes the connection after it. */
const CLOSES = { connection: 'close' } as const

/** The checkpoint listing's path, any model_id (trailing slash ignored, as the router does). */
const CHECKPOINTS_TARGET = /^\/v1\/preview\/models\/[^/]*\/checkpoints\/?$/

/** The checkpoint listing's credential check, or null when no upstream serves it (that route is a 404 before credentials). */
function unroutableCheckpointsCheck(ctx: GatewayContext): CredentialCheck | null {
  const route = PLATFORM_ROUTES.find((r) => r.family === 'checkpoints')
  if (route === undefined || !ctx.upstreams.has(route.upstream)) return null
  return requireAuth(ctx.authenticators, route.auth, ctx.config.server.body_limit_bytes)
}

/**
 * The router refuses a target it cannot decode, and an absolute-form one
 * with a fragment (find-my-way's own rule; in origin form `#…` is read as
 * a query and dropped): the second was told to check its percent-encoding
 * (a platform review).
 */
const FRAGMENT_REFUSED = 'The URL is not valid: a request target carries no fragment (#…); leave it out.'

function badUrlMessage(url: string): string {
  if (!url.startsWith('/') && url.includes('#')) return FRAGMENT_REFUSED
  // An absolute-form target (`http://host:port/path`) whose host or port does not parse: say so, not the percent-encoding.
  if (!url.startsWith('/') && !URL.canParse(url)) return 'The URL is not valid: its host or port does not parse; send the path alone, or a well-formed http(s) URL.'
  return 'The URL is not valid: check its percent-encoding.'
}

/** Every method a route here is served for (HEAD with each GET). */
const SERVED_METHODS = ['GET', 'HEAD', 'POST'] as const

function notFound(app: FastifyInstance, request: FastifyRequest): GatewayError {
  // Echoed to the client: nothing of the target that may carry a secret (target-path.ts).
  const path = targetPath(request.url)
  const shown = shownPath(request.url)
  // Served at this path for this very method: the target's form is what no route takes (`file:///healthz`).
  if (app.findRoute({ method: request.method as HTTPMethods, url: path }) !== null) {
    return new GatewayError('not_found', `No route for ${request.method} ${shown} given as this target: send the path alone, or an http(s) URL.`)
  }
  const served = SERVED_METHODS.filter((method) => method !== request.method && app.findRoute({ method, url: path }) !== null)
  if (served.length === 0) return new GatewayError('not_found', `No route for ${request.method} ${shown}.`)
  // A known path asked with another method: DESIGN.md's table has no 405, so a 404 that says what is served there.
  const allow = served.join(', ')
  return new GatewayError('not_found', `No route for ${request.method} ${shown}: it is served for ${allow}.`, { headers: { allow } })
}
