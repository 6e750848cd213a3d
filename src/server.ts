/**
 * A running gateway: the listener, the generation (config + context + app)
 * serving it, reload and graceful shutdown (DESIGN.md start-up).
 *
 * - reload: a new generation is built off to the side; once ready it takes
 *   every new request, and the old one is closed when its last request (in
 *   flight or queued) has ended. Listener settings (host, port, metrics_port, max_connections)
 *   need a restart.
 * - shutdown: stop accepting, answer waiters 503, let in-flight requests and
 *   streams finish within the grace period, then end the rest with
 *   `shutting_down` and close what still cannot end CUT_OFF_FLUSH_MS later.
 */
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import type { GatewayConfig } from './config/resolve.js'
import type { ContextOverrides, GatewayContext } from './context.js'
import { cutOffAll } from './proxy/in-flight-requests.js'
import { startGeneration, type Generation } from './generation.js'
import { QueuedBodies } from './scheduling/queued-bodies.js'
import { generationPeers } from './generation-peers.js'
import { createMetrics } from './metrics/registry.js'
import { forgetSeries, removedSeries } from './metrics/removed-series.js'
import { startMetricsListener, type MetricsListener } from './metrics-listener.js'
import { listenOn, urlOf } from './listen.js'
import { createPublicListener } from './public-listener.js'

/** How long answers cut off at the end of the grace period get to leave before their connections are closed. */
const CUT_OFF_FLUSH_MS = 1000

export interface RunningGateway {
  readonly url: string
  /** Where /metrics is served when `server.metrics_port` is set. */
  readonly metricsUrl: string | null
  /** The context of the generation serving new requests. */
  readonly context: GatewayContext
  /** Client connections currently open on the listener. */
  openConnections(): number
  /** Serves new requests with `config` from now on. */
  reload(config: GatewayConfig): Promise<void>
  /** Drains and stops; resolves when everything is closed. */
  shutdown(): Promise<void>
}

/** The longest a reload waits for the new generation's Redis link before it takes traffic anyway (on local limits). */
const RELOAD_REDIS_WAIT_MS = 2000

export async function startGateway(config: GatewayConfig, logger: Logger, overrides: ContextOverrides = {}): Promise<RunningGateway> {
  const metrics = overrides.metrics ?? createMetrics()
  // One count of waiting requests' bodies for the process: a reload's generations share the limit's room.
  const queuedBodies = overrides.queuedBodies ?? new QueuedBodies()
  // Its generations sign shared health verdicts alike (each has its own Redis link and replica id).
  const healthSigner = overrides.healthSigner ?? randomBytes(6).toString('hex')
  const retiring = new Set<Generation>()
  // Every generation still answering requests: they count each other's slots (generation-peers.ts).
  let live: readonly Generation[] = []
  const start = async (next: GatewayConfig): Promise<Generation> => {
    let self: Generation | null = null
    const slotPeers = generationPeers(() => self, () => live)
    // Live generations, the serving one first: the new one starts from what their checks found.
    const healthFrom = live.map((generation) => generation.context.models)
    // Key limits carry over too: a reload must not refill a key's buckets or forget its running requests.
    const keysFrom = live[0]?.context.state.keys
    self = await startGeneration(next, logger, { ...overrides, metrics, slotPeers, healthFrom, keysFrom, queuedBodies, healthSigner })
    return self
  }
  let current = await start(config)
  live = [current]
  const { server, connections } = createPublicListener((request, response) => current.handle(request, response), metrics, logger, config.server.max_connections)
  let metricsListener: MetricsListener | null
  try {
    await listenOn(server, config.server.host, config.server.port)
    const metricsPort = config.server.metrics_port
    metricsListener = metricsPort === undefined ? null : await startMetricsListener(metrics.registry, config.server.host, metricsPort)
  } catch (error) {
    // A gateway that cannot take both its ports does not start at all: with the
    // main port bound and metrics_port taken, it once served on, half-started,
    // with no signal handlers installed.
    server.close()
    server.closeAllConnections()
    await current.close()
    throw new StartError(error)
  }
  const { port } = server.address() as AddressInfo
  let closing: Promise<void> | null = null

  async function reload(next: GatewayConfig): Promise<void> {
    if (closing !== null) throw new Error('the gateway is shutting down')
    refuseSharedStateChanges(current.config, next)
    // Against the settings the listeners were opened with: a reload never moves them.
    warnAboutListenerChanges(logger, config, next)
    // Set before the new generation is built: the loggers it derives take the level they are made with.
    const previousLevel = logger.level
    logger.level = next.log.level
    let fresh: Generation
    try {
      fresh = await start(next)
    } catch (error) {
      logger.level = previousLevel
      throw error
    }
    // With Redis up, the new generation takes traffic once its own link is: before, each reload had
    // /readyz say "redis down" and admissions run on local limits for the ~10-30 ms of its connect.
    if (current.context.state.reachable()) await fresh.context.state.whenReachable(RELOAD_REDIS_WAIT_MS)
    const old = current
    current = fresh
    old.retire()
    retiring.add(old)
    live = [current, ...retiring]
    // The retiring generations' waiters now run under the new limits (generation-peers.ts): a raised one has room for them now.
    for (const generation of retiring) for (const slots of generation.context.state.slots.values()) slots.wake()
    void old
      .idle()
      .then(() => old.close())
      .then(() => forgetSeries(metrics, removedSeries(old.config, live.filter((g) => g !== old).map((g) => g.config))))
      .catch((error: unknown) => logger.error({ err: error }, 'closing the previous configuration failed'))
      .finally(() => {
        retiring.delete(old)
        live = [current, ...retiring]
      })
  }

  async function shutdown(): Promise<void> {
    for (const generation of [current, ...retiring]) generation.drain()
    connections.drain()
    // The config serving now: a reload may have changed the grace period.
    const graceMs = current.config.server.shutdown_grace_ms
    let lastCall: NodeJS.Timeout | undefined
    const grace = setTimeout(() => {
      // Each request still in flight is told (503, or an error event ending its stream); the
      // connections close as their answers end, and whatever cannot end (a client that stopped
      // reading) is closed a moment later.
      const cut = cutOffAll(connections.inProgress())
      logger.warn({ grace_ms: graceMs, cut_off: cut }, 'grace period over: requests still in flight are ended with shutting_down')
      lastCall = setTimeout(() => server.closeAllConnections(), CUT_OFF_FLUSH_MS)
      lastCall.unref()
    }, graceMs)
    grace.unref()
    try {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    } finally {
      clearTimeout(grace)
      clearTimeout(lastCall)
      await metricsListener?.close()
      // Every response closed, so every request has settled and issued its slot's
      // and key's release, before Redis is disconnected (the link flushes what
      // was issued before it quits: redis-link.ts).
      await Promise.all([current, ...retiring].map((generation) => generation.idle()))
      await Promise.all([current, ...retiring].map((generation) => generation.close()))
    }
  }

  return {
    url: urlOf(config.server.host, port),
    metricsUrl: metricsListener?.url ?? null,
    get context() {
      return current.context
    },
    openConnections: () => connections.open(),
    reload,
    shutdown: () => (closing ??= shutdown()),
  }
}

/** A reload the running gateway cannot take (a setting that changes only on restart): the operator's to fix, not a bug. */
export class ReloadRefused extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ReloadRefused'
  }
}

/** A listener could not be opened (address in use, not permitted): what an operator must fix, without a stack. */
export class StartError extends Error {
  constructor(cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause)
    super(`cannot start: ${reason}`, { cause })
    this.name = 'StartError'
  }
}

/**
 * Where admission state lives changes only on restart. The requests running
 * and queued under the old generation are counted where it keeps them (this
 * process, or one Redis under one prefix): a new generation counting
 * elsewhere would not see them, and a black-box audit saw a backend get
 * twice its slots and a key run past max_concurrency after such a reload.
 */
function refuseSharedStateChanges(before: GatewayConfig, after: GatewayConfig): void {
  // In memory mode the Redis keys are not read: changing them moves nothing.
  const keys = before.state.kind === 'memory' && after.state.kind === 'memory' ? [] : (['kind', 'redis_url', 'key_prefix'] as const)
  const changed = keys.filter((key) => before.state[key] !== after.state[key])
  if (changed.length === 0) return
  const verb = changed.length === 1 ? 'changes' : 'change'
  throw new ReloadRefused(`${changed.map((k) => `state.${k}`).join(', ')} ${verb} only on restart: the requests running under the current one would not be counted`)
}

function warnAboutListenerChanges(logger: Logger, before: GatewayConfig, after: GatewayConfig): void {
  const changed = (['host', 'port', 'metrics_port', 'max_connections'] as const).filter((key) => before.server[key] !== after.server[key])
  if (changed.length > 0) logger.warn({ keys: changed.map((k) => `server.${k}`) }, 'listener settings change only on restart')
}
