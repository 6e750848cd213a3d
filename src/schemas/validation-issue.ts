/**
 * Turns Ajv's errors into `{ path, message }` issues with dotted paths
 * (`tools.0.type`), the form used by config errors and by the `param` member
 * of error bodies.
 */
import type { ErrorObject } from 'ajv'
import { closestName } from './closest-name.js'

export interface ValidationIssue {
  /** Dotted path of the offending member; '' for the document itself. */
  readonly path: string
  readonly message: string
}

export function pointerToPath(pointer: string): string {
  if (pointer === '') return ''
  return pointer
    .slice(1)
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.')
}

function join(path: string, member: string): string {
  return path === '' ? member : `${path}.${member}`
}

/** How every unknown-key issue starts, whatever hint follows. */
export const UNKNOWN_KEY = 'is not a known key'

/** Key names are the schema's, never secrets, so the hint may name one. */
function didYouMean(name: string, known: readonly string[]): string {
  const closest = closestName(name, known)
  return closest === null ? '' : ` (did you mean "${closest}"?)`
}

/** Keys whose value is a credential: an unknown key beside one may be a piece of it. */
const CREDENTIAL_KEYS = new Set(['api_key', 'bearer', 'password', 'redis_url'])

/**
 * A key with a colon or white space in it is most likely `name:value` with no
 * space after the colon, which YAML reads as one key, value and all (an
 * `api_key:sk-…` typo): it is not echoed, as it may hold a secret. Nor is an
 * unknown key beside a credential that is no near miss of a known one: an
 * unquoted value with a comma in a flow mapping (`{ api_key: sk-a,b }`)
 * ends at the comma, and YAML reads the rest as a key (a security review).
 */
function unknownKey(path: string, name: string, known: readonly string[], holder: unknown): { path: string; message: string } {
  if (/[:\s]/.test(name)) {
    return { path: join(path, '<key with ":" or a space>'), message: `${UNKNOWN_KEY} (a "name:value" with no space after the colon is read as one key; its text is not shown, as it may hold a secret)` }
  }
  // Printed by `check` to a terminal: a control character (ESC) would be a terminal escape sequence.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return { path: join(path, '<key with a control character>'), message: UNKNOWN_KEY }
  const hint = didYouMean(name, known)
  if (hint === '' && holdsCredential(holder, known)) {
    return { path: join(path, '<unknown key>'), message: `${UNKNOWN_KEY} (its name is not shown: beside a credential it may be part of one, such as an unquoted value cut at a comma; quote such values)` }
  }
  return { path: join(path, name), message: `${UNKNOWN_KEY}${hint}` }
}

/**
 * Whether the object the unknown key is in holds a credential, or a key
 * misspelt for one (`api_kye: sk-a,b` leaves `b` as a key just the same; a
 * code review). Asked of the schema alone, every unknown key of a backend
 * or `state` was hidden, with none beside it, and two read the same (a
 * design review); without the object (a validator not run verbose), the
 * schema answers.
 */
function holdsCredential(holder: unknown, known: readonly string[]): boolean {
  const credentials = known.filter((key) => CREDENTIAL_KEYS.has(key))
  if (credentials.length === 0) return false
  if (typeof holder !== 'object' || holder === null) return true
  return Object.keys(holder).some((key) => CREDENTIAL_KEYS.has(key) || closestName(key, credentials) !== null)
}

function describe(error: ErrorObject): { path: string; message: string } {
  const path = pointerToPath(error.instancePath)
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'required':
      return { path: join(path, String(params.missingProperty)), message: 'is required' }
    case 'additionalProperties':
      return unknownKey(path, String(params.additionalProperty), Object.keys(error.parentSchema?.properties ?? {}), error.data)
    case 'type': {
      const types = Array.isArray(params.type) ? params.type : String(params.type).split(',')
      return { path, message: `must be ${types.map(article).join(' or ')}${given(error.data)}` }
    }
    case 'enum':
      return { path, message: `must be one of: ${(params.allowedValues as unknown[]).map(show).join(', ')}` }
    case 'const':
      return { path, message: `must be ${show(params.allowedValue)}` }
    case 'pattern':
      return { path, message: `must be ${String(error.parentSchema?.description ?? `a string matching ${String(params.pattern)}`)}` }
    case 'format':
      return { path, message: `must be a valid ${FORMAT_NAMES[String(params.format)] ?? String(params.format)}` }
    case 'anyOf':
      return { path, message: String(error.parentSchema?.description ?? 'does not match any allowed form') }
    // Ajv's own ("must NOT have fewer than 1 characters") reads as a validator's, not as what to change.
    case 'minLength':
      return { path, message: params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters long` }
    case 'minItems':
      return { path, message: params.limit === 1 ? 'must not be empty' : `must have at least ${String(params.limit)} items` }
    default:
      return { path, message: error.message ?? 'is invalid' }
  }
}

const FORMAT_NAMES: Readonly<Record<string, string>> = {
  'iso-date-time': 'ISO 8601 date-time (e.g. 2025-01-31T12:00:00Z)',
  'date-time': 'RFC 3339 date-time',
}

function article(type: string): string {
  if (type === 'null') return 'null'
  if (type === 'integer') return 'an integer'
  if (type === 'object' || type === 'array') return `an ${type}`
  return `a ${type}`
}

/**
 * What was given instead, by kind only: a value may be a secret (a YAML
 * password that reads as a number) or a prompt, and neither belongs in an
 * error body or on a terminal. Empty when the error does not carry its data.
 */
function given(data: unknown): string {
  if (data === undefined) return ''
  if (data === null) return ' (got null)'
  if (Array.isArray(data)) return ' (got an array)'
  if (typeof data === 'number') return Number.isInteger(data) ? ' (got a number)' : ' (got a fractional number)'
  return ` (got ${article(typeof data)})`
}

function show(value: unknown): string {
  return value === null ? 'null' : typeof value === 'string' ? value : JSON.stringify(value)
}

/**
 * One issue per problem. Errors raised inside a failed `anyOf` branch are
 * dropped in favour of the `anyOf` error itself: "matches none of the forms"
 * beats a list of why each form did not match. Except when one form alone
 * has the value's shape (its errors are all inside the value: `{ bearer:
 * 12345 }` is the bearer form with a number for the token): its own errors
 * say more ("auth.bearer: must be a string (got a number)").
 */
export function toIssues(errors: readonly ErrorObject[] | null | undefined): ValidationIssue[] {
  if (!errors) return []
  const anyOfs = errors.filter((e) => e.keyword === 'anyOf')
  const shaped = new Map(anyOfs.map((anyOf) => [anyOf, shapedBranch(anyOf, errors)]))
  const chosen = new Set([...shaped.values()].flat())
  const anyOfPaths = anyOfs.map((e) => `${e.schemaPath}/`)
  const kept = errors.filter((e) => {
    if (chosen.has(e)) return true
    if (shaped.get(e)?.length) return false
    return !anyOfPaths.some((p) => e.schemaPath.startsWith(p))
  })
  const seen = new Set<string>()
  const issues: ValidationIssue[] = []
  for (const error of kept) {
    const issue = describe(error)
    const key = `${issue.path}\u0000${issue.message}`
    if (!seen.has(key)) {
      seen.add(key)
      issues.push(issue)
    }
  }
  return issues
}

/** The errors of the one branch of a failed `anyOf` whose errors all lie inside the value; none when no branch, or several, do. */
function shapedBranch(anyOf: ErrorObject, errors: readonly ErrorObject[]): ErrorObject[] {
  const prefix = `${anyOf.schemaPath}/`
  const branches = new Map<string, ErrorObject[]>()
  for (const error of errors) {
    if (!error.schemaPath.startsWith(prefix)) continue
    const branch = error.schemaPath.slice(prefix.length).split('/', 1)[0]!
    branches.set(branch, [...(branches.get(branch) ?? []), error])
  }
  const shaped = [...branches.values()].filter((list) => list.every((error) => error.instancePath.startsWith(`${anyOf.instancePath}/`)))
  return shaped.length === 1 ? shaped[0]! : []
}

export function formatIssue(issue: ValidationIssue): string {
  return `${issue.path === '' ? '(root)' : issue.path}: ${issue.message}`
}
