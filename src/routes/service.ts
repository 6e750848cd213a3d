/** Unauthenticated operator endpoints: liveness, readiness, metrics. */
import type { FastifyInstance } from 'fastify'
import type { GatewayContext } from '../context.js'

export function registerServiceRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.get('/healthz', { config: { family: 'service' } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { config: { family: 'service' } }, async (_request, reply) => {
    const now = ctx.clock.now()
    // Confirmed, not merely usable: a backend no check or answer has shown healthy yet does not make a model ready.
    const modelsWithoutBackend = [...ctx.models.values()].filter((m) => !m.hasConfirmedBackend(now)).map((m) => m.name)
    // Redis mode: not ready while the shared state is unreachable (admission runs on local limits).
    const shared = ctx.config.state.kind === 'redis' ? { redis: ctx.state.reachable() ? 'up' : 'down' } : {}
    const ready = modelsWithoutBackend.length === 0 && ctx.state.reachable()
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', models_without_healthy_backend: modelsWithoutBackend, ...shared })
  })

  // With server.metrics_port set, /metrics lives on its own listener (metrics-listener.ts).
  if (ctx.config.server.metrics_port !== undefined) return
  app.get('/metrics', { config: { family: 'service' } }, async (_request, reply) => {
    const text = await ctx.metrics.registry.metrics()
    return reply.type(ctx.metrics.registry.contentType).send(text)
  })
}
