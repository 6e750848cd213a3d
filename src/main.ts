/**
 * The entry point: parses the command line, loads the configuration, starts
 * the gateway and wires the process signals. The only module that reads
 * `process` (environment, arguments, signals); log-destination.ts alone
 * also reports to its stderr and flushes on its exit.
 */
import { parseArguments, USAGE, UsageError } from './cli/arguments.js'
import { runCheck } from './cli/check.js'
import { runHashSecret } from './cli/hash-secret.js'
import { ConfigError, loadConfigFile } from './config/load.js'
import { createLogger } from './logger.js'
import { asyncStdout } from './log-destination.js'
import { StartError, startGateway, type RunningGateway } from './server.js'
import type { Logger } from 'pino'
import { formatIssue } from './schemas/validation-issue.js'

const DEFAULT_CONFIG = 'config/gateway.yaml'

async function main(): Promise<number> {
  const args = parseArguments(process.argv.slice(2), process.env)
  if (args.command === 'help') {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  if (args.command === 'hash-password' || args.command === 'hash-token') return runHashSecret(args.command, process.stdin)
  const configFile = args.configFile ?? DEFAULT_CONFIG
  if (args.command === 'check') return runCheck(configFile, process.env)

  const config = await loadConfigFile(configFile, process.env)
  const logger = createLogger(config.log.level, asyncStdout())
  logNodeWarnings(logger)
  // A SIGHUP with no listener would kill the process: listen before anything
  // is announced, and ignore reloads until the gateway is up.
  let gateway: RunningGateway | null = null
  let draining = false
  process.on('SIGHUP', () => {
    if (gateway === null) logger.warn('SIGHUP before the gateway was ready: ignored')
    // Not a failed reload: there is nothing left to reload into.
    else if (draining) logger.info('SIGHUP while draining: ignored')
    else void reloadFrom(configFile, gateway, logger)
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
    logger.info({ signal, grace_ms: running.context.config.server.shutdown_grace_ms }, 'draining')
    running.shutdown().then(
      () => {
        logger.info('stopped')
        process.exit(0)
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  logger.info({ url: running.url, metrics_url: running.metricsUrl, config: configFile, models: config.models.map((m) => m.name) }, 'sluice listening')
  return -1
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
    logger.info({ config: configFile, models: config.models.map((m) => m.name) }, 'config reloaded')
  } catch (error) {
    reloads.inc({ result: 'failed' })
    logger.error({ err: error }, 'config reload failed: the current config keeps serving')
  }
}

main().then(
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
