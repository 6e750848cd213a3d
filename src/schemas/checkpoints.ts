/**
 * The checkpoint listing's path and query (interface.md): validated, with
 * defaults made explicit, and rebuilt so that nothing the client wrote can
 * change which upstream path is reached. Only the interface's parameters
 * (`after`, `limit`, `order`) are passed on: the upstream answers the
 * gateway's own credential, so a member it understands that the interface
 * does not list (a filter, a debug flag) must not reach it from a client.
 * Others are dropped, not refused, as the upstream itself would ignore them.
 */
import { GatewayError } from '../errors/gateway-error.js'

export const CHECKPOINT_LIMIT = { min: 1, max: 100, default: 20 } as const
const ORDERS = ['asc', 'desc'] as const
const MAX_MODEL_ID_LENGTH = 512

export interface CheckpointQuery {
  readonly limit: number
  readonly order: (typeof ORDERS)[number]
  readonly after: string | undefined
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError('invalid_value', `${param} ${message}.`, { param })
}

function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name]
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw invalid(name, 'must be given once')
  return value
}

/** `query` as fastify parsed `rawQuery` (the URL's text after `?`). */
export function parseCheckpointQuery(query: Record<string, unknown>, rawQuery: string): CheckpointQuery {
  const broken = brokenlyEncodedMember(rawQuery)
  if (broken !== null) throw invalid(broken, 'is not valid percent-encoding: write each byte as %XX, a character as the bytes of its UTF-8')
  const limitText = single(query, 'limit')
  let limit: number = CHECKPOINT_LIMIT.default
  if (limitText !== undefined) {
    if (!/^\d+$/.test(limitText)) throw invalid('limit', `must be an integer from ${CHECKPOINT_LIMIT.min} to ${CHECKPOINT_LIMIT.max}`)
    limit = Number(limitText)
    if (limit < CHECKPOINT_LIMIT.min || limit > CHECKPOINT_LIMIT.max) throw invalid('limit', `must be an integer from ${CHECKPOINT_LIMIT.min} to ${CHECKPOINT_LIMIT.max}`)
  }
  const orderText = single(query, 'order') ?? 'asc'
  if (!(ORDERS as readonly string[]).includes(orderText)) throw invalid('order', 'must be one of: asc, desc')
  const after = single(query, 'after')
  if (after === '') throw invalid('after', 'must be a non-empty cursor (the last id of the previous page)')
  // A cursor is an id, as model_id is: control characters (a CR LF written into the upstream's log) are no part of one.
  // eslint-disable-next-line no-control-regex
  if (after !== undefined && /[\u0000-\u001f\u007f-\u009f]/.test(after)) throw invalid('after', 'must be a cursor without control characters (the id of the last item of the previous page)')
  return { limit, order: orderText as CheckpointQuery['order'], after }
}

const PASSED_ON = new Set(['limit', 'order', 'after'])

/**
 * The first member passed on whose value is not valid percent-encoding
 * (`%zz`, `%FF`, a lone `%`). The query parser keeps such text as it is,
 * and the rebuilt query would then encode it again: the upstream would get
 * another cursor (`%FF` as `%25FF`) than the client meant.
 */
function brokenlyEncodedMember(rawQuery: string): string | null {
  if (!rawQuery.includes('%')) return null
  for (const pair of rawQuery.split('&')) {
    const eq = pair.indexOf('=')
    if (eq < 0) continue
    const name = decodedOrNull(pair.slice(0, eq))
    if (name !== null && PASSED_ON.has(name) && decodedOrNull(pair.slice(eq + 1)) === null) return name
  }
  return null
}

function decodedOrNull(text: string): string | null {
  try {
    return decodeURIComponent(text)
  } catch {
    return null
  }
}

/**
 * The model id as one safe path segment. `.` and `..` would be resolved as
 * path steps by an upstream; control characters (C0, DEL and C1) are never
 * part of an id. `/`, `\` and `%` are refused although re-encoding would
 * keep them inside the segment: a proxy in front of the platform API (nginx
 * decodes and normalizes before proxy_pass) or an app server that routes on
 * the decoded path would turn `..%2F..%2Fadmin` into a walk to another path,
 * carrying the gateway's own credential.
 */
export function checkModelIdSegment(modelId: string): string {
  if (modelId === '' || isTooLong(modelId) || !isSafeSegment(modelId) || !isSafeSegment(modelId.normalize('NFKC'))) {
    // `param` names body fields and query parameters only (DESIGN.md): a path segment's error names it in the message.
    throw new GatewayError(
      'invalid_value',
      `The path's model_id must be a non-empty model id of at most ${MAX_MODEL_ID_LENGTH} characters, not "." or "..", without "/", "\\", "%" or control characters (nor their full-width forms).`,
    )
  }
  return encodeURIComponent(modelId)
}

/**
 * Checked as written and in Unicode's compatibility form (NFKC) too: a
 * server that normalizes what it decodes reads the full-width `．．`
 * (U+FF0E) as `..` and `／` as `/`.
 */
function isSafeSegment(segment: string): boolean {
  // eslint-disable-next-line no-control-regex
  return segment !== '.' && segment !== '..' && !/[\u0000-\u001f\u007f-\u009f/\\%]/.test(segment)
}

/** Characters are code points (README), not UTF-16 units: an emoji counts once. */
function isTooLong(modelId: string): boolean {
  // Never more code points than units, so only a long id is worth counting.
  return modelId.length > MAX_MODEL_ID_LENGTH && [...modelId].length > MAX_MODEL_ID_LENGTH
}

export function checkpointUpstreamPath(modelId: string, query: CheckpointQuery): string {
  const params = new URLSearchParams()
  params.set('limit', String(query.limit))
  params.set('order', query.order)
  if (query.after !== undefined) params.set('after', query.after)
  return `/v1/preview/models/${checkModelIdSegment(modelId)}/checkpoints?${params.toString()}`
}
