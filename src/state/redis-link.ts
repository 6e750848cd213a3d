/**
 * One replica's connections to Redis: a command connection with the Lua
 * scripts defined on it, a subscriber connection for wake-ups, and the
 * reachability state behind `sluice_redis_up` and `/readyz`.
 *
 * Commands never queue while Redis is unreachable (no offline queue, no
 * resend after a reconnect): a call fails at once and admission falls back
 * to local limits. An admission call also fails when Redis takes longer than
 * its budget (50 ms); its late answer is undone. An answer lost with the
 * connection (Redis hung, then the health check dropped it) cannot be
 * undone that way: when Redis answers again, the link asks the stores to
 * drop what no request holds ('reconcile').
 */
import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { HEALTH_SCRIPTS, type HealthScript } from './lua/health-scripts.js'
import { KEY_SCRIPTS, type KeyScript } from './lua/key-scripts.js'
import { SLOT_SCRIPTS, type SlotScript } from './lua/slot-scripts.js'
import { replicaChannel } from './redis-keys.js'
import { loggableRedisError, redactedRedisUrl, redisUrlSecrets, type LoggableError } from './redis-url.js'
import { serverProblem, serverRefusal } from './redis-server-check.js'
import { withinBudget } from './call-budget.js'
import { quit } from './redis-quit.js'
import { parseReplicaMessage, type ReplicaMessage } from './replica-message.js'
import { RedisUnavailable } from './redis-unavailable.js'

/** Timings, internal (not in the config file): defaults for production, short ones for tests. */
export interface RedisTimings {
  /** Lifetime of a slot lease, a key ticket and a waiter heartbeat without renewal. [15000] */
  readonly leaseTtlMs?: number
  /** How often a replica with waiters re-checks the queue (backstop for a lost message). [1000] */
  readonly backstopMs?: number
  /** Longest an admission call may take before it counts as unreachable. [50] */
  readonly callBudgetMs?: number
  /** How often the connection is checked with PING. [1000] */
  readonly healthIntervalMs?: number
}

export interface RedisLinkSettings extends RedisTimings {
  readonly url: string
  readonly keyPrefix: string
  readonly logger: Logger
  /** `sluice_redis_up`. */
  readonly upGauge?: { set(value: number): void }
}

type ScriptName = SlotScript | KeyScript | HealthScript
type ScriptCall = (...args: (string | number)[]) => Promise<unknown>

export class RedisLink extends EventEmitter<{ up: []; down: []; resync: []; reconcile: [issuedBeforeUp: number] }> {
  readonly replicaId = randomBytes(6).toString('hex')
  readonly keyPrefix: string
  readonly timings: Required<RedisTimings>
  readonly #client: Redis
  readonly #subscriber: Redis
  readonly #logger: Logger
  /** The URL's passwords, scrubbed from every error a log line carries. */
  readonly #secrets: readonly string[]
  #lastError: LoggableError | null = null
  /** This outage's log already says the login was refused. */
  #loginRefusalLogged = false
  readonly #upGauge: { set(value: number): void } | undefined
  readonly #channels = new Map<string, (message: string) => void>()
  readonly #models = new Map<string, (message: ReplicaMessage) => void>()
  readonly #health: NodeJS.Timeout
  #state: 'connecting' | 'up' | 'down' = 'connecting'
  #pending = 0
  #idle: (() => void)[] = []
  #serial = 0
  #reconcileAgain: NodeJS.Timeout | undefined
  #closed = false

  constructor(settings: RedisLinkSettings) {
    super()
    // Every model's slots, leases and limiters listen here, a few listeners per
    // model per event, for as long as the link lives (one admission state, one
    // generation: buildRedisState). Node's default cap of 10 would warn, on
    // stderr and not as JSON, at every start with a dozen models.
    this.setMaxListeners(0)
    this.keyPrefix = settings.keyPrefix
    this.#logger = settings.logger.child({ redis: redactedRedisUrl(settings.url) })
    this.#secrets = redisUrlSecrets(settings.url)
    this.#upGauge = settings.upGauge
    this.timings = {
      leaseTtlMs: settings.leaseTtlMs ?? 15_000,
      backstopMs: settings.backstopMs ?? 1000,
      callBudgetMs: settings.callBudgetMs ?? 50,
      healthIntervalMs: settings.healthIntervalMs ?? 1000,
    }
    const retryStrategy = (attempt: number) => Math.min(50 * attempt, 500)
    this.#client = new Redis(settings.url, {
      connectionName: 'sluice',
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      retryStrategy,
      // Commands issued in one tick (many requests' admissions under load) go out in one write.
      enableAutoPipelining: true,
    })
    for (const [name, lua] of Object.entries({ ...SLOT_SCRIPTS, ...KEY_SCRIPTS, ...HEALTH_SCRIPTS })) this.#client.defineCommand(name, { lua })
    this.#client.on('ready', () => void this.#admitServer())
    this.#client.on('close', () => this.#markDown('connection closed'))
    this.#client.on('error', (error: Error) => {
      this.#lastError = this.loggable(error)
      this.#logger.debug({ err: this.#lastError }, 'redis connection error')
      this.#warnOfRefusedLogin()
    })

    this.#subscriber = new Redis(settings.url, { connectionName: 'sluice-subscriber', connectTimeout: 2000, retryStrategy, maxRetriesPerRequest: null })
    this.#subscriber.on('error', (error: Error) => this.#logger.debug({ err: this.loggable(error) }, 'redis subscriber error'))
    this.#subscriber.on('message', (channel: string, message: string) => this.#channels.get(channel)?.(message))
    // Messages sent while the subscriber was away are lost: look at the shared state again.
    let subscribedBefore = false
    this.#subscriber.on('ready', () => {
      if (subscribedBefore) this.emit('resync')
      subscribedBefore = true
    })
    this.subscribe(replicaChannel(this.keyPrefix, this.replicaId), (raw) => {
      const message = parseReplicaMessage(raw)
      if (message !== null) this.#models.get(message.model)?.(message)
    })
    this.#health = setInterval(() => void this.#checkHealth(), this.timings.healthIntervalMs)
    this.#health.unref()
  }

  up(): boolean {
    return this.#state === 'up'
  }

  /** A new id for a waiter, lease or ticket: `<replica id>/<n>` (scripts read the owner from it). */
  newId(): string {
    return `${this.replicaId}/${(++this.#serial).toString(36)}`
  }

  /** This replica's channel prefix as scripts publish to it (`<prefix>replica:<id>`). */
  replicaChannelPrefix(): string {
    return replicaChannel(this.keyPrefix, '')
  }

  /** Runs one script (defined with `defineCommand`); rejects with RedisUnavailable. */
  run(script: ScriptName, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const call = (this.#client as unknown as Record<ScriptName, ScriptCall>)[script].bind(this.#client)
    return this.track(call(keys.length, ...keys, ...args).catch(this.#unavailable))
  }

  zrem(key: string, member: string): Promise<unknown> {
    return this.track(this.#client.zrem(key, member).catch(this.#unavailable))
  }

  /** A failed call: RedisUnavailable. A server refusing the scripts (a failover made it a replica) is down until a check finds it usable. */
  readonly #unavailable = (error: unknown): never => {
    const refusal = serverRefusal(error)
    if (refusal !== null) this.#markDown(`Redis refused a call (${refusal}): it cannot hold the shared state`)
    throw new RedisUnavailable(error instanceof Error ? error.message : String(error))
  }

  /** Up once the server can hold the shared state (redis-server-check.ts); down, saying why, when it cannot. */
  async #admitServer(): Promise<void> {
    let problem: string | null = null
    const budgetMs = Math.max(250, this.timings.healthIntervalMs)
    try {
      problem = await this.budgeted(serverProblem(this.#client, this.keyPrefix), () => undefined, budgetMs)
    } catch (error) {
      // No answer in time: the probe's writes wait (CLIENT PAUSE WRITE, a failover) or the server is swamped.
      // Up now, the next PING queued behind those writes would mark it down again, every two checks (a Redis
      // review saw /readyz flap for the whole pause); it stays down until a check passes.
      if (error instanceof RedisUnavailable) problem = `the server did not finish the check that it can hold the shared state within ${budgetMs} ms (writes paused, or the server swamped)`
      // Otherwise it cannot tell (an ACL forbids ROLE): the health check decides on its own.
    }
    // The connection went meanwhile: its 'close' marked it down.
    if (this.#client.status !== 'ready') return
    if (problem === null) this.#markUp()
    else this.#markDown(problem)
  }

  /**
   * `call` within the admission budget: rejects with RedisUnavailable when
   * it fails or is late; a late answer goes to `onLate` to be undone.
   */
  budgeted<T>(call: Promise<T>, onLate: (value: T) => void, budgetMs = this.timings.callBudgetMs): Promise<T> {
    return withinBudget(call, onLate, budgetMs)
  }

  /** An error as a log line may carry it: the URL's passwords scrubbed, no command arguments (redis-url.ts). */
  loggable(error: unknown): LoggableError {
    return loggableRedisError(error, this.#secrets)
  }

  /** Counts `work` as pending until it settles (see `idle`). */
  track<T>(work: Promise<T>): Promise<T> {
    this.#pending++
    return work.finally(() => {
      this.#pending--
      if (this.#pending === 0) for (const resolve of this.#idle.splice(0)) resolve()
    })
  }

  /** Resolves once no call is pending and the callbacks they started have run (tests settle on it). */
  async idle(): Promise<void> {
    for (;;) {
      if (this.#pending > 0) await new Promise<void>((resolve) => this.#idle.push(resolve))
      await new Promise<void>((resolve) => setImmediate(resolve))
      if (this.#pending === 0) return
    }
  }

  /** Routes messages published on `channel` to `handler` (one handler per channel). */
  subscribe(channel: string, handler: (message: string) => void): void {
    this.#channels.set(channel, handler)
    this.#subscriber.subscribe(channel).catch((error: unknown) => this.#logger.debug({ err: this.loggable(error), channel }, 'subscribe failed'))
  }

  /** Routes grants and evictions of this replica's waiters of `model` to `handler`. */
  listen(model: string, handler: (message: ReplicaMessage) => void): void {
    this.#models.set(model, handler)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#health)
    clearTimeout(this.#reconcileAgain)
    this.#channels.clear()
    this.#models.clear()
    const waitMs = Math.max(250, this.timings.healthIntervalMs)
    await Promise.all([quit(this.#client, waitMs), quit(this.#subscriber, waitMs)])
  }

  async #checkHealth(): Promise<void> {
    if (this.#closed || this.#client.status !== 'ready') return
    const timeoutMs = Math.max(250, this.timings.healthIntervalMs)
    try {
      await this.budgeted(this.#client.ping(), () => undefined, timeoutMs)
      if (this.#state !== 'up') await this.#admitServer()
    } catch (error) {
      this.#markDown(this.loggable(error).message)
      // A server that stopped answering: drop the connection so pending calls fail now, and reconnect.
      if (this.#client.status === 'ready') this.#client.disconnect(true)
    }
  }

  #markUp(): void {
    if (this.#closed || this.#state === 'up') return
    const before = this.#state
    this.#state = 'up'
    this.#lastError = null
    const issuedBeforeUp = this.#serial
    this.#upGauge?.set(1)
    if (before === 'down') this.#logger.info('Redis reachable again: admission uses the shared state')
    else this.#logger.info('Redis connected: admission uses the shared state')
    this.emit('up')
    this.#reconcile(issuedBeforeUp)
  }

  /**
   * A call of an id handed out before Redis became reachable again (up to
   * serial `issuedBeforeUp`) whose answer was lost with the old connection
   * (late, then cut off; a release while Redis hung) may have left an entry
   * that no request here holds: a lease would keep its slot from every
   * replica for a TTL. The stores drop such entries on 'reconcile', now and
   * once more a backstop later, for commands Redis reads off the old
   * connection only after the new one's. Newer ids are never touched: their
   * calls may still be on the wire.
   */
  #reconcile(issuedBeforeUp: number): void {
    if (issuedBeforeUp === 0) return
    this.emit('reconcile', issuedBeforeUp)
    clearTimeout(this.#reconcileAgain)
    this.#reconcileAgain = setTimeout(() => {
      if (this.#state === 'up' && !this.#closed) this.emit('reconcile', issuedBeforeUp)
    }, this.timings.backstopMs)
    this.#reconcileAgain.unref()
  }

  #markDown(reason: string): void {
    if (this.#closed || this.#state === 'down') return
    this.#state = 'down'
    this.#upGauge?.set(0)
    // The connection's last error says why it closed; a refused login is said as such (it read as a network problem).
    const lastError = this.#lastError?.message ?? null
    const refused = isRefusedLogin(lastError)
    this.#loginRefusalLogged = refused
    this.#logger.warn(
      { reason: refused ? REFUSED_LOGIN : reason, last_error: lastError },
      'Redis unreachable: each replica admits on its own local limits until it is back',
    )
    this.emit('down')
  }

  /**
   * A Redis that comes back with another password: the outage was logged as
   * "connection closed" before any login failed, and the refusals that
   * followed only at debug (a Redis review). Said once per outage.
   */
  #warnOfRefusedLogin(): void {
    if (this.#state !== 'down' || this.#loginRefusalLogged || !isRefusedLogin(this.#lastError?.message ?? null)) return
    this.#loginRefusalLogged = true
    this.#logger.warn({ reason: REFUSED_LOGIN, last_error: this.#lastError?.message ?? null }, 'Redis refuses the gateway\'s login: each replica admits on its own local limits until it is let in')
  }
}

const REFUSED_LOGIN = 'authentication failed: check the password (and user) in state.redis_url'

function isRefusedLogin(message: string | null): boolean {
  return message !== null && /^(WRONGPASS|NOAUTH|NOPERM)\b/.test(message)
}
