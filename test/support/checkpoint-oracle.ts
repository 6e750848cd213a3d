/**
 * The checkpoint listing's path and query rules restated from README.md
 * ("The platform routes") and interface.md, for property tests: whether a
 * `GET /v1/preview/models/{model_id}/checkpoints?…` must be forwarded, and
 * the upstream target it must then reach.
 */
import { either, invalid, valid, type Verdict } from './request-oracle.js'

export interface CheckpointTarget {
  readonly path: string
  readonly limit: string
  readonly order: string
  readonly after: string | null
}

export interface CheckpointJudgement {
  readonly verdict: Verdict
  /** The model id as the client's segment decodes, when it decodes. */
  readonly modelId: string | null
  /** What the upstream must receive when the verdict is 'valid'. */
  readonly target: CheckpointTarget | null
}

/** app.ts's `maxParamLength`: longer segments cannot fit Node's 16 KiB request head anyway. */
const MAX_PARAM_LENGTH = 16384

export function checkpointJudgement(rawSegment: string, query: string): CheckpointJudgement {
  let modelId: string
  try {
    modelId = decodeURIComponent(rawSegment)
  } catch {
    return { verdict: invalid('model_id is not valid percent-encoding'), modelId: null, target: null }
  }
  const refuse = (why: string): CheckpointJudgement => ({ verdict: invalid(why), modelId, target: null })
  if (rawSegment.length > MAX_PARAM_LENGTH) return refuse('path segment too long (414)')
  if (modelId === '' || modelId === '.' || modelId === '..') return refuse('model_id empty or a dot segment')
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(modelId)) return refuse('model_id with a control character (C0, DEL or C1)')
  // README: a decoding proxy or app server in front of the platform API would walk such an id to another path.
  if (/[/\\%]/.test(modelId)) return refuse('model_id with "/", "\\" or "%" once decoded')
  // README counts characters: code points, so 512 emoji (1024 UTF-16 units) are fine.
  if ([...modelId].length > 512) return refuse('model_id over 512 characters')
  const cautions: Verdict[] = []

  const params = new URLSearchParams(query)
  const limits = params.getAll('limit')
  const orders = params.getAll('order')
  const afters = params.getAll('after')
  if (limits.length > 1 || orders.length > 1 || afters.length > 1) cautions.push(either('a member given twice'))
  const limitText = limits[0]
  if (limitText !== undefined) {
    const number = Number(limitText.trim())
    const inRange = Number.isInteger(number) && number >= 1 && number <= 100
    if (/^\d+$/.test(limitText) && !inRange) return refuse('limit out of range')
    if (!inRange || limitText.trim() === '') return refuse(`limit ${JSON.stringify(limitText)}`)
    // "007" and "+5" are integers to FastAPI; the contract only says "integer".
    if (!/^\d{1,4}$/.test(limitText)) cautions.push(either(`limit written as ${JSON.stringify(limitText)}`))
  }
  const order = orders[0] ?? 'asc'
  if (order !== 'asc' && order !== 'desc') return refuse(`order ${JSON.stringify(order)}`)
  const after = afters[0] ?? null
  if (after === '') return refuse('empty after')
  // eslint-disable-next-line no-control-regex
  if (after !== null && /[\u0000-\u001f\u007f-\u009f]/.test(after)) return refuse('after with a control character')

  const verdict = cautions[0] ?? valid
  // Members the interface does not list are dropped (README): the upstream answers the gateway's credential.
  const target: CheckpointTarget = {
    path: `/v1/preview/models/${encodeURIComponent(modelId)}/checkpoints`,
    limit: limitText === undefined ? '20' : String(Number(limitText.trim())),
    order,
    after,
  }
  return { verdict, modelId, target }
}

/** Differences between an upstream request target and the expected one ('' when none). */
export function targetMismatch(url: string, expected: CheckpointTarget): string {
  const mark = url.indexOf('?')
  const path = mark < 0 ? url : url.slice(0, mark)
  if (path !== expected.path) return `path ${path} instead of ${expected.path}`
  const params = new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1))
  const entries = [...params]
  if (entries[0]?.join('=') !== `limit=${expected.limit}` || entries[1]?.join('=') !== `order=${expected.order}`) {
    return `query does not start with limit=${expected.limit}&order=${expected.order}: ${url}`
  }
  if (params.getAll('limit').length !== 1 || params.getAll('order').length !== 1) return `limit or order repeated: ${url}`
  if (JSON.stringify(params.getAll('after')) !== JSON.stringify(expected.after === null ? [] : [expected.after])) return `after differs: ${url}`
  const unlisted = [...params.keys()].filter((name) => !['limit', 'order', 'after'].includes(name))
  if (unlisted.length > 0) return `members the interface does not list were passed on (${unlisted.join(', ')}): ${url}`
  return ''
}
