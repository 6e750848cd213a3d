/**
 * `npm run demo`: the gateway with stand-in backends on this machine, no GPU
 * and no Redis needed. Prints ready-to-paste curl commands.
 */
import pretty from 'pino-pretty'
import { loadConfigFile } from '../config/load.js'
import { createLogger } from '../logger.js'
import { startGateway } from '../server.js'
import { startVllmStandIn } from './vllm-stand-in.js'

const DEMO_TOKEN = 'sluice-demo-key'

async function demo(): Promise<void> {
  const backends = await Promise.all([
    startVllmStandIn({ tokens: 12, interTokenDelayMs: 80 }),
    startVllmStandIn({ tokens: 12, interTokenDelayMs: 80 }),
  ])
  const env = { ...process.env, DEMO_VLLM_A: backends[0].url, DEMO_VLLM_B: backends[1].url }
  const config = await loadConfigFile(process.env.SLUICE_CONFIG ?? 'config/demo.yaml', env)
  const logger = createLogger(config.log.level, pretty({ colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true }))
  const gateway = await startGateway(config, logger)

  const body = (stream: boolean) =>
    JSON.stringify({ model: 'demo-model', stream, messages: [{ role: 'user', content: 'Say hello' }] })
  console.log(`
Sluice demo running at ${gateway.url} (stand-in backends: ${backends.map((b) => b.url).join(', ')})

Non-streaming:
  curl -s ${gateway.url}/v1/chat/completions -H 'Authorization: Bearer ${DEMO_TOKEN}' -H 'Content-Type: application/json' -d '${body(false)}'

Streaming:
  curl -N ${gateway.url}/v1/chat/completions -H 'Authorization: Bearer ${DEMO_TOKEN}' -H 'Content-Type: application/json' -d '${body(true)}'

Models:      curl -s ${gateway.url}/v1/models -H 'Authorization: Bearer ${DEMO_TOKEN}'
Metrics:     curl -s ${gateway.url}/metrics
Ctrl-C stops everything.
`)

  const stop = () => {
    void gateway
      .shutdown()
      .then(() => Promise.all(backends.map((b) => b.close())))
      .then(() => process.exit(0))
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

demo().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
