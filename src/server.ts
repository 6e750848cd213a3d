/**
 * A running gateway: context, app and listener, with graceful shutdown
 * (DESIGN.md start-up): stop accepting, let in-flight requests and streams
 * finish within the grace period, then close the rest.
 */
import type { Logger } from 'pino'
import type { GatewayConfig } from './config/resolve.js'
import { buildApp } from './app.js'
import { buildContext, type ContextOverrides, type GatewayContext } from './context.js'
import { trackConnections } from './connection-drain.js'
import { startMetricsListener } from './metrics-listener.js'

export interface RunningGateway {
  readonly url: string
  /** Where /metrics is served when `server.metrics_port` is set. */
  readonly metricsUrl: string | null
  readonly context: GatewayContext
  /** Drains and stops; resolves when everything is closed. */
  shutdown(): Promise<void>
}

export async function startGateway(config: GatewayConfig, logger: Logger, overrides: ContextOverrides = {}): Promise<RunningGateway> {
  const context = buildContext(config, logger, overrides)
  const { app, startDraining } = await buildApp(context)
  const connections = trackConnections(app.server)
  await app.listen({ host: config.server.host, port: config.server.port })
  context.monitor.start()
  const metricsPort = config.server.metrics_port
  const metricsListener = metricsPort === undefined ? null : await startMetricsListener(context.metrics.registry, config.server.host, metricsPort)
  const address = app.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : config.server.port
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host
  let closing: Promise<void> | null = null

  async function shutdown(): Promise<void> {
    startDraining()
    // Waiting requests are answered 503 at once; in-flight ones get the grace period.
    context.state.close()
    connections.drain()
    const grace = setTimeout(() => {
      logger.warn({ grace_ms: config.server.shutdown_grace_ms }, 'grace period over: closing remaining connections')
      app.server.closeAllConnections()
    }, config.server.shutdown_grace_ms)
    grace.unref()
    try {
      await app.close()
    } finally {
      clearTimeout(grace)
      await metricsListener?.close()
      await context.close()
    }
  }

  return {
    url: `http://${host}:${port}`,
    metricsUrl: metricsListener?.url ?? null,
    context,
    shutdown: () => (closing ??= shutdown()),
  }
}
