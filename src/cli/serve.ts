/**
 * What the entry point (main.ts) runs once its SIGHUP listener is in place:
 * parses the command line, loads the configuration, starts the gateway and
 * wires the process signals. With main.ts, the only module that reads
 * `process` (environment, arguments, signals); log-destination.ts alone
 * also reports to its stderr and flushes on its exit.
 */
import { parseArguments, USAGE, UsageError } from './arguments.js'
import { runCheck } from './check.js'
import { runHashSecret } from './hash-secret.js'
import { ConfigError, loadConfigFile } from '../config/load.js'
import { createLogger } from '../logger.js'
import { asyncStdout, written } from '../log-destination.js'
import { ReloadRefused, StartError, startGateway, type RunningGateway } from '../server.js'
import type { Level, Logger } from 'pino'
import { formatIssue } from '../schemas/validation-issue.js'
import { CoalescedRun } from '../state/coalesced-run.js'

/** main.ts's SIGHUP listener: it counts signals until a handler is set, then calls the handler. */
export interface SighupRelay {
  /** SIGHUPs that came before a handler was set. */
  readonly early: () => number
  readonly handle: (handler: () => void) => void
}

const DEFAULT_CONFIG = 'config/gateway.yaml'
/** Longest the exit waits for the log lines still being written (a stuck reader of stdout must not hold it). */
const EXIT_LOG_WAIT_MS = 2000

async function main(sighup: SighupRelay): Promise<number> {
  const args = parseArguments(process.argv.slice(2), process.env)
  if (args.command === 'help') {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  if (args.command === 'hash-password' || args.command === 'hash-token') return runHashSecret(args.command, process.stdin)
  const configFile = args.configFile ?? DEFAULT_CONFIG
  if (args.command === 'check') return runCheck(configFile, process.env)

  const config = await loadConfigFile(configFile, process.env)
  const destination = asyncStdout()
  const logger = createLogger(config.log.level, destination)
  const exit = (code: number) => void written(destination, EXIT_LOG_WAIT_MS).then(() => process.exit(code))
  logNodeWarnings(logger)
  // Reloads are ignored until the gateway is up (main.ts has listened since the process started).
  let gateway: RunningGateway | null = null
  let draining = false
  if (sighup.early() > 0) logger.warn({ signals: sighup.early() }, 'SIGHUP before the gateway was ready: ignored')
  // One reload at a time, and one more for any SIGHUP during it, reading the file then: two that
  // overlapped (one waiting for its Redis link) once finished out of order, and the older file
  // served, a key it had revoked included.
  const reloading = new CoalescedRun(async () => {
    if (gateway !== null && !draining) await reloadFrom(configFile, gateway, logger)
  })
  sighup.handle(() => {
    if (gateway === null) logger.warn('SIGHUP before the gateway was ready: ignored')
    // Not a failed reload: there is nothing left to reload into.
    else if (draining) logger.info('SIGHUP while draining: ignored')
    else reloading.request()
  })
  gateway = await startGateway(config, logger)
  const running = gateway

  const stop = (signal: string) => {
    // A second signal while draining: whoever sent it does not want to wait.
    if (draining) {
      logger.warn({ signal }, 'second signal while draining: exiting without waiting for requests in flight')
      process.exit(1)
    }
    draining = true
    lifecycleLine(logger)({ signal, grace_ms: running.context.config.server.shutdown_grace_ms }, 'draining')
    running.shutdown().then(
      () => {
        lifecycleLine(logger)({}, 'stopped')
        exit(0)
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed')
        exit(1)
      },
    )
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // The scrape URL itself: the metrics port answers /metrics alone.
  const metricsUrl = running.metricsUrl === null ? null : `${running.metricsUrl}/metrics`
  lifecycleLine(logger)({ url: running.url, metrics_url: metricsUrl, config: configFile, models: config.models.map((m) => m.name) }, 'sluice listening')
  if (logger.level === 'silent' && (config.server.port === 0 || config.server.metrics_port === 0)) printChosenPorts(running.url, metricsUrl)
  return -1
}

/**
 * DESIGN.md: `port: 0` is "any free port, printed at start". With `log.level: silent` no log line says
 * which (an ops review): one plain line on stderr does, and nothing else is written.
 */
function printChosenPorts(url: string, metricsUrl: string | null): void {
  process.stderr.write(`sluice listening on ${url}${metricsUrl === null ? '' : `, metrics on ${metricsUrl}`}\n`)
}

/**
 * How the start, drain and stop lines are written: at info, or at the
 * configured level when that is above info. `port: 0` is printed at start
 * (DESIGN.md) whatever `log.level` says, and at warn the chosen port and a
 * drain's start and end went unlogged; `silent` stays silent.
 */
function lifecycleLine(logger: Logger): (fields: Record<string, unknown>, message: string) => void {
  if (logger.isLevelEnabled('info')) return (fields, message) => logger.info(fields, message)
  const level = logger.level as Level | 'silent'
  if (level === 'silent') return () => undefined
  return (fields, message) => logger[level](fields, message)
}

/**
 * Node's own warnings (a deprecation, an insecure TLS setting) as log lines
 * rather than plain text on stderr, where a log pipeline reading JSON loses
 * them. Only in place of Node's printer: `--no-warnings` still silences them.
 */
function logNodeWarnings(logger: Logger): void {
  if (process.listenerCount('warning') === 0) return
  process.removeAllListeners('warning')
  process.on('warning', (warning: Error & { code?: string }) => {
    logger.warn({ warning: { name: warning.name, code: warning.code ?? null, message: warning.message } }, 'Node.js warning')
  })
}

/** SIGHUP: a valid new config serves new requests; an invalid one is logged and the old one keeps serving. */
async function reloadFrom(configFile: string, gateway: RunningGateway, logger: Logger): Promise<void> {
  const reloads = gateway.context.metrics.configReloads
  let config
  try {
    config = await loadConfigFile(configFile, process.env)
  } catch (error) {
    reloads.inc({ result: 'invalid' })
    const problems = error instanceof ConfigError ? error.issues.map(formatIssue) : [String(error)]
    logger.error({ config: configFile, problems }, 'config reload refused: the current config keeps serving')
    return
  }
  try {
    await gateway.reload(config)
    reloads.inc({ result: 'ok' })
    // A lifecycle line: a reload into log.level warn said nothing of itself (a reload review).
    lifecycleLine(logger)({ config: configFile, models: config.models.map((m) => m.name) }, 'config reloaded')
  } catch (error) {
    if (error instanceof ReloadRefused) {
      reloads.inc({ result: 'invalid' })
      logger.error({ config: configFile, problems: [error.message] }, 'config reload refused: the current config keeps serving')
      return
    }
    reloads.inc({ result: 'failed' })
    logger.error({ err: error }, 'config reload failed: the current config keeps serving')
  }
}

/** Runs the command line given; the process's exit code says how it went. */
export function serve(sighup: SighupRelay): void {
  main(sighup).then(
    (code) => {
      if (code >= 0) process.exitCode = code
    },
    (error: unknown) => {
      // What the operator must fix is said in one line; a stack only for what is a bug.
      const known = error instanceof ConfigError || error instanceof UsageError || error instanceof StartError
      console.error(known ? `sluice: ${error.message}` : error)
      process.exitCode = error instanceof UsageError ? 2 : 1
    },
  )
}
