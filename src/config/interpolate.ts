/**
 * `${VAR}` and `${VAR:-default}` substitution over a parsed YAML tree.
 * Runs on values after parsing (not on the raw text), so every problem can be
 * reported with the path of the key it sits under, and a value can never
 * inject YAML structure.
 */
import { parse as parseYamlScalar } from 'yaml'
import type { ValidationIssue } from '../schemas/validation-issue.js'

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g
const WHOLE_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/

export type Environment = Readonly<Record<string, string | undefined>>

export function interpolate(
  value: unknown,
  env: Environment,
  issues: ValidationIssue[],
  path = '',
): unknown {
  if (typeof value === 'string') return interpolateString(value, env, issues, path)
  if (Array.isArray(value)) return value.map((item, i) => interpolate(item, env, issues, join(path, String(i))))
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [key, member] of Object.entries(value)) out[key] = interpolate(member, env, issues, join(path, key))
    return out
  }
  return value
}

function interpolateString(text: string, env: Environment, issues: ValidationIssue[], path: string): unknown {
  if (!text.includes('${')) return text
  const substituted = text.replace(REFERENCE, (_match, name: string, fallback: string | undefined) => {
    const found = env[name]
    if (found !== undefined && (found !== '' || fallback === undefined)) return found
    if (fallback !== undefined) return fallback
    issues.push({ path, message: `environment variable ${name} is not set` })
    return ''
  })
  // A value that is exactly one reference takes the type its text has in
  // YAML, so `port: ${PORT:-8080}` is the number 8080, as an operator means.
  if (WHOLE_REFERENCE.test(text) && substituted !== '') {
    try {
      const typed: unknown = parseYamlScalar(substituted)
      if (typeof typed === 'number' || typeof typed === 'boolean') return typed
    } catch {
      // Not a plain scalar: keep the string.
    }
  }
  return substituted
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}
