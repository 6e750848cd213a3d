/**
 * A stand-in for the object store upstream (`POST /obj/read`), for tests and
 * `npm run demo`. Its own errors carry `{"reason": ...}` like the real
 * service's; schema failures keep FastAPI's 422 `{"detail": [...]}` list.
 * Checks run in FastAPI's order: route, auth, body validation, handler.
 */
import type { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import { jsonInvalid, notAnObject, requireStrings, validationBody, wrongType, type ValidationIssue } from './fastapi-validation.js'
import { defaultObjects, findVersion, storedObject, type ReadOptions, type SeedObject } from './object-versions.js'
import { isRecord, parseJsonBody, splitTarget, type RecordedRequest } from './recording-server.js'
import { RecordingStandIn } from './recording-stand-in.js'
import { sendJson } from './stand-in-replies.js'

export type { RecordedRequest } from './recording-server.js'
export { contentDigest, defaultObjects, type SeedObject, type SeedVersion, type StoredObject } from './object-versions.js'

export interface ObjectStoreStandInOptions {
  /** When set, /obj/read requires exactly this Authorization header value. */
  expectAuthorization?: string
  /** The stored objects; defaultObjects() when omitted. */
  objects?: SeedObject[]
  /** Failure to simulate on /obj/read (default 'none'). Checked after auth. */
  fail?: 'none' | 'status500' | 'hang'
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
}

export interface ObjectStoreStandIn {
  /** http://HOST:PORT */
  readonly url: string
  /** Every request on any path, in arrival order, as received. */
  readonly received: RecordedRequest[]
  /** Read at each request, so tests may change behaviour between requests. */
  options: ObjectStoreStandInOptions
  /** 'request', 'answered' and 'client-closed', each with the RecordedRequest. */
  readonly events: EventEmitter
  close(): Promise<void>
}

export async function startObjectStoreStandIn(options: ObjectStoreStandInOptions = {}): Promise<ObjectStoreStandIn> {
  const standIn = new ObjectStoreStandInServer(options)
  await standIn.listen()
  return standIn
}

const READ_PATH = '/obj/read'

interface ReadRequest extends ReadOptions {
  projectId: string
  objectId: string
  digest: string
}

type ReadParse = { ok: true; read: ReadRequest } | { ok: false; issues: ValidationIssue[] }

class ObjectStoreStandInServer extends RecordingStandIn<ObjectStoreStandInOptions> implements ObjectStoreStandIn {
  /** Used while options.objects is unset; one copy per server, so the objects stay the same between reads. */
  readonly #defaultObjects = defaultObjects()

  protected route(request: RecordedRequest, res: ServerResponse): void {
    if (splitTarget(request.url).path !== READ_PATH) return sendJson(res, 404, { reason: 'Not Found' })
    if (request.method !== 'POST') {
      res.setHeader('allow', 'POST')
      return sendJson(res, 405, { reason: 'Method Not Allowed' })
    }
    const expected = this.options.expectAuthorization
    if (expected !== undefined && request.headers.authorization !== expected) {
      return sendJson(res, 401, { reason: 'Unauthorized' })
    }
    const fail = this.options.fail ?? 'none'
    if (fail === 'status500') return sendJson(res, 500, { reason: 'stand-in failure' })
    // 'hang' answers nothing; the client, or close(), ends the exchange.
    if (fail === 'hang') return
    this.#read(request, res)
  }

  #read(request: RecordedRequest, res: ServerResponse): void {
    const parsed = parseReadBody(request.rawBody)
    if (!parsed.ok) return sendJson(res, 422, validationBody(parsed.issues))
    const { projectId, objectId, digest } = parsed.read
    const ref = findVersion(this.options.objects ?? this.#defaultObjects, projectId, objectId, digest)
    if (ref === null) return sendJson(res, 404, { reason: `Object ${projectId}/${objectId}:${digest} not found` })
    sendJson(res, 200, { obj: storedObject(ref, parsed.read) })
  }
}

/** The three ids must be strings; the two flags may be absent, null or a boolean. */
function parseReadBody(rawBody: Buffer): ReadParse {
  const parsed = parseJsonBody(rawBody)
  if (!parsed.ok) return { ok: false, issues: [jsonInvalid()] }
  const body = parsed.value
  if (!isRecord(body)) return { ok: false, issues: [notAnObject()] }
  const issues = requireStrings(body, ['project_id', 'object_id', 'digest'])
  const metadataOnly = optionalFlag(body, 'metadata_only', issues)
  const includeTagsAndAliases = optionalFlag(body, 'include_tags_and_aliases', issues)
  const { project_id: projectId, object_id: objectId, digest } = body
  if (issues.length > 0 || typeof projectId !== 'string' || typeof objectId !== 'string' || typeof digest !== 'string') {
    return { ok: false, issues }
  }
  return { ok: true, read: { projectId, objectId, digest, metadataOnly, includeTagsAndAliases } }
}

function optionalFlag(body: Record<string, unknown>, name: string, issues: ValidationIssue[]): boolean {
  const value = body[name]
  if (value === undefined || value === null) return false
  if (typeof value === 'boolean') return value
  issues.push(wrongType(['body', name], 'boolean'))
  return false
}
