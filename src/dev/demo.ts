/**
 * `npm run demo`: the gateway with stand-in backends and upstreams on this
 * machine, no GPU and no Redis needed. Prints ready-to-paste curl commands.
 */
import pretty from 'pino-pretty'
import { loadConfigFile } from '../config/load.js'
import { createLogger } from '../logger.js'
import { startGateway } from '../server.js'
import { startObjectStoreStandIn } from './object-store-stand-in.js'
import { startTrainingStandIn } from './training-stand-in.js'
import { startVllmStandIn } from './vllm-stand-in.js'

const DEMO_TOKEN = 'sluice-demo-key'
const DEMO_USER = 'alice:alice-demo-password'
const DEMO_MODEL_ID = '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43'

async function startStandIns() {
  const vllm = await Promise.all([startVllmStandIn({ tokens: 12, interTokenDelayMs: 80 }), startVllmStandIn({ tokens: 12, interTokenDelayMs: 80 })])
  const training = await startTrainingStandIn({ expectAuthorization: 'Bearer demo-training-token', checkpoints: { [DEMO_MODEL_ID]: 45 } })
  const objects = await startObjectStoreStandIn({ expectAuthorization: `Basic ${Buffer.from('api:demo-objects-password').toString('base64')}` })
  return { vllm, training, objects, all: [...vllm, training, objects] }
}

function instructions(url: string): string {
  const bearer = `-H 'Authorization: Bearer ${DEMO_TOKEN}'`
  const json = `-H 'Content-Type: application/json'`
  const chat = (stream: boolean) => JSON.stringify({ model: 'demo-model', stream, messages: [{ role: 'user', content: 'Say hello' }] })
  const job = JSON.stringify({ model_id: DEMO_MODEL_ID, trajectory_groups: [{ trajectories: [{ reward: 1, messages_and_choices: [] }] }] })
  const read = JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest', include_tags_and_aliases: true })
  return `
Sluice demo running at ${url}

Chat, non-streaming:
  curl -s ${url}/v1/chat/completions ${bearer} ${json} -d '${chat(false)}'
Chat, streaming:
  curl -N ${url}/v1/chat/completions ${bearer} ${json} -d '${chat(true)}'
Training job:
  curl -s ${url}/v1/preview/training-jobs ${bearer} ${json} -d '${job}'
Checkpoints (cursor pagination: pass after=<last_id> while has_more):
  curl -s '${url}/v1/preview/models/${DEMO_MODEL_ID}/checkpoints?limit=5' ${bearer}
Object read (Basic credentials):
  curl -s ${url}/obj/read -u ${DEMO_USER} ${json} -d '${read}'
Models:   curl -s ${url}/v1/models ${bearer}
Metrics:  curl -s ${url}/metrics
Ctrl-C stops everything.
`
}

async function demo(): Promise<void> {
  const standIns = await startStandIns()
  const env = {
    ...process.env,
    DEMO_VLLM_A: standIns.vllm[0].url,
    DEMO_VLLM_B: standIns.vllm[1].url,
    DEMO_TRAINING: standIns.training.url,
    DEMO_OBJECTS: standIns.objects.url,
  }
  // Not SLUICE_CONFIG: the commands printed below are for this file (an exported SLUICE_CONFIG made them fail).
  const config = await loadConfigFile('config/demo.yaml', env)
  const logger = createLogger(config.log.level, pretty({ colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true }))
  const gateway = await startGateway(config, logger)
  process.stdout.write(`${instructions(gateway.url)}\n`)

  const stop = () => {
    void gateway
      .shutdown()
      .then(() => Promise.all(standIns.all.map((s) => s.close())))
      .then(() => process.exit(0))
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  stopWhenOrphaned(stop)
}

/**
 * `npm run demo` stopped by signalling npm alone (`kill` of its PID, a
 * process manager): npm goes without passing the signal through its shell,
 * and this process would serve on, orphaned, holding port 8080. It stops
 * once its parent has changed. (Ctrl-C signals the whole process group.)
 */
function stopWhenOrphaned(stop: () => void): void {
  const parent = process.ppid
  const check = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(check)
    stop()
  }, 500)
  check.unref()
}

demo().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
