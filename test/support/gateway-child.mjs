// A gateway in its own process, started from dist/ (run `npm run build`
// first): argv[2] is the config as JSON, argv[3] Redis timings as JSON.
// Prints {"url": ...} on its first line, then logs (warn and up) to stderr.
import { stringify } from 'yaml'
import { parseConfig } from '../../dist/config/load.js'
import { createLogger } from '../../dist/logger.js'
import { startGateway } from '../../dist/server.js'

const [configJson, timingsJson = '{}'] = process.argv.slice(2)
const parsed = parseConfig(stringify(JSON.parse(configJson)), process.env)
if (!parsed.ok) {
  process.stderr.write(`invalid test config: ${JSON.stringify(parsed.issues)}\n`)
  process.exit(2)
}
const gateway = await startGateway(parsed.config, createLogger('warn', process.stderr), { redisTimings: JSON.parse(timingsJson) })
process.stdout.write(`${JSON.stringify({ url: gateway.url })}\n`)
process.once('SIGTERM', () => gateway.shutdown().then(() => process.exit(0)))
