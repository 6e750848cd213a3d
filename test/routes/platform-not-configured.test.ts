/**
 * A platform route whose upstream the config leaves out: a 404 in the
 * DESIGN.md shape that names the missing upstream, before credentials or
 * the body are looked at. Regression (an operator audit): it answered "No
 * route for POST /v1/preview/training-jobs", which reads as the route not
 * existing at all.
 */
import { expect, it } from 'vitest'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()

it('names the upstream the config lacks, for any caller and any body', async () => {
  const backend = await cleanups.standIn()
  const gw = await cleanups.gateway({ models: [{ name: 'm', backends: [{ url: backend.url }] }] })
  const cases: [string, string, RequestInit][] = [
    ['training', '/v1/preview/training-jobs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' }],
    ['checkpoints', '/v1/preview/models/3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43/checkpoints', { method: 'GET' }],
    ['objects', '/obj/read', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }],
  ]
  for (const [upstream, path, init] of cases) {
    const answer = await fetch(`${gw.url}${path}`, init)
    expect(answer.status, path).toBe(404)
    const { error } = (await answer.json()) as { error: { code: string; message: string } }
    expect(error.code).toBe('not_found')
    expect(error.message).toContain(`this gateway has no ${upstream} upstream (upstreams.${upstream} in its config)`)
  }
})

// Regression (review): a wrong method on such a route was told "it is served for POST", which answers 404 too;
// and (platform review) methods no route has anywhere (PUT, DELETE) were told "it is served for GET, HEAD, POST",
// with the route's pattern in the message rather than the path.
it('any other method there gets the same answer, naming the path, with no Allow that offers a method', async () => {
  const backend = await cleanups.standIn()
  const gw = await cleanups.gateway({ models: [{ name: 'm', backends: [{ url: backend.url }] }] })
  for (const [method, path, upstream] of [
    ['GET', '/v1/preview/training-jobs', 'training'],
    ['POST', '/v1/preview/models/3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43/checkpoints', 'checkpoints'],
    ['GET', '/obj/read', 'objects'],
    ['PUT', '/obj/read', 'objects'],
    ['DELETE', '/v1/preview/models/3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43/checkpoints', 'checkpoints'],
    ['OPTIONS', '/v1/preview/training-jobs', 'training'],
  ] as const) {
    const answer = await fetch(`${gw.url}${path}`, { method })
    expect(answer.status, path).toBe(404)
    expect(answer.headers.get('allow'), path).toBeNull()
    const { error } = (await answer.json()) as { error: { message: string } }
    expect(error.message, path).toContain(`${path} is not served here: this gateway has no ${upstream} upstream`)
  }
})
