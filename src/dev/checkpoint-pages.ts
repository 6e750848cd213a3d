/**
 * Seeded checkpoints and their cursor pagination, for the training stand-in.
 * Pure functions: a model's checkpoints are recomputed from (model id, count)
 * on every request, so they are the same across runs and need no storage.
 */
import { createHash } from 'node:crypto'
import type { ValidationIssue } from './fastapi-validation.js'

export interface Checkpoint {
  id: string
  step: number
  metrics: { loss: number }
}

export interface CheckpointList {
  object: 'list'
  data: Checkpoint[]
  first_id: string
  last_id: string
  has_more: boolean
}

export interface PageQuery {
  /** Id of the last item of the previous page; null for the first page. */
  after: string | null
  limit: number
  order: 'asc' | 'desc'
}

export type PageQueryParse = { ok: true; query: PageQuery } | { ok: false; issues: ValidationIssue[] }

export type PageResult = { ok: true; list: CheckpointList } | { ok: false; reason: 'unknown-cursor' }

const DEFAULT_LIMIT = 20
const MIN_LIMIT = 1
const MAX_LIMIT = 100
/** UUIDv5 namespace of the stand-in's checkpoint ids; any fixed UUID would do. */
const CHECKPOINT_NAMESPACE = '6f1c3f0e-6a43-4c1b-9d1e-5a7c2b8e4d10'

/** Checkpoints with steps 1..count, ascending. */
export function seededCheckpoints(modelId: string, count: number): Checkpoint[] {
  return Array.from({ length: count }, (_, index) => {
    const step = index + 1
    return { id: checkpointId(modelId, step), step, metrics: { loss: lossAt(step) } }
  })
}

/** A UUIDv5 of (model id, step): deterministic, and distinct across models. */
export function checkpointId(modelId: string, step: number): string {
  const namespace = Buffer.from(CHECKPOINT_NAMESPACE.replaceAll('-', ''), 'hex')
  const name = Buffer.from(JSON.stringify([modelId, step]), 'utf8')
  const bytes = createHash('sha1').update(namespace).update(name).digest().subarray(0, 16)
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x50
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80
  const hex = bytes.toString('hex')
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-')
}

/** A loss curve that falls with the step, rounded so it prints the same everywhere. */
export function lossAt(step: number): number {
  return Math.round(25000 / Math.sqrt(step)) / 10000
}

/**
 * Reads `after`, `limit` and `order` as FastAPI would: the last of repeated
 * values wins, `limit` must be an integer in 1..100, `order` asc or desc.
 * An empty `after` counts as absent.
 */
export function parsePageQuery(params: URLSearchParams): PageQueryParse {
  const issues: ValidationIssue[] = []
  const after = lastValue(params, 'after')
  const limit = parseLimit(lastValue(params, 'limit'), issues)
  const order = parseOrder(lastValue(params, 'order'), issues)
  if (issues.length > 0) return { ok: false, issues }
  return { ok: true, query: { after: after === null || after === '' ? null : after, limit, order } }
}

/** The page after the cursor, in the requested order. */
export function checkpointPage(ascending: readonly Checkpoint[], query: PageQuery): PageResult {
  const ordered = query.order === 'asc' ? [...ascending] : [...ascending].reverse()
  const start = query.after === null ? 0 : ordered.findIndex((checkpoint) => checkpoint.id === query.after) + 1
  // findIndex gave -1 for an id that is not one of this model's checkpoints.
  if (start === 0 && query.after !== null) return { ok: false, reason: 'unknown-cursor' }
  const data = ordered.slice(start, start + query.limit)
  return {
    ok: true,
    list: {
      object: 'list',
      data,
      first_id: data[0]?.id ?? '',
      last_id: data.at(-1)?.id ?? '',
      has_more: start + query.limit < ordered.length,
    },
  }
}

function lastValue(params: URLSearchParams, name: string): string | null {
  return params.getAll(name).at(-1) ?? null
}

function parseOrder(text: string | null, issues: ValidationIssue[]): PageQuery['order'] {
  if (text === null || text === 'asc' || text === 'desc') return text ?? 'asc'
  issues.push({ type: 'enum', loc: ['query', 'order'], msg: "Input should be 'asc' or 'desc'" })
  return 'asc'
}

function parseLimit(text: string | null, issues: ValidationIssue[]): number {
  if (text === null) return DEFAULT_LIMIT
  const loc = ['query', 'limit']
  if (!/^\s*[+-]?\d+\s*$/.test(text)) {
    issues.push({ type: 'int_parsing', loc, msg: 'Input should be a valid integer, unable to parse string as an integer' })
    return DEFAULT_LIMIT
  }
  const limit = Number.parseInt(text, 10)
  if (limit < MIN_LIMIT) issues.push({ type: 'greater_than_equal', loc, msg: `Input should be greater than or equal to ${MIN_LIMIT}` })
  if (limit > MAX_LIMIT) issues.push({ type: 'less_than_equal', loc, msg: `Input should be less than or equal to ${MAX_LIMIT}` })
  return limit
}
