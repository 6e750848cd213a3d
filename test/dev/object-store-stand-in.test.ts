import { once } from 'node:events'
import { describe, it, expect, afterEach } from 'vitest'
import {
  contentDigest,
  defaultObjects,
  startObjectStoreStandIn,
  type ObjectStoreStandIn,
  type ObjectStoreStandInOptions,
  type SeedObject,
} from '../../src/dev/object-store-stand-in.js'

const started: ObjectStoreStandIn[] = []

async function start(options?: ObjectStoreStandInOptions): Promise<ObjectStoreStandIn> {
  const standIn = await startObjectStoreStandIn(options)
  started.push(standIn)
  return standIn
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((standIn) => standIn.close()))
})

const PROJECT = 'demo/project'
const OBJECT = 'config'
const SEED = defaultObjects()[0] as SeedObject

function versionVal(index: number): unknown {
  return SEED.versions[index]?.val
}

function read(standIn: ObjectStoreStandIn, body: Record<string, unknown> | string, headers: Record<string, string> = {}) {
  return fetch(`${standIn.url}/obj/read`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

async function readObj(standIn: ObjectStoreStandIn, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await read(standIn, { project_id: PROJECT, object_id: OBJECT, ...body })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toBe('application/json')
  return ((await res.json()) as { obj: Record<string, unknown> }).obj
}

describe('object store stand-in: reads', () => {
  it('reads the latest version of the default seed in full', async () => {
    const standIn = await start()
    const obj = await readObj(standIn, { digest: 'latest' })
    const val = versionVal(2)
    expect(obj).toEqual({
      project_id: PROJECT,
      object_id: OBJECT,
      created_at: '2025-01-01T02:00:00.000Z',
      deleted_at: null,
      digest: contentDigest(val),
      version_index: 2,
      is_latest: 1,
      kind: 'object',
      base_object_class: null,
      leaf_object_class: null,
      val,
      service_user_id: 'stand-in',
      size_bytes: Buffer.byteLength(JSON.stringify(val)),
    })
    expect(obj.digest).toMatch(/^[0-9a-f]{64}$/)
  })

  it('reads a version by v<N> and by content digest', async () => {
    const standIn = await start()
    const first = await readObj(standIn, { digest: 'v0' })
    expect(first).toMatchObject({ version_index: 0, is_latest: 0, val: versionVal(0), created_at: '2025-01-01T00:00:00.000Z' })
    const second = await readObj(standIn, { digest: contentDigest(versionVal(1)) })
    expect(second).toMatchObject({ version_index: 1, is_latest: 0, val: versionVal(1), digest: contentDigest(versionVal(1)) })
    const byAlias = await readObj(standIn, { digest: 'latest' })
    expect(await readObj(standIn, { digest: byAlias.digest })).toEqual(byAlias)
  })

  it('leaves val null when metadata_only is set, keeping the size and digest', async () => {
    const standIn = await start()
    const full = await readObj(standIn, { digest: 'v1' })
    const meta = await readObj(standIn, { digest: 'v1', metadata_only: true })
    expect(meta).toEqual({ ...full, val: null })
    expect(await readObj(standIn, { digest: 'v1', metadata_only: null })).toEqual(full)
  })

  it('includes tags and aliases only when asked', async () => {
    const standIn = await start()
    const latest = await readObj(standIn, { digest: 'latest', include_tags_and_aliases: true })
    expect(latest).toMatchObject({ tags: ['prod'], aliases: ['latest'] })
    const older = await readObj(standIn, { digest: 'v0', include_tags_and_aliases: true })
    expect(older).toMatchObject({ tags: [], aliases: [] })
    const plain = await readObj(standIn, { digest: 'latest', include_tags_and_aliases: false })
    expect(plain).not.toHaveProperty('tags')
    expect(plain).not.toHaveProperty('aliases')
  })

  it('serves the objects it was given, read at each request', async () => {
    const objects: SeedObject[] = [
      { project_id: 'p', object_id: 'o', versions: [{ val: 'one' }, { val: [1, 2], aliases: ['stable'] }, { val: null }] },
    ]
    const standIn = await start({ objects })
    const res = await read(standIn, { project_id: 'p', object_id: 'o', digest: 'stable' })
    expect(await res.json()).toMatchObject({ obj: { version_index: 1, val: [1, 2], size_bytes: 5 } })
    const latest = await read(standIn, { project_id: 'p', object_id: 'o', digest: 'latest' })
    expect(await latest.json()).toMatchObject({ obj: { version_index: 2, is_latest: 1, val: null, digest: contentDigest(null) } })
    standIn.options.objects = []
    const gone = await read(standIn, { project_id: 'p', object_id: 'o', digest: 'latest' })
    expect(gone.status).toBe(404)
    await gone.body?.cancel()
  })

  it('answers 404 with a reason for a missing object or version', async () => {
    const standIn = await start()
    const cases: [Record<string, unknown>, string][] = [
      [{ project_id: PROJECT, object_id: 'nothing', digest: 'latest' }, 'Object demo/project/nothing:latest not found'],
      [{ project_id: 'other', object_id: OBJECT, digest: 'v0' }, 'Object other/config:v0 not found'],
      [{ project_id: PROJECT, object_id: OBJECT, digest: 'v3' }, 'Object demo/project/config:v3 not found'],
      [{ project_id: PROJECT, object_id: OBJECT, digest: 'abc123' }, 'Object demo/project/config:abc123 not found'],
    ]
    for (const [body, reason] of cases) {
      const res = await read(standIn, body)
      expect(res.status).toBe(404)
      expect(await res.json()).toEqual({ reason })
    }
  })

  it('answers FastAPI 422 bodies for a body that fails the schema', async () => {
    const standIn = await start()
    const missing = await read(standIn, { project_id: PROJECT, metadata_only: 'yes' })
    expect(missing.status).toBe(422)
    expect(await missing.json()).toEqual({
      detail: [
        { loc: ['body', 'object_id'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'digest'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'metadata_only'], msg: 'Input should be a valid boolean', type: 'bool_type' },
      ],
    })
    const notJson = await read(standIn, 'nope')
    expect(notJson.status).toBe(422)
    expect(await notJson.json()).toEqual({ detail: [{ loc: ['body', 0], msg: 'JSON decode error', type: 'json_invalid' }] })
  })

  it('records every request with its raw URL and body bytes', async () => {
    const standIn = await start()
    const arrived = once(standIn.events, 'request')
    const text = JSON.stringify({ project_id: PROJECT, object_id: OBJECT, digest: 'latest' })
    await (await read(standIn, text)).body?.cancel()
    const [received] = await arrived
    expect(received).toBe(standIn.received[0])
    expect(standIn.received[0]).toMatchObject({ method: 'POST', url: '/obj/read', headers: { 'content-type': 'application/json' } })
    expect(standIn.received[0]?.rawBody.equals(Buffer.from(text))).toBe(true)
    const odd = await fetch(`${standIn.url}/obj/read%2Fx?q=a%20b`, { method: 'POST', body: 'x' })
    expect(odd.status).toBe(404)
    expect(await odd.json()).toEqual({ reason: 'Not Found' })
    expect(standIn.received[1]).toMatchObject({ url: '/obj/read%2Fx?q=a%20b' })
    expect(standIn.received[1]?.rawBody.toString()).toBe('x')
  })
})

describe('object store stand-in: authorization and routing', () => {
  it('requires the exact Authorization value on /obj/read', async () => {
    const basic = `Basic ${Buffer.from('user:pass').toString('base64')}`
    const standIn = await start({ expectAuthorization: basic })
    const body = { project_id: PROJECT, object_id: OBJECT, digest: 'latest' }
    const missing = await read(standIn, body)
    expect(missing.status).toBe(401)
    expect(await missing.json()).toEqual({ reason: 'Unauthorized' })
    const wrong = await read(standIn, body, { authorization: `Basic ${Buffer.from('user:nope').toString('base64')}` })
    expect(wrong.status).toBe(401)
    await wrong.body?.cancel()
    const right = await read(standIn, body, { authorization: basic })
    expect(right.status).toBe(200)
    await right.body?.cancel()
  })

  it('answers 404 for unknown paths and 405 for the wrong method', async () => {
    const standIn = await start()
    const unknown = await fetch(`${standIn.url}/obj/write`, { method: 'POST', body: '{}' })
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toEqual({ reason: 'Not Found' })
    const get = await fetch(`${standIn.url}/obj/read`)
    expect(get.status).toBe(405)
    expect(get.headers.get('allow')).toBe('POST')
    expect(await get.json()).toEqual({ reason: 'Method Not Allowed' })
  })
})

describe('object store stand-in: failure modes', () => {
  it('status500 fails reads until turned off', async () => {
    const standIn = await start({ fail: 'status500' })
    const body = { project_id: PROJECT, object_id: OBJECT, digest: 'latest' }
    const failed = await read(standIn, body)
    expect(failed.status).toBe(500)
    expect(await failed.json()).toEqual({ reason: 'stand-in failure' })
    standIn.options.fail = 'none'
    const recovered = await read(standIn, body)
    expect(recovered.status).toBe(200)
    await recovered.body?.cancel()
  })

  it('hang keeps the request open until close() ends it', async () => {
    const standIn = await start({ fail: 'hang' })
    const arrived = once(standIn.events, 'request')
    const pending = read(standIn, { project_id: PROJECT, object_id: OBJECT, digest: 'latest' }).catch((error: unknown) => error)
    await arrived
    await standIn.close()
    expect(await pending).toBeInstanceOf(Error)
    await standIn.close()
  })
})
