/**
 * Reads, interpolates, validates and resolves the YAML configuration.
 * The only place that reads the environment for configuration; the caller
 * passes it in so tests can use their own.
 */
import { Ajv } from 'ajv'
import { LineCounter, parseDocument, visit, type Document } from 'yaml'
import { GatewayConfigSchema, type RawGatewayConfig } from './schema.js'
import { interpolateDocument, type Environment, type Interpolation } from './interpolate.js'
import { crossCheck, resolveConfig, unexpandedVariableIssues, type GatewayConfig } from './resolve.js'
import { toIssues, formatIssue, pointerToPath, UNKNOWN_KEY, type ValidationIssue } from '../schemas/validation-issue.js'
import { yamlProblem, yamlThrownProblem } from './yaml-problems.js'
import { readConfigText } from './config-text.js'

export type ConfigResult = { ok: true; config: GatewayConfig } | { ok: false; issues: ValidationIssue[] }

const validate = new Ajv({ useDefaults: true, allErrors: true, strict: false, strictNumbers: true, verbose: true }).compile<RawGatewayConfig>(
  GatewayConfigSchema,
)

export class ConfigError extends Error {
  readonly issues: readonly ValidationIssue[]
  constructor(source: string, issues: ValidationIssue[]) {
    super(`invalid configuration ${source}:\n${issues.map((i) => `  ${formatIssue(i)}`).join('\n')}`)
    this.name = 'ConfigError'
    this.issues = issues
  }
}

/** Parses and checks YAML text; returns every problem found, not just the first. */
export function parseConfig(text: string, env: Environment): ConfigResult {
  // Not yaml's messages: they quote the offending line or token, which may be
  // a secret, and it reached the reload's error log and `check` (yaml-problems.ts).
  // Its warnings are refusals too: an unknown tag (`!abc rest`) silently
  // dropped the first word of an unquoted secret.
  const lines = new LineCounter()
  const document = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines })
  const problems = [...document.errors, ...document.warnings]
  const where = (offset: number) => {
    const { line, col } = lines.linePos(offset)
    return `line ${line}, column ${col}`
  }
  if (problems.length > 0) {
    // yaml may report one problem twice (an unclosed flow map: BAD_INDENT twice at one place).
    return { ok: false, issues: distinct(problems.map((e) => ({ path: '', message: `${yamlProblem(e.code)} at ${where(e.pos[0])}` }))) }
  }
  // Judged on the file as written: interpolation would put the environment's values in their place.
  const unexpanded = unexpandedVariableIssues(rawData(document))
  const { issues: unset, typed } = interpolateDocument(document, env)
  const issues = [...unset, ...unexpanded]
  let data: unknown
  try {
    data = document.toJS() ?? {}
    if (!validate(data) && asTextWhereStringsGo(validate.errors, typed)) data = document.toJS() ?? {}
  } catch (error) {
    // yaml refuses aliases that expand without bound (a "billion laughs" file), and unresolved ones, by throwing.
    const alias = unresolvedAliasAt(document)
    const at = alias === null ? '' : ` at ${where(alias)}`
    return { ok: false, issues: [...issues, { path: '', message: `${yamlThrownProblem(error)}${at}` }] }
  }
  const schemaIssues = validate(data) ? [] : issuesBesides(unset, toIssues(validate.errors))
  // Cross-key checks run on whatever parsed, so one run reports everything.
  const crossIssues = issuesBesides(unset, crossCheck(data))
  // Where both speak of one key, the cross-key rule says more ("is empty: set it" over "must not be empty").
  const crossPaths = new Set(crossIssues.map((issue) => issue.path))
  issues.push(...schemaIssues.filter((issue) => !crossPaths.has(issue.path)), ...crossIssues)
  // A value the schema refuses may fail a cross-key rule the same way (password_scrypt's form): say it once.
  if (issues.length > 0) return { ok: false, issues: distinct(issues) }
  return resolveConfig(data as RawGatewayConfig)
}

/**
 * A reference typed as a number or boolean (interpolate.ts) under a key that
 * takes a string gets its text back: `api_key: ${KEY}`, unquoted as in
 * DESIGN.md, with a numeric key was refused as "must be a string" (and 0123
 * would have read as 123). True when one was given back.
 */
function asTextWhereStringsGo(errors: typeof validate.errors, typed: Interpolation['typed']): boolean {
  let changed = false
  for (const error of errors ?? []) {
    const wanted = error.keyword === 'type' ? String((error.params as { type?: unknown }).type) : ''
    const reference = typed.get(pointerToPath(error.instancePath))
    if (reference === undefined || !wanted.split(',').includes('string')) continue
    reference.node.value = reference.text
    changed = true
  }
  return changed
}

function distinct(issues: readonly ValidationIssue[]): ValidationIssue[] {
  const seen = new Set<string>()
  return issues.filter((issue) => {
    const key = `${issue.path}\n${issue.message}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

/**
 * Issues that are not just echoes of an unset variable: the empty value
 * then fails the key's type, the enclosing form or a cross-key rule (a URL
 * with an empty host), which would only repeat the first message. Unknown
 * keys are always reported.
 */
function issuesBesides(unset: readonly ValidationIssue[], schema: readonly ValidationIssue[]): ValidationIssue[] {
  const unsetPaths = unset.map((i) => i.path)
  const echoes = (issue: ValidationIssue) =>
    !issue.message.startsWith(UNKNOWN_KEY) && unsetPaths.some((p) => p === issue.path || p.startsWith(`${issue.path}.`))
  return schema.filter((issue) => !echoes(issue))
}

export async function loadConfigFile(file: string, env: Environment): Promise<GatewayConfig> {
  const read = await readConfigText(file)
  if ('problem' in read) throw new ConfigError(file, [{ path: '', message: read.problem }])
  const result = parseConfig(read.text, env)
  if (!result.ok) throw new ConfigError(file, result.issues)
  return result.config
}

/** Where the first alias naming no anchor is (yaml throws for it without a position: an operator audit), or null. */
function unresolvedAliasAt(document: Document): number | null {
  let at: number | null = null
  visit(document, {
    Alias(_key, node) {
      if (node.resolve(document) !== undefined || node.range === undefined || node.range === null) return undefined
      at = node.range[0]
      return visit.BREAK
    },
  })
  return at
}

/** The document's data before interpolation, or undefined when it cannot be read as data (reported later). */
function rawData(document: Document): unknown {
  try {
    return document.toJS()
  } catch {
    return undefined
  }
}
