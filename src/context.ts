/**
 * Everything the app depends on, built in one place (main.ts or a test) and
 * passed down: configuration, logger, clock, randomness, metrics, backends.
 * No module keeps state of its own beyond marks on a request's own objects
 * (a symbol property, a WeakSet entry) that go with them.
 */
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { configWarnings } from './config/config-warnings.js'
import type { GatewayConfig } from './config/resolve.js'
import { BearerKeyring } from './auth/bearer.js'
import type { Authenticators } from './auth/authenticate.js'
import { ProvenCredentials } from './auth/proven-credentials.js'
import { CHAT_BACKEND_FAILURES, PLATFORM_UPSTREAM_FAILURES, createMetrics, zeroUpstreamErrors, type Metrics } from './metrics/registry.js'
import { buildModelRoutes, healthKnownTo, type ModelRoute } from './routing/model-route.js'
import { BasicUserStore } from './auth/basic.js'
import { DerivationsBusyError } from './auth/derivation-limiter.js'
import { UPSTREAM_NAMES, type UpstreamName } from './config/schema.js'
import { Upstream } from './routing/upstream.js'
import type { AdmissionObserver, AdmissionState, KeyLimiter } from './state/store.js'
import { buildAdmissionState } from './state/admission-state.js'
import type { RedisTimings } from './state/redis-link.js'
import type { SlotPeers } from './state/slot-peers.js'
import { BackendMonitor } from './routing/backend-monitor.js'
import { noHealthyBackend } from './routing/no-healthy-backend.js'
import { LOCAL_HEALTH_BOARD } from './state/health-board.js'
import { isConfirmedWith } from './routing/health-state.js'
import { QueuedBodies } from './scheduling/queued-bodies.js'

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
}

export interface GatewayContext {
  readonly config: GatewayConfig
  readonly logger: Logger
  readonly clock: Clock
  readonly newId: () => string
  /** Uniform in [0, 1): the only randomness decisions use (balancer ties). */
  readonly random: () => number
  readonly metrics: Metrics
  readonly models: ReadonlyMap<string, ModelRoute>
  /** Configured platform upstreams; absent ones are not served. */
  readonly upstreams: ReadonlyMap<UpstreamName, Upstream>
  readonly authenticators: Authenticators
  /** Slots, queues and key limits (in this process, or shared through Redis). */
  readonly state: AdmissionState
  /** Health checks, backend load and passive failure reports. */
  readonly monitor: BackendMonitor
  /** Releases what the context holds (connection pools, Redis connections). */
  close(): Promise<void>
}

export interface ContextOverrides {
  readonly clock?: Clock
  readonly newId?: () => string
  readonly random?: () => number
  /** Metrics shared with an earlier generation (reload keeps counters running). */
  readonly metrics?: Metrics
  /** Replaces the admission state (benchmarks measure the gateway without it). */
  readonly state?: AdmissionState
  /** Redis mode's lease, heartbeat and budget timings (tests shorten them). */
  readonly redisTimings?: RedisTimings
  /** The other generations' slots on the same backends (during a reload; in Redis mode for the local fallback). [none] */
  readonly slotPeers?: SlotPeers
  /** The serving generation's key limiter, kept across a reload in memory mode (admission-state.ts). [none] */
  readonly keysFrom?: KeyLimiter
  /**
   * The model routes of the generations serving now, newest first: a backend
   * also in one of them (same model, name and URL) starts from its health
   * there, so a reload does not forget what checks found. [none]
   */
  readonly healthFrom?: readonly ReadonlyMap<string, ModelRoute>[]
  /** The bodies of waiting requests, counted across generations (one count per process). [a count of its own] */
  readonly queuedBodies?: QueuedBodies
  /**
   * Who signs this gateway's shared health verdicts (Redis mode), the same
   * for all its generations: a new one must not take its predecessor's
   * verdict for another replica's. [one of its own]
   */
  readonly healthSigner?: string
}

export function buildContext(config: GatewayConfig, logger: Logger, overrides: ContextOverrides = {}): GatewayContext {
  const models = buildModelRoutes(config.models, healthKnownTo(overrides.healthFrom ?? []))
  const upstreams = buildUpstreams(config)
  const metrics = overrides.metrics ?? createMetrics()
  const users = new BasicUserStore(config.auth.users)
  for (const warning of configWarnings(config)) logger.warn(warning)
  const clock = overrides.clock ?? { now: () => Date.now() }
  for (const route of models.values()) {
    // inc(…, 0) creates a series without overwriting what another generation counts.
    metrics.queueDepth.inc({ model: route.name }, 0)
    for (const backend of route.backends) {
      // 0 until a check confirms a new backend; an inherited one keeps what is known of it.
      metrics.backendUp.set({ model: route.name, backend: backend.name }, isConfirmedWith(backend.health, backend.shared, clock.now()) ? 1 : 0)
      metrics.inflightCounts.add(route.name, backend.name, 0)
      zeroUpstreamErrors(metrics, route.name, backend.name, CHAT_BACKEND_FAILURES)
    }
  }
  // An upstream that gets the client's credentials has no auth_refused: its 401s are the client's.
  for (const upstream of upstreams.values()) zeroUpstreamErrors(metrics, '', upstream.name, PLATFORM_UPSTREAM_FAILURES.filter((reason) => reason !== 'auth_refused' || !upstream.forwardsClient))
  const usable = (model: string, backend: string) => models.get(model)?.backends.find((b) => b.name === backend)?.usable(clock.now()) ?? false
  const state = overrides.state ?? buildAdmissionState(config, {
      usable,
      clock,
      observer: admissionMetrics(metrics),
      logger,
      metrics,
      redisTimings: overrides.redisTimings,
      peers: overrides.slotPeers,
      keysFrom: overrides.keysFrom,
      bodyBudget: (overrides.queuedBodies ?? new QueuedBodies()).budget(config.server.queued_body_limit_bytes),
      healthSigner: overrides.healthSigner,
    })
  const stopCountingQueues = metrics.queueDepths.add(() => [...models.keys()].map((model) => [model, state.slots.get(model)?.queueDepth() ?? 0] as const))
  const board = state.healthBoard ?? LOCAL_HEALTH_BOARD
  const monitor = new BackendMonitor(models, clock, metrics, logger, {
    wake: (model) => state.slots.get(model)?.wake(),
    unavailable: (model) => state.slots.get(model)?.turnAway(noHealthyBackend(model)),
    board,
  })
  return {
    config,
    logger,
    clock,
    state,
    monitor,
    newId: overrides.newId ?? (() => randomUUID()),
    random: overrides.random ?? Math.random,
    metrics,
    models,
    upstreams,
    authenticators: { bearer: new BearerKeyring(config.auth.keys), proven: new ProvenCredentials(), basic: (username, password, clientGone) => countedWhenBusy(users.verify(username, password, clientGone), metrics) },
    async close() {
      stopCountingQueues()
      monitor.stop()
      await Promise.all([...[...models.values()].map((m) => m.close()), ...[...upstreams.values()].map((u) => u.close()), state.disconnect()])
    },
  }
}

function buildUpstreams(config: GatewayConfig): Map<UpstreamName, Upstream> {
  const upstreams = new Map<UpstreamName, Upstream>()
  for (const name of UPSTREAM_NAMES) {
    const settings = config.upstreams[name]
    if (settings !== undefined) upstreams.set(name, new Upstream(name, settings))
  }
  return upstreams
}

function admissionMetrics(metrics: Metrics): AdmissionObserver {
  return {
    slotTaken: (model, backend) => metrics.inflightCounts.add(model, backend, 1),
    slotReleased: (model, backend) => metrics.inflightCounts.add(model, backend, -1),
    waited: (model, milliseconds) => metrics.queueWait.observe({ model }, milliseconds / 1000),
  }
}

/**
 * A Basic check refused for the derivations already running (429 credential_checks_busy) is a request
 * turned away under load like a full queue: counted with them, so the alert on rejections sees a flood
 * of Basic checks (a metrics review: it was the one 429 with no reason counted).
 */
function countedWhenBusy<T>(check: Promise<T>, metrics: Metrics): Promise<T> {
  return check.catch((error: unknown) => {
    if (error instanceof DerivationsBusyError) metrics.rejections.inc({ reason: 'credential_checks_busy' })
    throw error
  })
}
