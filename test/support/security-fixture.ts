/**
 * One gateway in front of all four stand-ins (vLLM, training, checkpoints,
 * object store), with a key per scope, Basic users and a random secret in
 * every credential slot, for the security suites in test/security/. The
 * gateway runs in this process (its log is captured) or as a child process
 * (`node dist/main.js --config FILE`, so its memory can be read from /proc).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { afterAll, beforeAll } from 'vitest'
import { deriveScrypt, formatScryptHash } from '../../src/auth/scrypt-hash.js'
import { startObjectStoreStandIn, type ObjectStoreStandIn } from '../../src/dev/object-store-stand-in.js'
import { startTrainingStandIn, type TrainingStandIn } from '../../src/dev/training-stand-in.js'
import { startVllmStandIn, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { makeKey, startTestGateway, type TestKey } from './gateway.js'
import { startGatewayProcess, type GatewayProcess } from './gateway-process.js'

/** Small enough that bodies at the limit are cheap to send many times. */
export const BODY_LIMIT = 256 * 1024
export const SERVED_M = 'org/served-m'
/** A training model the training stand-in knows (jobs for it are created: 200). */
export const TRAINING_MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
/** A model the checkpoints stand-in knows, with a few checkpoints. */
export const CHECKPOINT_MODEL = 'ckpt-model'

const secret = (label: string) => `${label}-${randomBytes(12).toString('hex')}`

export interface Credentials {
  readonly username: string
  readonly password: string
}

export function basicHeader(user: Credentials | string): string {
  const text = typeof user === 'string' ? user : `${user.username}:${user.password}`
  return `Basic ${Buffer.from(text, 'utf8').toString('base64')}`
}

export interface StandInCounts {
  readonly chat: number
  readonly training: number
  readonly checkpoints: number
  readonly objects: number
}

export interface SecurityFixture {
  readonly url: string
  readonly vllm: VllmStandIn
  readonly training: TrainingStandIn
  readonly checkpoints: TrainingStandIn
  readonly store: ObjectStoreStandIn
  readonly keys: { readonly chat: TestKey; readonly training: TestKey; readonly checkpoints: TestKey; readonly all: TestKey }
  readonly users: { readonly alice: Credentials; readonly scopeless: Credentials }
  /** What each upstream must receive as Authorization (the gateway's own credentials). */
  readonly upstreamAuthorization: { readonly chat: string; readonly training: string; readonly checkpoints: string; readonly objects: string }
  /** Client credentials: never upstream, never in a log, metric or answer. */
  readonly clientSecrets: readonly string[]
  /** Every secret of the setup (client and upstream): never in a log, metric or answer. */
  readonly secrets: readonly string[]
  counts(): StandInCounts
  /** The gateway's log so far (JSON lines). */
  logText(): string
  /** The child's pid in process mode, else null. */
  readonly pid: number | null
  /** False once the gateway process has exited (process mode). */
  alive(): boolean
  /** Process mode: asks the child for a full garbage collection (test/support/gc-on-signal.mjs). */
  collectGarbage(): void
  close(): Promise<void>
}

export interface FixtureOptions {
  /** Run the gateway as `node dist/main.js --config FILE` (default: in this process). */
  readonly asProcess?: boolean
  /** scrypt cost of the Basic users' hashes (default 16384, as `hash-password` writes them). */
  readonly scryptN?: number
}

async function scryptHash(password: string, N: number): Promise<string> {
  const salt = randomBytes(16)
  const hash = await deriveScrypt(password, salt, { N, r: 8, p: 1 }, 64)
  return formatScryptHash({ N, r: 8, p: 1, salt, hash })
}

export async function startSecurityFixture(options: FixtureOptions = {}): Promise<SecurityFixture> {
  const scryptN = options.scryptN ?? 16384
  const backendKey = secret('backend-api-key')
  const trainingToken = secret('training-upstream')
  const checkpointsToken = secret('checkpoints-upstream')
  const storeUser = { username: 'gateway-svc', password: secret('store-pw') }
  const upstreamAuthorization = {
    chat: `Bearer ${backendKey}`,
    training: `Bearer ${trainingToken}`,
    checkpoints: `Bearer ${checkpointsToken}`,
    objects: basicHeader(storeUser),
  }
  const vllm = await startVllmStandIn({ apiKey: backendKey, tokens: 3 })
  const training = await startTrainingStandIn({ expectAuthorization: upstreamAuthorization.training, checkpoints: { [TRAINING_MODEL]: 2 } })
  const checkpoints = await startTrainingStandIn({ expectAuthorization: upstreamAuthorization.checkpoints, checkpoints: { [CHECKPOINT_MODEL]: 5 } })
  const store = await startObjectStoreStandIn({ expectAuthorization: upstreamAuthorization.objects })

  const keys = {
    chat: makeKey('chat-only', ['chat']),
    training: makeKey('training-only', ['training']),
    checkpoints: makeKey('checkpoints-only', ['checkpoints']),
    all: makeKey('all-bearer', ['chat', 'training', 'checkpoints']),
  }
  const users = { alice: { username: 'alice', password: secret('alice-pw') }, scopeless: { username: 'nobody', password: secret('nobody-pw') } }
  const config = {
    server: { port: 0, body_limit_bytes: BODY_LIMIT },
    auth: {
      keys: Object.values(keys).map((key) => key.entry),
      users: [
        { username: users.alice.username, password_scrypt: await scryptHash(users.alice.password, scryptN), scopes: ['objects'] },
        { username: users.scopeless.username, password_scrypt: await scryptHash(users.scopeless.password, scryptN), scopes: [] },
      ],
    },
    models: [
      { name: 'm', served_name: SERVED_M, backends: [{ url: vllm.url, name: 'b1', api_key: backendKey }] },
      { name: 'prio', priority_scheduling: true, backends: [{ url: vllm.url, name: 'b1', api_key: backendKey }] },
    ],
    upstreams: {
      training: { url: training.url, auth: { bearer: trainingToken } },
      checkpoints: { url: checkpoints.url, auth: { bearer: checkpointsToken } },
      objects: { url: store.url, auth: { basic: storeUser } },
    },
  }
  const clientSecrets = [
    ...Object.values(keys).flatMap((key) => [key.token, key.token.slice(0, -1)]),
    ...Object.values(users).flatMap((user) => [user.password, basicHeader(user).slice('Basic '.length)]),
  ]
  const secrets = [...clientSecrets, backendKey, trainingToken, checkpointsToken, storeUser.password, upstreamAuthorization.objects.slice('Basic '.length)]
  const counts = (): StandInCounts => ({
    chat: vllm.received.length,
    training: training.received.length,
    checkpoints: checkpoints.received.length,
    objects: store.received.length,
  })
  const closeStandIns = () => Promise.all([vllm.close(), training.close(), checkpoints.close(), store.close()])
  const common = { vllm, training, checkpoints, store, keys, users, upstreamAuthorization, clientSecrets, secrets, counts }

  if (options.asProcess !== true) {
    const gateway = await startTestGateway(config)
    return {
      ...common,
      url: gateway.url,
      logText: () => gateway.logText(),
      pid: null,
      alive: () => true,
      collectGarbage: () => undefined,
      async close() {
        await gateway.shutdown()
        await closeStandIns()
      },
    }
  }

  const dir = await mkdtemp(join(tmpdir(), 'sluice-security-'))
  const file = join(dir, 'gateway.yaml')
  await writeFile(file, stringify(config))
  let child: GatewayProcess
  try {
    const preload = fileURLToPath(new URL('./gc-on-signal.mjs', import.meta.url))
    child = await startGatewayProcess(file, { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${preload}`.trim() })
  } catch (error) {
    await rm(dir, { recursive: true, force: true })
    await closeStandIns()
    throw error
  }
  return {
    ...common,
    url: child.url,
    logText: () => child.lines.map((line) => JSON.stringify(line)).join('\n'),
    pid: child.child.pid ?? null,
    alive: () => child.child.exitCode === null && child.child.signalCode === null,
    collectGarbage: () => void child.child.kill('SIGUSR2'),
    async close() {
      if (child.child.exitCode === null) child.child.kill('SIGTERM')
      await child.exited()
      await rm(dir, { recursive: true, force: true })
      await closeStandIns()
    },
  }
}

/** Inside a test file: starts the fixture before its tests and closes it after them; `onStarted` receives it. */
export function useSecurityFixture(onStarted: (fixture: SecurityFixture) => void, options: FixtureOptions = {}): void {
  let started: SecurityFixture | undefined
  beforeAll(async () => {
    started = await startSecurityFixture(options)
    onStarted(started)
  }, 20_000)
  afterAll(async () => {
    await started?.close()
  })
}
