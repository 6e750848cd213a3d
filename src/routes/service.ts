/** Unauthenticated operator endpoints: liveness, readiness, metrics. */
import type { FastifyInstance } from 'fastify'
import { exposition } from '../metrics/exposition.js'
import type { GatewayContext } from '../context.js'
import { GatewayError } from '../errors/gateway-error.js'

export function registerServiceRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.get('/healthz', { config: { family: 'service' } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { config: { family: 'service' } }, async (_request, reply) => {
    const now = ctx.clock.now()
    // Confirmed, not merely usable: a backend no check or answer has shown healthy yet does not make a model ready.
    const modelsWithoutBackend = [...ctx.models.values()].filter((m) => !m.hasConfirmedBackend(now)).map((m) => m.name)
    // Redis mode: not ready while the shared state is unreachable (admission runs on local limits).
    const shared = ctx.config.state.kind === 'redis' ? { redis: ctx.state.reachable() ? 'up' : 'down' } : {}
    const redisDown = !ctx.state.reachable()
    if (modelsWithoutBackend.length === 0 && !redisDown) return { status: 'ready', models_without_healthy_backend: [], ...shared }
    // The 503 carries DESIGN.md's error object too: every error body has one.
    const error = new GatewayError('not_ready', notReadyMessage(modelsWithoutBackend, redisDown)).toBody()
    return reply.code(503).send({ status: 'not_ready', models_without_healthy_backend: modelsWithoutBackend, ...shared, ...error })
  })

  // With server.metrics_port set, /metrics lives on its own listener (metrics-listener.ts).
  if (ctx.config.server.metrics_port !== undefined) return
  app.get('/metrics', { config: { family: 'service' } }, async (_request, reply) => {
    const text = await exposition(ctx.metrics.registry)
    return reply.type(ctx.metrics.registry.contentType).send(text)
  })
}

/** What keeps the gateway from being ready, in the words of an error message. */
export function notReadyMessage(modelsWithoutBackend: readonly string[], redisDown: boolean): string {
  const reasons: string[] = []
  if (modelsWithoutBackend.length > 0) reasons.push(`no healthy backend for model ${modelsWithoutBackend.map((m) => `"${m}"`).join(', ')}`)
  if (redisDown) reasons.push('Redis is unreachable (admission runs on local limits)')
  return `Not ready: ${reasons.join('; ')}.`
}
