/**
 * A stand-in for the training upstream (training jobs and checkpoint lists),
 * for tests and `npm run demo`. It answers in FastAPI's shapes, since that is
 * what the real service is built on: `{"detail": ...}` errors, 422 issue lists.
 * Checks run in FastAPI's order: route, auth, query/body validation, handler.
 */
import { randomUUID } from 'node:crypto'
import type { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import { checkpointPage, parsePageQuery, seededCheckpoints } from './checkpoint-pages.js'
import { jsonInvalid, missing, notAnObject, requireStrings, validationBody, wrongType, type ValidationIssue } from './fastapi-validation.js'
import { isRecord, parseJsonBody, splitTarget, type RecordedRequest } from './recording-server.js'
import { RecordingStandIn } from './recording-stand-in.js'
import { sendJson } from './stand-in-replies.js'

export type { RecordedRequest } from './recording-server.js'

export interface TrainingStandInOptions {
  /** When set, every operation requires exactly this Authorization header value. */
  expectAuthorization?: string
  /** Known models: model id → number of seeded checkpoints (steps 1..N). Default {}. */
  checkpoints?: Record<string, number>
  /**
   * Failure to simulate on both operations (default 'none'). Checked after auth. 'status422' is
   * a refusal the gateway cannot foresee (the real service checks what the interface does not say).
   */
  fail?: 'none' | 'status500' | 'status422' | 'hang'
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
}

export interface TrainingJob {
  id: string
  model_id: string
  /** ISO 8601, when the stand-in created it. */
  created_at: string
  /** The parsed request body. */
  body: unknown
}

export interface TrainingStandIn {
  /** http://HOST:PORT */
  readonly url: string
  /** Every request on any path, in arrival order, as received. */
  readonly received: RecordedRequest[]
  /** Jobs created, in order. */
  readonly jobs: TrainingJob[]
  /** Read at each request, so tests may change behaviour between requests. */
  options: TrainingStandInOptions
  /** 'request', 'answered' and 'client-closed', each with the RecordedRequest. */
  readonly events: EventEmitter
  close(): Promise<void>
}

export async function startTrainingStandIn(options: TrainingStandInOptions = {}): Promise<TrainingStandIn> {
  const standIn = new TrainingStandInServer(options)
  await standIn.listen()
  return standIn
}

const JOBS_PATH = '/v1/preview/training-jobs'
/** The model id segment is matched raw, then percent-decoded once. */
const CHECKPOINTS_PATH = /^\/v1\/preview\/models\/([^/]+)\/checkpoints$/

type Route = { kind: 'create-job'; method: 'POST' } | { kind: 'list-checkpoints'; method: 'GET'; modelId: string }

class TrainingStandInServer extends RecordingStandIn<TrainingStandInOptions> implements TrainingStandIn {
  readonly jobs: TrainingJob[] = []

  protected route(request: RecordedRequest, res: ServerResponse): void {
    const { path, query } = splitTarget(request.url)
    const route = routeOf(path)
    if (route === null) return sendJson(res, 404, { detail: 'Not Found' })
    if (request.method !== route.method) {
      res.setHeader('allow', route.method)
      return sendJson(res, 405, { detail: 'Method Not Allowed' })
    }
    if (!this.#authorized(request)) {
      res.setHeader('www-authenticate', 'Bearer')
      return sendJson(res, 401, { detail: 'Not authenticated' })
    }
    const fail = this.options.fail ?? 'none'
    if (fail === 'status500') return sendJson(res, 500, { detail: 'stand-in failure' })
    if (fail === 'status422') return sendJson(res, 422, validationBody([{ type: 'value_error', loc: ['body', 'model_id'], msg: 'Value error, model is not trainable' }]))
    // 'hang' answers nothing; the client, or close(), ends the exchange.
    if (fail === 'hang') return
    if (route.kind === 'create-job') return this.#createJob(request, res)
    this.#listCheckpoints(route.modelId, query, res)
  }

  #createJob(request: RecordedRequest, res: ServerResponse): void {
    const parsed = parseJsonBody(request.rawBody)
    if (!parsed.ok) return sendJson(res, 422, validationBody([jsonInvalid()]))
    const job = readJobBody(parsed.value)
    if (!job.ok) return sendJson(res, 422, validationBody(job.issues))
    const { modelId } = job
    if (this.#checkpointCount(modelId) === null) return sendJson(res, 404, { detail: `Model ${modelId} not found` })
    const created: TrainingJob = { id: randomUUID(), model_id: modelId, created_at: new Date().toISOString(), body: parsed.value }
    this.jobs.push(created)
    sendJson(res, 200, { id: created.id })
  }

  #listCheckpoints(modelId: string, params: URLSearchParams, res: ServerResponse): void {
    const query = parsePageQuery(params)
    if (!query.ok) return sendJson(res, 422, validationBody(query.issues))
    const count = this.#checkpointCount(modelId)
    if (count === null) return sendJson(res, 404, { detail: `Model ${modelId} not found` })
    const page = checkpointPage(seededCheckpoints(modelId, count), query.query)
    if (!page.ok) return sendJson(res, 400, { detail: 'Unknown cursor' })
    sendJson(res, 200, page.list)
  }

  /** The number of seeded checkpoints, or null for a model the stand-in does not know. */
  #checkpointCount(modelId: string): number | null {
    const checkpoints = this.options.checkpoints ?? {}
    if (!Object.hasOwn(checkpoints, modelId)) return null
    return Math.max(0, Math.floor(checkpoints[modelId] ?? 0))
  }

  #authorized(request: RecordedRequest): boolean {
    const expected = this.options.expectAuthorization
    return expected === undefined || request.headers.authorization === expected
  }
}

function routeOf(path: string): Route | null {
  if (path === JOBS_PATH) return { kind: 'create-job', method: 'POST' }
  const segment = CHECKPOINTS_PATH.exec(path)?.[1]
  if (segment === undefined) return null
  try {
    return { kind: 'list-checkpoints', method: 'GET', modelId: decodeURIComponent(segment) }
  } catch {
    // Malformed percent-encoding names no model the router could match.
    return null
  }
}

type JobBody = { ok: true; modelId: string } | { ok: false; issues: ValidationIssue[] }

/**
 * `model_id` must be a string and `trajectory_groups` a list; neither the
 * UUID format nor the groups' contents are checked, so tests may seed any id.
 */
function readJobBody(body: unknown): JobBody {
  if (!isRecord(body)) return { ok: false, issues: [notAnObject()] }
  const issues = requireStrings(body, ['model_id'])
  if (!Object.hasOwn(body, 'trajectory_groups')) issues.push(missing(['body', 'trajectory_groups']))
  else if (!Array.isArray(body.trajectory_groups)) issues.push(wrongType(['body', 'trajectory_groups'], 'list'))
  if (issues.length > 0 || typeof body.model_id !== 'string') return { ok: false, issues }
  return { ok: true, modelId: body.model_id }
}
