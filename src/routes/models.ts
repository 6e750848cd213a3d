/** `GET /v1/models`: the configured public model names, OpenAI list shape. */
import type { FastifyInstance } from 'fastify'
import type { GatewayContext } from '../context.js'
import { requireAuth } from '../auth/require-auth.js'
import { checkRequestIdHeader } from '../schemas/request-id.js'

export function registerModelRoutes(app: FastifyInstance, ctx: GatewayContext, startedAt: number): void {
  const created = Math.floor(startedAt / 1000)
  const list = {
    object: 'list',
    data: [...ctx.models.keys()].map((id) => ({ id, object: 'model', created, owned_by: 'sluice' })),
  }
  app.get('/v1/models', {
    config: { family: 'models' },
    onRequest: requireAuth(ctx.authenticators, { scheme: 'bearer', scope: 'chat' }, ctx.config.server.body_limit_bytes),
    handler: async (request) => {
      // A bad id is refused here as on every other authenticated route, not replaced unseen.
      checkRequestIdHeader(request.headers['x-request-id'])
      return list
    },
  })
}
