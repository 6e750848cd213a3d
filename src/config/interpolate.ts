/**
 * `${VAR}` and `${VAR:-default}` substitution over the parsed YAML document
 * (not the raw text), so every problem is reported with the path of the key
 * it sits under and a value can never inject YAML structure.
 *
 * Typing follows YAML's own rule: a plain (unquoted) scalar that is exactly
 * one reference takes the type its value has in YAML (`port: ${PORT}` is a
 * number), a quoted one stays a string (`bearer: "${TOKEN}"`). Where the
 * key takes a string, the value's own text is used instead (load.ts,
 * `asTextWhereStringsGo`): `api_key: ${KEY}` with KEY=0123 is "0123", not 123.
 *
 * A `${` that starts no reference (`${vllm-key}`, `${TOKEN` unclosed) is a
 * problem too: a typo would otherwise go upstream as a literal credential.
 * `$${` writes a literal `${`.
 */
import { isMap, isScalar, isSeq, parse as parseYamlScalar, Scalar, type Document, type Node } from 'yaml'
import type { ValidationIssue } from '../schemas/validation-issue.js'

/** An escaped `$${`, a reference, or a `${` that starts neither. */
const REFERENCE = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{/g
const WHOLE_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/

export type Environment = Readonly<Record<string, string | undefined>>

export interface Interpolation {
  /** Unset variables and malformed references, with their paths. */
  readonly issues: ValidationIssue[]
  /** Scalars a reference gave a number or boolean, by path, with the text it had. */
  readonly typed: Map<string, { readonly node: Scalar; readonly text: string }>
}

/** Substitutes in place. */
export function interpolateDocument(document: Document, env: Environment): Interpolation {
  const found: Interpolation = { issues: [], typed: new Map() }
  if (document.contents !== null) visit(document.contents as Node, '', env, found)
  return found
}

function visit(node: Node, path: string, env: Environment, found: Interpolation): void {
  if (isScalar(node)) {
    if (typeof node.value === 'string') substitute(node, path, env, found)
  } else if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key)
      if (pair.value !== null && typeof pair.value === 'object') visit(pair.value as Node, join(path, key), env, found)
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, i) => {
      if (item !== null && typeof item === 'object') visit(item as Node, join(path, String(i)), env, found)
    })
  }
}

function substitute(node: Scalar, path: string, env: Environment, { issues, typed }: Interpolation): void {
  const text = node.value as string
  if (!text.includes('${')) return
  const substituted = text.replace(REFERENCE, (match: string, name: string | undefined, fallback: string | undefined) => {
    if (match === '$${') return '${'
    if (name === undefined) {
      issues.push({ path, message: 'has a "${" that starts no variable reference: write ${NAME} or ${NAME:-default} (NAME of letters, digits and _), or $${ for a literal "${"' })
      return match
    }
    if (fallback?.includes('${') === true) {
      issues.push({ path, message: `nests a reference in the fallback of \${${name}:-…}, which is not supported: the inner one would stay literal text` })
      return match
    }
    const found = env[name]
    if (found !== undefined && (found !== '' || fallback === undefined)) return found
    if (fallback !== undefined) return fallback
    issues.push({ path, message: `environment variable ${name} is not set` })
    return ''
  })
  node.value = isPlain(node) && WHOLE_REFERENCE.test(text) ? typedScalar(substituted) : substituted
  if (typeof node.value !== 'string') typed.set(path, { node, text: substituted })
}

function isPlain(node: Scalar): boolean {
  return node.type === undefined || node.type === Scalar.PLAIN
}

function typedScalar(text: string): unknown {
  if (text === '') return text
  try {
    const typed: unknown = parseYamlScalar(text)
    return typeof typed === 'number' || typeof typed === 'boolean' ? typed : text
  } catch {
    return text
  }
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}
