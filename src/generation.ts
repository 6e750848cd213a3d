/**
 * One configuration in service: its context (backends, pools, admission
 * state, monitor) and its app, plus a count of the requests it is
 * answering. A reload starts a new generation; the old one is retired: it
 * takes no new requests, and is closed once its last request has ended, so
 * in-flight and queued requests finish under the config they started with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { buildApp } from './app.js'
import type { GatewayConfig } from './config/resolve.js'
import { buildContext, type ContextOverrides, type GatewayContext } from './context.js'

export interface Generation {
  readonly config: GatewayConfig
  readonly context: GatewayContext
  handle(request: IncomingMessage, response: ServerResponse): void
  /** New requests get 503 `shutting_down`; waiters are answered 503 at once. */
  drain(): void
  /** Replaced by a reload: it stops writing the gauges the serving generation owns. */
  retire(): void
  /** Resolves when every request this generation took has ended; any number of callers may wait. */
  idle(): Promise<void>
  /** Frees what it holds (app hooks, pools, timers, connections to Redis); a second call gets the first's promise. */
  close(): Promise<void>
}

export async function startGeneration(config: GatewayConfig, logger: Logger, overrides: ContextOverrides): Promise<Generation> {
  const context = buildContext(config, logger, overrides)
  const { app, handle, startDraining } = await buildApp(context)
  let active = 0
  // A shutdown during a reload waits on a retiring generation the reload already waits on.
  let idleWaiters: (() => void)[] = []
  let closing: Promise<void> | undefined
  context.monitor.start()
  return {
    config,
    context,
    handle(request, response) {
      active++
      // `on`, not `once`: a response closes only once, and once's wrapper costs on every request.
      response.on('close', () => {
        active--
        if (active === 0 && idleWaiters.length > 0) {
          const waiters = idleWaiters
          idleWaiters = []
          for (const resolve of waiters) resolve()
        }
      })
      handle(request, response)
    },
    drain() {
      startDraining()
      context.state.close()
    },
    retire() {
      context.monitor.retire()
    },
    idle() {
      if (active === 0) return Promise.resolve()
      return new Promise((resolve) => idleWaiters.push(resolve))
    },
    close() {
      closing ??= (async () => {
        context.monitor.stop()
        await app.close()
        await context.close()
      })()
      return closing
    },
  }
}
