/**
 * Fills the defaults that depend on other keys (`served_name`, backend
 * `name`, `default_model`) and checks what a schema cannot: uniqueness and
 * cross references.
 */
import type { RawBackendConfig, RawGatewayConfig, RawModelConfig } from './schema.js'
import type { ValidationIssue } from '../schemas/validation-issue.js'
import { parseScryptHash } from '../auth/scrypt-hash.js'

export type BackendSettings = RawBackendConfig & { readonly name: string }
export type ModelSettings = Omit<RawModelConfig, 'backends' | 'served_name'> & {
  readonly served_name: string
  readonly backends: readonly BackendSettings[]
}
export type GatewayConfig = Omit<RawGatewayConfig, 'models' | 'default_model'> & {
  readonly models: readonly ModelSettings[]
  readonly default_model: string
}

export function resolveConfig(raw: RawGatewayConfig): { ok: true; config: GatewayConfig } | { ok: false; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = []
  const models = raw.models.map((model) => ({
    ...model,
    served_name: model.served_name ?? model.name,
    backends: model.backends.map((backend) => ({ ...backend, name: backend.name ?? backend.url })),
  }))

  reportDuplicates(models.map((m) => m.name), 'models', 'name', issues)
  models.forEach((model, i) => reportDuplicates(model.backends.map((b) => b.name), `models.${i}.backends`, 'name', issues))
  reportDuplicates(raw.auth.keys.map((k) => k.id), 'auth.keys', 'id', issues)
  reportDuplicates(raw.auth.keys.map((k) => k.token_sha256.toLowerCase()), 'auth.keys', 'token_sha256', issues)
  reportDuplicates(raw.auth.users.map((u) => u.username), 'auth.users', 'username', issues)
  raw.auth.users.forEach((user, i) => {
    const parsed = parseScryptHash(user.password_scrypt)
    if (typeof parsed === 'string') issues.push({ path: `auth.users.${i}.password_scrypt`, message: parsed })
  })

  const defaultModel = raw.default_model ?? models[0]?.name ?? ''
  if (!models.some((m) => m.name === defaultModel)) {
    issues.push({ path: 'default_model', message: `names no configured model (have: ${models.map((m) => m.name).join(', ')})` })
  }
  if (raw.state.kind === 'redis' && raw.state.redis_url === undefined) {
    issues.push({ path: 'state.redis_url', message: 'is required when state.kind is redis' })
  }
  if (issues.length > 0) return { ok: false, issues }
  return { ok: true, config: { ...raw, models, default_model: defaultModel } }
}

function reportDuplicates(values: readonly string[], listPath: string, member: string, issues: ValidationIssue[]): void {
  const firstIndex = new Map<string, number>()
  values.forEach((value, i) => {
    const first = firstIndex.get(value)
    if (first === undefined) firstIndex.set(value, i)
    else issues.push({ path: `${listPath}.${i}.${member}`, message: `duplicates ${listPath}.${first}.${member}` })
  })
}
