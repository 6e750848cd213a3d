/**
 * Starts a real gateway on port 0 from a config written as a plain object
 * (run through the same parser and defaults as a YAML file), capturing its
 * log lines so tests can assert on them.
 */
import { createHash, randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/load.js'
import type { GatewayConfig } from '../../src/config/resolve.js'
import { createLogger } from '../../src/logger.js'
import { startGateway, type RunningGateway } from '../../src/server.js'

export interface TestKey {
  readonly id: string
  readonly token: string
  readonly entry: Record<string, unknown>
}

export function makeKey(id: string, scopes: readonly string[], extra: Record<string, unknown> = {}): TestKey {
  const token = `sk-${id}-${randomBytes(12).toString('hex')}`
  const token_sha256 = createHash('sha256').update(token).digest('hex')
  return { id, token, entry: { id, token_sha256, scopes, ...extra } }
}

export interface TestGateway extends RunningGateway {
  /** Every log line written so far, raw. */
  readonly logText: () => string
  readonly logLines: () => Record<string, unknown>[]
}

export function configFrom(object: Record<string, unknown>, env: Record<string, string> = {}): GatewayConfig {
  const result = parseConfig(stringify(object), env)
  if (!result.ok) throw new Error(`test config invalid: ${JSON.stringify(result.issues)}`)
  return result.config
}

export async function startTestGateway(object: Record<string, unknown>): Promise<TestGateway> {
  const withServer = { ...object, server: { port: 0, ...(object.server as object | undefined) } }
  const config = configFrom(withServer)
  const chunks: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString('utf8'))
      done()
    },
  })
  const gateway = await startGateway(config, createLogger(config.log.level, sink))
  // Object.assign keeps the gateway's getters (its context follows reloads).
  return Object.assign(gateway, {
    logText: () => chunks.join(''),
    logLines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  })
}
