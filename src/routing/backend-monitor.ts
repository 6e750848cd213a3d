/**
 * Watches every backend: an active health check and a read of its
 * `/metrics` every `health.interval_ms` (the first at start, so `/readyz`
 * settles within seconds), and the passive signals real traffic reports.
 * Publishes what it learns: `sluice_backend_up` (1 only once a check or an
 * answer has shown the backend healthy, health-state.ts), and a wake-up for
 * the model's queue when a backend can take requests again.
 *
 * Stopping it aborts the probes in flight: a pool's close waits for its
 * requests, and a probe to a backend that never answers would otherwise hold
 * a drain (or a reload's retirement) up for its whole timeout.
 *
 * With a shared health board (Redis mode) it also exchanges verdicts with
 * the other replicas (shared-verdicts.ts).
 */
import { setMaxListeners } from 'node:events'
import { errors } from 'undici'
import type { Logger } from 'pino'
import type { Clock } from '../context.js'
import type { Metrics } from '../metrics/registry.js'
import type { Backend } from './backend.js'
import { LOCAL_HEALTH_BOARD, type HealthBoard } from '../state/health-board.js'
import {
  afterActiveCheck,
  afterPassiveFailure,
  afterPassiveSuccess,
  isConfirmedWith,
  type HealthSettings,
  type HealthState,
  type PassiveFailure,
} from './health-state.js'
import type { ModelRoute } from './model-route.js'
import { readVllmLoad } from './vllm-load.js'
import { SharedVerdicts } from './shared-verdicts.js'
import { UpstreamCall } from '../proxy/upstream-call.js'
import { classifyUpstreamFailure } from '../errors/upstream-errors.js'

/** Longest a probe may take: a health check slower than this counts as failed. */
const MAX_PROBE_MS = 5000
/** Most of a probe's answer held (vLLM's /metrics is a few hundred KiB); a longer one counts as failed. */
const MAX_PROBE_BYTES = 16 * 2 ** 20
/** Backend load older than this many intervals is ignored. */
const STALE_INTERVALS = 3

/**
 * When the next check starts, counted from the end of one that took `tookMs`:
 * checks start every interval, however long each took. Counted from the end,
 * a backend that hangs (each check waits out its timeout, up to the
 * interval) was checked every two intervals and marked down twice as late.
 */
export function nextProbeIn(intervalMs: number, tookMs: number): number {
  return Math.max(0, intervalMs - tookMs)
}

export interface MonitorHooks {
  /** A backend of this model may have become usable: re-examine its queue. */
  readonly wake: (model: string) => void
  /** No backend of this model can take a request now: its waiters would wait for nothing. */
  readonly unavailable: (model: string) => void
  /** Where verdicts are shared with other replicas; absent: this replica's checks only. */
  readonly board?: HealthBoard
}

export class BackendMonitor {
  readonly #models: ReadonlyMap<string, ModelRoute>
  readonly #clock: Clock
  readonly #metrics: Metrics
  /** Whether this generation serves new requests: until a reload retires it, it writes `sluice_backend_up` and shares verdicts. */
  #serving = true
  readonly #logger: Logger
  readonly #hooks: MonitorHooks
  readonly #verdicts: SharedVerdicts
  readonly #timers = new Set<NodeJS.Timeout>()
  /** Aborted by stop(): every probe request carries its signal (one listener each, hence no listener cap). */
  readonly #probes = unlimited(new AbortController())
  #stopped = false

  constructor(models: ReadonlyMap<string, ModelRoute>, clock: Clock, metrics: Metrics, logger: Logger, hooks: MonitorHooks) {
    this.#models = models
    this.#clock = clock
    this.#metrics = metrics
    this.#logger = logger
    this.#hooks = hooks
    this.#verdicts = new SharedVerdicts({
      clock,
      logger,
      board: hooks.board ?? LOCAL_HEALTH_BOARD,
      serving: () => this.#serving,
      stopped: () => this.#stopped,
      check: async (route, backend) => (await this.#checkHealth(route, backend)) === null,
      publish: (route, backend) => this.#publish(route, backend),
      after: (ms, run) => this.#after(ms, run),
    })
  }

  start(): void {
    for (const route of this.#models.values()) {
      this.#verdicts.watch(route)
      for (const backend of route.backends) {
        // Health inherited from a previous generation may carry an ejection: publish when it ends.
        this.#publishWhenReopened(route, backend)
        this.#probe(route, backend)
      }
    }
  }

  /**
   * A reload replaced this generation: `sluice_backend_up` and the shared
   * board are the serving one's. A backend moved to another URL under the
   * same name was still probed here at its old URL: its 0s flapped the gauge
   * between the two generations (a lifecycle audit), and in Redis mode its
   * down verdicts took the backend's new URL out of service on every
   * replica, this one's serving generation included, until this one closed.
   */
  retire(): void {
    this.#serving = false
  }

  stop(): void {
    this.#stopped = true
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    this.#probes.abort(new Error('backend monitor stopped'))
  }

  /** The backend's load if it was read recently enough to trust. */
  freshLoad(backend: Backend, route: ModelRoute) {
    const maxAge = route.settings.health.interval_ms * STALE_INTERVALS
    return backend.load !== null && this.#clock.now() - backend.load.at <= maxAge ? backend.load.value : undefined
  }

  reportSuccess(backend: Backend): void {
    const before = backend.health
    backend.health = afterPassiveSuccess(before)
    // A first success confirms the backend: the gauge may now count it.
    const route = this.#models.get(backend.model)
    if (backend.health.confirmed !== before.confirmed && route !== undefined) this.#publish(route, backend)
  }

  /** `what`: the failure as the log names it (`reset`, `mid_stream`: `status` alone said nothing of a reset). */
  reportFailure(route: ModelRoute, backend: Backend, failure: PassiveFailure, what: string = failure): void {
    const ejectedUntil = backend.health.ejectedUntil
    this.#update(route, backend, () => afterPassiveFailure(backend.health, failure, settingsOf(route), this.#clock.now()), { failure: `real traffic: ${what}` })
    // One timer per ejection: the other requests of one incident report into the same one.
    if (backend.health.ejectedUntil !== ejectedUntil) this.#publishWhenReopened(route, backend)
  }

  /** At the ejection's end, unless a check ended it first (and said so): the backend is back in rotation, logged as a check's return is. */
  #publishWhenReopened(route: ModelRoute, backend: Backend): void {
    const ejectedUntil = backend.health.ejectedUntil
    const reopensIn = ejectedUntil - this.#clock.now()
    if (reopensIn <= 0) return
    this.#after(reopensIn, () => {
      // A timer may fire a millisecond before the clock reads the ejection's end: wait that out, or
      // the backend stays out of the gauge (and unannounced) until something else publishes it.
      if (backend.health.ejectedUntil === ejectedUntil && this.#clock.now() < ejectedUntil) return this.#publishWhenReopened(route, backend)
      const usable = this.#publish(route, backend)
      if (usable && backend.health.ejectedUntil === ejectedUntil) this.#logger.warn({ model: route.name, backend: backend.name, up: true, after: 'ejection ended' }, 'backend up')
    })
  }

  /**
   * Runs the probe loop. A throw from what a verdict sets off (a hook, the
   * board) would otherwise end this backend's probing for good and reach
   * the process as an unhandled rejection: it is logged, and probing goes on.
   */
  #probe(route: ModelRoute, backend: Backend): void {
    this.#probeLoop(route, backend).catch((error: unknown) => {
      this.#logger.error({ err: error, model: route.name, backend: backend.name }, 'acting on a health check failed; checking again next interval')
      this.#after(route.settings.health.interval_ms, () => this.#probe(route, backend))
    })
  }

  async #probeLoop(route: ModelRoute, backend: Backend): Promise<void> {
    if (this.#stopped) return
    const startedAt = this.#clock.now()
    const ticket = this.#verdicts.checkStarting()
    const [failure] = await Promise.all([this.#checkHealth(route, backend), this.#readLoad(route, backend)])
    // Stopped meanwhile (the probe was aborted, not failed): a retired generation must not
    // publish a verdict into the gauge the serving one shares.
    if (this.#stopped) return
    const healthy = failure === null
    const why: Readonly<Record<string, string>> = healthy ? {} : { check: `GET ${backend.origin}${backend.pathFor(route.settings.health.path)}`, failure }
    if (!healthy) this.#logger.debug({ model: route.name, backend: backend.name, ...why }, 'health check failed')
    this.#update(route, backend, () => afterActiveCheck(backend.health, healthy, settingsOf(route), this.#clock.now()), why)
    this.#verdicts.afterOwnCheck(route, backend, ticket, healthy)
    this.#after(nextProbeIn(route.settings.health.interval_ms, this.#clock.now() - startedAt), () => this.#probe(route, backend))
  }

  /** Null when the check passed, else what went wrong (for the log: an operator's first question). */
  async #checkHealth(route: ModelRoute, backend: Backend): Promise<string | null> {
    const answer = await this.#get(backend, route.settings.health.path, route)
    return answer.ok ? null : answer.failure
  }

  async #readLoad(route: ModelRoute, backend: Backend): Promise<void> {
    const answer = await this.#get(backend, '/metrics', route)
    if (!answer.ok) return
    try {
      backend.load = { value: readVllmLoad(answer.body), at: this.#clock.now() }
    } catch (error) {
      this.#logger.debug({ err: error, model: route.name, backend: backend.name }, 'unreadable backend metrics')
    }
  }

  /**
   * The body of a 2xx answer, or what else came: the status, the connection's
   * error code, no answer in time. Through the same dispatch handler as chat answers, not
   * `pool.request`: its body stream was the only undici Readable in a chat
   * gateway, and each probe sent Node's stream functions (which the client
   * connections run through) back to unoptimized code, every interval.
   */
  async #get(backend: Backend, path: string, route: ModelRoute): Promise<ProbeAnswer> {
    const timeout = Math.min(route.settings.health.interval_ms, MAX_PROBE_MS)
    const headers = backend.apiKey === undefined ? {} : { authorization: `Bearer ${backend.apiKey}` }
    const call = new UpstreamCall(backend.pool, { method: 'GET', path: backend.pathFor(path), headers, headersTimeout: timeout, bodyTimeout: timeout }, timeout)
    const abort = (): void => call.abort(new Error('backend monitor stopped'))
    this.#probes.signal.addEventListener('abort', abort)
    if (this.#probes.signal.aborted) abort()
    // The whole probe, not only its silences: a body trickled a byte at a time never ended, and
    // the backend was probed no more, up for good whatever it answered (an HTTP review).
    const deadline = setTimeout(() => call.abort(new errors.BodyTimeoutError()), timeout)
    try {
      const { statusCode } = await call.head
      const body = await call.readAll(MAX_PROBE_BYTES)
      return statusCode >= 200 && statusCode < 300 ? { ok: true, body: body.toString('utf8') } : { ok: false, failure: `answered ${statusCode}` }
    } catch (error) {
      return { ok: false, failure: probeFailure(error, timeout) }
    } finally {
      clearTimeout(deadline)
      this.#probes.signal.removeEventListener('abort', abort)
    }
  }

  #update(route: ModelRoute, backend: Backend, next: () => HealthState, why: Readonly<Record<string, string>> = {}): void {
    const now = this.#clock.now()
    const wasUsable = backend.usable(now)
    const before = backend.health
    backend.health = next()
    this.#verdicts.share(route, backend, before, settingsOf(route), now)
    const usable = this.#publish(route, backend)
    if (usable === wasUsable) return
    if (usable) this.#logger.warn({ model: route.name, backend: backend.name, up: true }, 'backend up')
    else this.#logger.warn({ model: route.name, backend: backend.name, up: false, ...why }, 'backend down')
  }

  /**
   * Sets the gauge (confirmed health); wakes the queue when the backend can
   * take requests, and turns its waiters away when no backend of the model can.
   */
  #publish(route: ModelRoute, backend: Backend): boolean {
    const now = this.#clock.now()
    const usable = backend.usable(now)
    if (this.#serving) this.#metrics.backendUp.set({ model: route.name, backend: backend.name }, isConfirmedWith(backend.health, backend.shared, now) ? 1 : 0)
    if (usable) this.#hooks.wake(route.name)
    else if (!route.hasUsableBackend(now)) this.#hooks.unavailable(route.name)
    return usable
  }

  #after(ms: number, run: () => void): void {
    if (this.#stopped) return
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      run()
    }, ms)
    timer.unref()
    this.#timers.add(timer)
  }
}

function settingsOf(route: ModelRoute): HealthSettings {
  return { unhealthyAfter: route.settings.health.unhealthy_after, intervalMs: route.settings.health.interval_ms }
}

/** An AbortController whose signal takes any number of listeners (Node warns past 10: a model with many backends probes them all at once). */
function unlimited(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal)
  return controller
}

type ProbeAnswer = { readonly ok: true; readonly body: string } | { readonly ok: false; readonly failure: string }

/** A probe's failure in a few words: the connection's error code (ECONNREFUSED, …), a timeout, or the error's own message. */
function probeFailure(error: unknown, timeoutMs: number): string {
  const reason = classifyUpstreamFailure(error)
  const code = (error as { code?: unknown } | null)?.code
  if (reason === 'timeout') return `no answer within ${timeoutMs} ms`
  if (typeof code === 'string') return code
  return error instanceof Error ? error.message : String(error)
}
