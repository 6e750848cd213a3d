/**
 * What a schema cannot say: uniqueness and cross references (`crossCheck`,
 * which tolerates a document that failed the schema, so one run reports
 * every problem), and the defaults that depend on other keys
 * (`served_name`, backend `name`, `default_model`).
 */
import type { RawBackendConfig, RawGatewayConfig, RawModelConfig } from './schema.js'
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_PORT, DEFAULT_QUEUED_BODY_LIMIT_BYTES } from './schema.js'
import type { ValidationIssue } from '../schemas/validation-issue.js'
import { listenHostProblem } from './listen-host.js'
import { parseScryptHash } from '../auth/scrypt-hash.js'
import { basicCredentialProblem, headerSecretProblem, baseUrlProblem, redisUrlProblem, v1BaseProblem } from './credential-rules.js'

export type BackendSettings = RawBackendConfig & { readonly name: string }
export type ModelSettings = Omit<RawModelConfig, 'backends' | 'served_name'> & {
  readonly served_name: string
  readonly backends: readonly BackendSettings[]
}
export type GatewayConfig = Omit<RawGatewayConfig, 'models' | 'default_model'> & {
  readonly models: readonly ModelSettings[]
  readonly default_model: string
}

type Loose = Record<string, unknown>

function records(value: unknown): Loose[] {
  return Array.isArray(value) ? value.filter((v): v is Loose => v !== null && typeof v === 'object') : []
}

function member(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' ? (value as Loose)[key] : undefined
}

export function crossCheck(data: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = []
  const models = records(member(data, 'models'))
  const auth = member(data, 'auth')
  const keys = records(member(auth, 'keys'))
  const users = records(member(auth, 'users'))

  reportDuplicates(models.map((m) => m.name), 'models', 'name', issues)
  models.forEach((model, i) => {
    const backends = records(model.backends)
    // Not named: a backend's name defaults to its URL, which may carry user:password@ (refused, but not printed).
    reportDuplicates(backends.map((b) => b.name ?? b.url), `models.${i}.backends`, 'name', issues, '', true)
    // Listed twice, one server would be sent twice max_concurrency_per_backend.
    reportDuplicates(backends.map((b) => serverOf(b.url)), `models.${i}.backends`, 'url', issues, ': the same server listed twice gets twice max_concurrency_per_backend (use weight to favour it)', true)
  })
  reportDuplicates(keys.map((k) => k.id), 'auth.keys', 'id', issues)
  reportDuplicates(keys.map((k) => (typeof k.token_sha256 === 'string' ? k.token_sha256.toLowerCase() : undefined)), 'auth.keys', 'token_sha256', issues, '', true)
  // Compared as clients' user-ids are (NFC, RFC 7617 §2.1): two spellings of one name would shadow each other.
  reportDuplicates(users.map((u) => (typeof u.username === 'string' ? u.username.normalize('NFC') : undefined)), 'auth.users', 'username', issues)
  users.forEach((user, i) => {
    if (typeof user.password_scrypt !== 'string') return
    const parsed = parseScryptHash(user.password_scrypt)
    if (typeof parsed === 'string') issues.push({ path: `auth.users.${i}.password_scrypt`, message: parsed })
  })

  issues.push(...credentialIssues(models, member(data, 'upstreams')))

  const names = models.map((m) => m.name).filter((n): n is string => typeof n === 'string')
  const defaultModel = member(data, 'default_model')
  if (typeof defaultModel === 'string' && !names.includes(defaultModel)) {
    issues.push({ path: 'default_model', message: `names no configured model (have: ${[...new Set(names)].join(', ')})` })
  }
  const state = member(data, 'state')
  const redisUrl = member(state, 'redis_url')
  if (member(state, 'kind') === 'redis' && redisUrl === undefined) {
    issues.push({ path: 'state.redis_url', message: 'is required when state.kind is redis' })
  }
  // Not quoted back: the URL may hold a password. An unparsable one (a port past 65535) once crashed the start and printed it.
  if (typeof redisUrl === 'string' && !URL.canParse(redisUrl)) {
    issues.push({ path: 'state.redis_url', message: 'is not a valid URL: redis://[[user]:password@]host[:port][/db] (or rediss://)' })
  }
  const redisProblem = typeof redisUrl === 'string' ? redisUrlProblem(redisUrl) : null
  if (redisProblem !== null) issues.push({ path: 'state.redis_url', message: redisProblem })
  const server = member(data, 'server')
  const host = member(server, 'host')
  const hostProblem = typeof host === 'string' ? listenHostProblem(host) : null
  if (hostProblem !== null) issues.push({ path: 'server.host', message: hostProblem })
  // The gateway would listen twice on one port and fail to start with EADDRINUSE.
  const port = member(server, 'port') ?? DEFAULT_PORT
  if (typeof port === 'number' && port !== 0 && member(server, 'metrics_port') === port) {
    issues.push({ path: 'server.metrics_port', message: `must differ from server.port (${port}): /metrics gets a listener of its own` })
  }
  // A body the gateway accepts must fit in its waiting room, or it could never wait.
  const bodyLimit = member(server, 'body_limit_bytes') ?? DEFAULT_BODY_LIMIT_BYTES
  const queuedLimit = member(server, 'queued_body_limit_bytes') ?? DEFAULT_QUEUED_BODY_LIMIT_BYTES
  if (typeof bodyLimit === 'number' && typeof queuedLimit === 'number' && queuedLimit < bodyLimit) {
    issues.push({ path: 'server.queued_body_limit_bytes', message: `must be at least server.body_limit_bytes (${bodyLimit}): a request with a body that large could never wait for a slot` })
  }
  return issues
}

/** Fills the derived defaults of a document that passed the schema and `crossCheck`. */
export function resolveConfig(raw: RawGatewayConfig): { ok: true; config: GatewayConfig } {
  const models = raw.models.map((model) => ({
    ...model,
    served_name: model.served_name ?? model.name,
    backends: model.backends.map((backend) => ({ ...backend, name: backend.name ?? backend.url })),
  }))
  return { ok: true, config: { ...raw, models, default_model: raw.default_model ?? models[0]!.name } }
}

const EMPTY_CREDENTIAL = 'is empty: set it (a variable that is set but empty gives this)'

/** Each place a config holds a credential the gateway sends, with what the value must be. */
interface CredentialField {
  readonly path: string
  readonly value: unknown
  readonly problem: (value: string) => string | null
}

function credentialFields(models: readonly Loose[], upstreams: unknown): CredentialField[] {
  const fields: CredentialField[] = []
  models.forEach((model, i) =>
    records(model.backends).forEach((backend, j) => fields.push({ path: `models.${i}.backends.${j}.api_key`, value: backend.api_key, problem: headerSecretProblem })),
  )
  for (const name of ['training', 'checkpoints', 'objects']) {
    const auth = member(member(upstreams, name), 'auth')
    const basic = member(auth, 'basic')
    // Empty, the union of auth forms fails as a whole; this says which member to fix (a variable set but empty?).
    fields.push(
      { path: `upstreams.${name}.auth.bearer`, value: member(auth, 'bearer'), problem: (v) => (v === '' ? EMPTY_CREDENTIAL : headerSecretProblem(v)) },
      { path: `upstreams.${name}.auth.basic.username`, value: member(basic, 'username'), problem: (v) => (v === '' ? EMPTY_CREDENTIAL : basicCredentialProblem(v, 'username')) },
      { path: `upstreams.${name}.auth.basic.password`, value: member(basic, 'password'), problem: (v) => basicCredentialProblem(v, 'password') },
    )
  }
  return fields
}

/** The credentials rules of credential-rules.ts, for every backend and upstream URL and credential. */
function credentialIssues(models: readonly Loose[], upstreams: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = []
  const report = (path: string, value: unknown, problem: (value: string) => string | null) => {
    const message = typeof value === 'string' ? problem(value) : null
    if (message !== null) issues.push({ path, message })
  }
  models.forEach((model, i) => {
    records(model.backends).forEach((backend, j) => report(`models.${i}.backends.${j}.url`, backend.url, (v) => baseUrlProblem(v) ?? v1BaseProblem(v)))
  })
  for (const name of ['training', 'checkpoints', 'objects']) {
    // The objects upstream's path (/obj/read) has no /v1 of the gateway's in front.
    report(`upstreams.${name}.url`, member(member(upstreams, name), 'url'), (v) => baseUrlProblem(v) ?? (name === 'objects' ? null : v1BaseProblem(v)))
  }
  for (const field of credentialFields(models, upstreams)) report(field.path, field.value, field.problem)
  return issues
}

/**
 * Credentials written in the file as `$NAME` (an environment variable's
 * name in capitals, without `${…}`): not expanded, they went upstream as
 * that text (an operator audit). Judged on the file as written, before
 * interpolation, so a value that came from the environment, or from the
 * `$${` escape, never is; the value is not repeated in the message.
 */
export function unexpandedVariableIssues(raw: unknown): ValidationIssue[] {
  return credentialFields(records(member(raw, 'models')), member(raw, 'upstreams'))
    .filter((field) => typeof field.value === 'string' && /^\$[A-Z_][A-Z0-9_]*$/.test(field.value))
    .map((field) => ({ path: field.path, message: UNEXPANDED }))
}

const UNEXPANDED = 'looks like an environment variable written as $NAME, which is not expanded: write ${NAME}'

/** A backend URL as the server it names: `http://H:1/` and `http://h:1` are one. */
function serverOf(url: unknown): string | undefined {
  if (typeof url !== 'string' || !URL.canParse(url)) return undefined
  const parsed = new URL(url)
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`
}

/** Entries of a list whose `member` repeats an earlier one's; the value is named unless `secret` (a token hash, a URL). */
function reportDuplicates(values: readonly unknown[], listPath: string, member: string, issues: ValidationIssue[], why = '', secret = false): void {
  const firstIndex = new Map<unknown, number>()
  values.forEach((value, i) => {
    if (value === undefined) return
    const first = firstIndex.get(value)
    const shown = secret || typeof value !== 'string' ? '' : ` (${JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value)})`
    if (first === undefined) firstIndex.set(value, i)
    else issues.push({ path: `${listPath}.${i}.${member}`, message: `duplicates ${listPath}.${first}.${member}${shown}${why}` })
  })
}
