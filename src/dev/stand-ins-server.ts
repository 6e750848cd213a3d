/**
 * The stand-in backends on fixed ports, for docker-compose (and anyone who
 * wants them without the demo's gateway): vLLM stand-ins, the training
 * service and the object store, with the demo's upstream credentials.
 *
 *   STAND_INS_HOST   [0.0.0.0]   address to listen on
 *   VLLM_PORTS       [8000,8001] one vLLM stand-in per port
 *   TRAINING_PORT    [9001]      training jobs and checkpoints
 *   OBJECTS_PORT     [9002]      object store
 */
import { startObjectStoreStandIn } from './object-store-stand-in.js'
import { startTrainingStandIn } from './training-stand-in.js'
import { startVllmStandIn } from './vllm-stand-in.js'

/** The model id the demo's training stand-in has checkpoints for. */
const DEMO_MODEL_ID = '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43'

function port(value: string | undefined, fallback: number): number {
  const parsed = Number(value ?? fallback)
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 65535) throw new Error(`not a port: ${value}`)
  return parsed
}

async function main(): Promise<void> {
  const host = process.env.STAND_INS_HOST ?? '0.0.0.0'
  const vllmPorts = (process.env.VLLM_PORTS ?? '8000,8001').split(',').map((p) => port(p.trim(), 8000))
  const servers = [
    ...(await Promise.all(vllmPorts.map((p) => startVllmStandIn({ host, port: p, tokens: 12, interTokenDelayMs: 40 })))),
    await startTrainingStandIn({ host, port: port(process.env.TRAINING_PORT, 9001), expectAuthorization: 'Bearer demo-training-token', checkpoints: { [DEMO_MODEL_ID]: 45 } }),
    await startObjectStoreStandIn({
      host,
      port: port(process.env.OBJECTS_PORT, 9002),
      expectAuthorization: `Basic ${Buffer.from('api:demo-objects-password').toString('base64')}`,
    }),
  ]
  process.stdout.write(`${JSON.stringify({ stand_ins: servers.map((s) => s.url) })}\n`)
  const stop = () => void Promise.all(servers.map((s) => s.close())).then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
