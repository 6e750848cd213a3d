import { once } from 'node:events'
import { describe, it, expect, afterEach } from 'vitest'
import { checkpointId, lossAt, type CheckpointList } from '../../src/dev/checkpoint-pages.js'
import { startTrainingStandIn, type TrainingStandIn, type TrainingStandInOptions } from '../../src/dev/training-stand-in.js'

const started: TrainingStandIn[] = []

async function start(options?: TrainingStandInOptions): Promise<TrainingStandIn> {
  const standIn = await startTrainingStandIn(options)
  started.push(standIn)
  return standIn
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((standIn) => standIn.close()))
})

const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const JOB_BODY = { model_id: MODEL, trajectory_groups: [{ trajectories: [{ messages_and_choices: [], reward: 1 }] }] }

function createJob(standIn: TrainingStandIn, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${standIn.url}/v1/preview/training-jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  })
}

function listCheckpoints(standIn: TrainingStandIn, modelSegment: string, query = '', headers: Record<string, string> = {}) {
  return fetch(`${standIn.url}/v1/preview/models/${modelSegment}/checkpoints${query}`, { headers })
}

/** Follows `after` from the first page to the last, returning every page. */
async function walk(standIn: TrainingStandIn, order: 'asc' | 'desc', limit: number): Promise<CheckpointList[]> {
  const pages: CheckpointList[] = []
  let after: string | null = null
  for (;;) {
    const query = new URLSearchParams({ order, limit: String(limit), ...(after === null ? {} : { after }) })
    const res = await listCheckpoints(standIn, MODEL, `?${query}`)
    expect(res.status).toBe(200)
    const page = (await res.json()) as CheckpointList
    pages.push(page)
    if (!page.has_more) return pages
    after = page.last_id
  }
}

describe('training stand-in: training jobs', () => {
  it('creates a job for a known model and records the request as received', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 0 } })
    const arrived = once(standIn.events, 'request')
    const text = JSON.stringify(JOB_BODY)
    const res = await createJob(standIn, text)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('application/json')
    const body = (await res.json()) as { id: string }
    expect(body).toEqual({ id: expect.stringMatching(UUID) })
    expect(standIn.jobs).toEqual([
      { id: body.id, model_id: MODEL, created_at: expect.any(String), body: JOB_BODY },
    ])
    const [received] = await arrived
    expect(received).toBe(standIn.received[0])
    expect(standIn.received[0]).toMatchObject({
      method: 'POST',
      url: '/v1/preview/training-jobs',
      headers: { 'content-type': 'application/json' },
    })
    expect(standIn.received[0]?.rawBody.equals(Buffer.from(text))).toBe(true)
  })

  it('answers 404 for a model it does not know', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 3 } })
    const res = await createJob(standIn, JSON.stringify({ ...JOB_BODY, model_id: 'other' }))
    expect(res.status).toBe(404)
    expect(await res.json()).toEqual({ detail: 'Model other not found' })
    expect(standIn.jobs).toEqual([])
  })

  it('answers FastAPI 422 bodies for missing fields, wrong types and bodies that are not JSON', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 0 } })
    const empty = await createJob(standIn, '{}')
    expect(empty.status).toBe(422)
    expect(await empty.json()).toEqual({
      detail: [
        { loc: ['body', 'model_id'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'trajectory_groups'], msg: 'Field required', type: 'missing' },
      ],
    })
    const noModel = await createJob(standIn, JSON.stringify({ trajectory_groups: [] }))
    expect(await noModel.json()).toEqual({ detail: [{ loc: ['body', 'model_id'], msg: 'Field required', type: 'missing' }] })
    const wrongTypes = await createJob(standIn, JSON.stringify({ model_id: 7, trajectory_groups: {} }))
    expect(await wrongTypes.json()).toEqual({
      detail: [
        { loc: ['body', 'model_id'], msg: 'Input should be a valid string', type: 'string_type' },
        { loc: ['body', 'trajectory_groups'], msg: 'Input should be a valid list', type: 'list_type' },
      ],
    })
    const notJson = await createJob(standIn, '{nope')
    expect(notJson.status).toBe(422)
    expect(await notJson.json()).toEqual({ detail: [{ loc: ['body', 0], msg: 'JSON decode error', type: 'json_invalid' }] })
    const array = await createJob(standIn, '[]')
    expect(array.status).toBe(422)
    expect(await array.json()).toMatchObject({ detail: [{ loc: ['body'], type: 'model_attributes_type' }] })
    expect(standIn.jobs).toEqual([])
    expect(standIn.received).toHaveLength(5)
  })
})

describe('training stand-in: checkpoint pagination', () => {
  it('walks 45 checkpoints ascending in pages of 20, 20 and 5, each once and in order', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 45 } })
    const pages = await walk(standIn, 'asc', 20)
    expect(pages.map((page) => page.data.length)).toEqual([20, 20, 5])
    expect(pages.map((page) => page.has_more)).toEqual([true, true, false])
    for (const page of pages) {
      expect(page.object).toBe('list')
      expect(page.first_id).toBe(page.data[0]?.id)
      expect(page.last_id).toBe(page.data.at(-1)?.id)
    }
    const all = pages.flatMap((page) => page.data)
    expect(all.map((checkpoint) => checkpoint.step)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1))
    expect(new Set(all.map((checkpoint) => checkpoint.id)).size).toBe(45)
    expect(all[0]).toEqual({ id: checkpointId(MODEL, 1), step: 1, metrics: { loss: lossAt(1) } })
    for (const checkpoint of all) expect(checkpoint.id).toMatch(UUID)
  })

  it('walks them descending the same way', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 45 } })
    const pages = await walk(standIn, 'desc', 20)
    expect(pages.map((page) => page.data.length)).toEqual([20, 20, 5])
    expect(pages.map((page) => page.has_more)).toEqual([true, true, false])
    const steps = pages.flatMap((page) => page.data.map((checkpoint) => checkpoint.step))
    expect(steps).toEqual(Array.from({ length: 45 }, (_, i) => 45 - i))
    expect(pages[2]?.last_id).toBe(checkpointId(MODEL, 1))
  })

  it('has stable ids across servers, distinct per model', async () => {
    const one = await start({ checkpoints: { [MODEL]: 2, other: 2 } })
    const two = await start({ checkpoints: { [MODEL]: 2 } })
    const first = (await (await listCheckpoints(one, MODEL)).json()) as CheckpointList
    const second = (await (await listCheckpoints(two, MODEL)).json()) as CheckpointList
    const other = (await (await listCheckpoints(one, 'other')).json()) as CheckpointList
    expect(first).toEqual(second)
    expect(other.data[0]?.id).not.toBe(first.data[0]?.id)
  })

  it('defaults to limit 20, ascending, and a page that ends exactly at the end has no more', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 40 } })
    const first = (await (await listCheckpoints(standIn, MODEL)).json()) as CheckpointList
    expect(first.data).toHaveLength(20)
    expect(first.data[0]?.step).toBe(1)
    expect(first.has_more).toBe(true)
    const second = (await (await listCheckpoints(standIn, MODEL, `?after=${first.last_id}`)).json()) as CheckpointList
    expect(second.data.map((checkpoint) => checkpoint.step)).toEqual(Array.from({ length: 20 }, (_, i) => i + 21))
    expect(second.has_more).toBe(false)
  })

  it('answers an empty list for a known model without checkpoints', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 0 } })
    const res = await listCheckpoints(standIn, MODEL)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ object: 'list', data: [], first_id: '', last_id: '', has_more: false })
  })

  it('rejects a limit that is not an integer in 1..100 and an unknown order with FastAPI 422 bodies', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 5 } })
    const cases: [string, object][] = [
      ['?limit=abc', { type: 'int_parsing', loc: ['query', 'limit'] }],
      ['?limit=0', { type: 'greater_than_equal', loc: ['query', 'limit'], msg: 'Input should be greater than or equal to 1' }],
      ['?limit=101', { type: 'less_than_equal', loc: ['query', 'limit'], msg: 'Input should be less than or equal to 100' }],
      ['?order=sideways', { type: 'enum', loc: ['query', 'order'] }],
    ]
    for (const [query, issue] of cases) {
      const res = await listCheckpoints(standIn, MODEL, query)
      expect(res.status).toBe(422)
      expect(await res.json()).toEqual({ detail: [expect.objectContaining(issue)] })
    }
    const bounds = await listCheckpoints(standIn, MODEL, '?limit=100')
    expect(((await bounds.json()) as CheckpointList).data).toHaveLength(5)
  })

  it('answers 400 for a cursor that is not one of the model’s checkpoints, 404 for an unknown model', async () => {
    const standIn = await start({ checkpoints: { [MODEL]: 5, other: 5 } })
    const unknown = await listCheckpoints(standIn, MODEL, '?after=nope')
    expect(unknown.status).toBe(400)
    expect(await unknown.json()).toEqual({ detail: 'Unknown cursor' })
    const foreign = await listCheckpoints(standIn, MODEL, `?after=${checkpointId('other', 1)}`)
    expect(foreign.status).toBe(400)
    await foreign.body?.cancel()
    const missing = await listCheckpoints(standIn, 'nobody')
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ detail: 'Model nobody not found' })
  })

  it('percent-decodes the model segment once and records the raw URL', async () => {
    const standIn = await start({ checkpoints: { 'a/b': 3, 'c%2Fd': 1 } })
    const res = await listCheckpoints(standIn, 'a%2Fb', '?limit=2')
    expect(res.status).toBe(200)
    const page = (await res.json()) as CheckpointList
    expect(page.data.map((checkpoint) => checkpoint.id)).toEqual([checkpointId('a/b', 1), checkpointId('a/b', 2)])
    expect(standIn.received[0]?.url).toBe('/v1/preview/models/a%2Fb/checkpoints?limit=2')
    const twice = await listCheckpoints(standIn, 'c%252Fd')
    expect(twice.status).toBe(200)
    await twice.body?.cancel()
    const raw = await listCheckpoints(standIn, 'a/b')
    expect(raw.status).toBe(404)
    expect(await raw.json()).toEqual({ detail: 'Not Found' })
  })
})

describe('training stand-in: authorization and routing', () => {
  it('requires the exact Authorization value on both operations, not on unknown paths', async () => {
    const standIn = await start({ expectAuthorization: 'Bearer up-key', checkpoints: { [MODEL]: 1 } })
    const missing = await createJob(standIn, JSON.stringify(JOB_BODY))
    expect(missing.status).toBe(401)
    expect(missing.headers.get('www-authenticate')).toBe('Bearer')
    expect(await missing.json()).toEqual({ detail: 'Not authenticated' })
    const wrong = await listCheckpoints(standIn, MODEL, '', { authorization: 'Bearer other' })
    expect(wrong.status).toBe(401)
    expect(await wrong.json()).toEqual({ detail: 'Not authenticated' })
    const job = await createJob(standIn, JSON.stringify(JOB_BODY), { authorization: 'Bearer up-key' })
    expect(job.status).toBe(200)
    const list = await listCheckpoints(standIn, MODEL, '', { authorization: 'Bearer up-key' })
    expect(list.status).toBe(200)
    await Promise.all([job.body?.cancel(), list.body?.cancel()])
    const unknown = await fetch(`${standIn.url}/v2/nothing`)
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toEqual({ detail: 'Not Found' })
    expect(standIn.received.map((request) => request.headers.authorization)).toEqual([
      undefined,
      'Bearer other',
      'Bearer up-key',
      'Bearer up-key',
      undefined,
    ])
  })

  it('answers 405 for a known path with the wrong method', async () => {
    const standIn = await start()
    const res = await fetch(`${standIn.url}/v1/preview/training-jobs`)
    expect(res.status).toBe(405)
    expect(res.headers.get('allow')).toBe('POST')
    expect(await res.json()).toEqual({ detail: 'Method Not Allowed' })
  })
})

describe('training stand-in: failure modes', () => {
  it('status500 fails both operations until turned off', async () => {
    const standIn = await start({ fail: 'status500', checkpoints: { [MODEL]: 1 } })
    const job = await createJob(standIn, JSON.stringify(JOB_BODY))
    expect(job.status).toBe(500)
    expect(await job.json()).toEqual({ detail: 'stand-in failure' })
    const list = await listCheckpoints(standIn, MODEL)
    expect(list.status).toBe(500)
    await list.body?.cancel()
    standIn.options.fail = 'none'
    const recovered = await listCheckpoints(standIn, MODEL)
    expect(recovered.status).toBe(200)
    await recovered.body?.cancel()
  })

  it('hang keeps the request open until close() ends it', async () => {
    const standIn = await start({ fail: 'hang', checkpoints: { [MODEL]: 1 } })
    const arrived = once(standIn.events, 'request')
    const pending = createJob(standIn, JSON.stringify(JOB_BODY)).catch((error: unknown) => error)
    await arrived
    await standIn.close()
    expect(await pending).toBeInstanceOf(Error)
    expect(standIn.jobs).toEqual([])
    await standIn.close()
  })

  it('emits client-closed when the client gives up on a hanging request', async () => {
    const standIn = await start({ fail: 'hang', checkpoints: { [MODEL]: 1 } })
    const controller = new AbortController()
    const arrived = once(standIn.events, 'request')
    const pending = fetch(`${standIn.url}/v1/preview/models/${MODEL}/checkpoints`, { signal: controller.signal }).catch(
      (error: unknown) => error,
    )
    await arrived
    const closed = once(standIn.events, 'client-closed')
    controller.abort()
    const [received] = await closed
    expect(received).toBe(standIn.received[0])
    expect(await pending).toBeInstanceOf(Error)
  })
})
