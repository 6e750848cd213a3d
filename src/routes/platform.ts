/**
 * The three platform operations, built from one table: each row says how the
 * route is protected, which upstream it goes to and how its request is
 * checked and turned into the upstream call. One forwarding path serves all.
 * A key's limits count its calls here too, as they count its chat requests.
 * A route whose upstream is not configured is not registered (404).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { GatewayContext } from '../context.js'
import type { UpstreamName } from '../config/schema.js'
import type { AuthRequirement } from '../auth/principal.js'
import { requireAuth } from '../auth/require-auth.js'
import { compileBodyCheck } from '../schemas/body-validator.js'
import { ObjectReadRequest } from '../schemas/objects.js'
import { TrainingJobRequest } from '../schemas/training.js'
import { checkpointUpstreamPath, parseCheckpointQuery } from '../schemas/checkpoints.js'
import { checkRequestIdHeader } from '../schemas/request-id.js'
import type { RouteFamily } from '../request-facts.js'
import { forwardToUpstream, type PlatformRequest } from '../proxy/upstream-forward.js'
import { admitKeyLimits } from '../scheduling/key-policy.js'
import { GatewayError } from '../errors/gateway-error.js'
import { withoutByteOrderMark } from '../json/json-object-layout.js'
import { shownPath } from '../target-path.js'

interface PlatformRoute {
  readonly family: RouteFamily
  readonly method: 'GET' | 'POST'
  readonly url: string
  readonly upstream: UpstreamName
  readonly auth: AuthRequirement
  /** Validates the request (throwing a 400) and returns what to send upstream. */
  readonly prepare: (request: FastifyRequest) => PlatformRequest
}

const checkTrainingJob = compileBodyCheck(TrainingJobRequest)
const checkObjectRead = compileBodyCheck(ObjectReadRequest)

/** A valid body goes upstream as the exact bytes the client sent, less a byte order mark. */
function asReceived(check: (body: unknown) => unknown, path: string) {
  return (request: FastifyRequest): PlatformRequest => {
    check(request.body)
    return { method: 'POST', path, body: request.rawBody === null ? null : withoutByteOrderMark(request.rawBody) }
  }
}

export const PLATFORM_ROUTES: readonly PlatformRoute[] = [
  {
    family: 'training',
    method: 'POST',
    url: '/v1/preview/training-jobs',
    upstream: 'training',
    auth: { scheme: 'bearer', scope: 'training' },
    prepare: asReceived(checkTrainingJob, '/v1/preview/training-jobs'),
  },
  {
    family: 'checkpoints',
    method: 'GET',
    url: '/v1/preview/models/:model_id/checkpoints',
    upstream: 'checkpoints',
    auth: { scheme: 'bearer', scope: 'checkpoints' },
    prepare: (request) => {
      const { model_id } = request.params as { model_id: string }
      const at = request.url.indexOf('?')
      const query = parseCheckpointQuery(request.query as Record<string, unknown>, at < 0 ? '' : request.url.slice(at + 1))
      // fastify answers HEAD with this GET route: the upstream gets a HEAD too.
      return { method: request.method === 'HEAD' ? 'HEAD' : 'GET', path: checkpointUpstreamPath(model_id, query), body: null }
    },
  },
  {
    family: 'objects',
    method: 'POST',
    url: '/obj/read',
    upstream: 'objects',
    auth: { scheme: 'basic', scope: 'objects' },
    prepare: asReceived(checkObjectRead, '/obj/read'),
  },
]

export function registerPlatformRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  for (const route of PLATFORM_ROUTES) {
    const upstream = ctx.upstreams.get(route.upstream)
    if (upstream === undefined) {
      registerNotConfigured(app, route)
      continue
    }
    app.route({
      method: route.method,
      url: route.url,
      config: { family: route.family },
      onRequest: requireAuth(ctx.authenticators, route.auth, ctx.config.server.body_limit_bytes),
      handler: async (request, reply) => {
        const call = route.prepare(request)
        // After the body and query, as on the chat route; app.ts took a valid header as the request id.
        checkRequestIdHeader(request.headers['x-request-id'])
        const ticket = await admitKeyLimits(ctx.state, ctx.metrics, request.facts.principal)
        return forwardToUpstream(ctx, request, reply, upstream, call, ticket)
      },
    })
  }
}

/**
 * A route whose upstream this gateway has no URL for: a 404 that says so,
 * for every method, before credentials or the body are looked at (an
 * operator audit read "No route for POST /v1/preview/training-jobs" as the
 * route not existing, and the path's other methods were told "it is served
 * for POST", which answered 404 too). Every method is routed here, so that
 * no other method is told "it is served for GET, HEAD, POST" either.
 */
function registerNotConfigured(app: FastifyInstance, route: PlatformRoute): void {
  const notConfigured = (request: FastifyRequest) =>
    new GatewayError('not_found', `${shownPath(request.url)} is not served here: this gateway has no ${route.upstream} upstream (upstreams.${route.upstream} in its config).`)
  app.route({
    method: app.supportedMethods,
    url: route.url,
    config: { family: route.family },
    onRequest: (request, _reply, done) => done(notConfigured(request)),
    handler: (request) => Promise.reject(notConfigured(request)),
  })
}
