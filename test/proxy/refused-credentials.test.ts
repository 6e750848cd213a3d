/**
 * A backend or upstream refusing the gateway's own credentials (401): the
 * client gets the answer as it came, the operator a warn line and a
 * counted upstream error. Regression (an operator audit): a wrong backend
 * api_key showed only as 401s in the access log, as if clients' keys were
 * wrong.
 */
import { expect, it } from 'vitest'
import { startTrainingStandIn } from '../../src/dev/training-stand-in.js'
import { makeKey } from '../support/gateway.js'
import { metricSum, metricValue, scrape, scrapeMetric } from '../support/metrics.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('team-a', ['chat', 'training'])
const cleanups = trackedAfterEach()
const REFUSED = 'the backend refused the gateway’s own credentials (401): check its api_key, or the upstream’s auth'

it('a backend that refuses the api_key: 401 to the client, auth_refused counted each time, one warn line a minute', async () => {
  const backend = await cleanups.standIn({ apiKey: 'right-key' })
  const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url, name: 'b1', api_key: 'wrong-key' }] }] })
  const chat = () =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
  const first = await chat()
  expect(first.status).toBe(401)
  expect((await chat()).status).toBe(401)
  expect(await scrapeMetric(gw.url, 'sluice_upstream_errors_total', { model: 'm', backend: 'b1', reason: 'auth_refused' })).toBe(2)
  const warns = gw.logLines().filter((line) => line.msg === REFUSED)
  expect(warns).toHaveLength(1)
  expect(warns[0]).toMatchObject({ level: 40, request_id: first.headers.get('x-request-id'), model: 'm', backend: 'b1', status: 401 })
  expect(gw.logText()).not.toContain('wrong-key')
})

it('a training upstream that refuses the bearer: the same', async () => {
  const training = await startTrainingStandIn({ expectAuthorization: 'Bearer right-token' })
  cleanups.push(() => training.close())
  const backend = await cleanups.standIn()
  const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }], upstreams: { training: { url: training.url, auth: { bearer: 'wrong-token' } } } })
  const answer = await fetch(`${gw.url}/v1/preview/training-jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model_id: '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43', trajectory_groups: [{ trajectories: [{ reward: 1, messages_and_choices: [] }] }] }),
  })
  expect(answer.status).toBe(401)
  const warn = gw.logLines().find((line) => line.msg === REFUSED)
  expect(warn).toMatchObject({ level: 40, model: null, status: 401 })
  expect(await scrapeMetric(gw.url, 'sluice_upstream_errors_total', { model: '', backend: String(warn!.backend), reason: 'auth_refused' })).toBe(1)
  expect(gw.logText()).not.toContain('wrong-token')
})

// Regression (review): with forward_client the upstream gets the client's own Authorization, so its 401
// is about the client; counting it as the gateway's let any client raise false operator alarms.
it('an upstream that gets the client’s own credentials (forward_client): its 401 is the client’s, nothing noted', async () => {
  const training = await startTrainingStandIn({ expectAuthorization: 'Bearer something-else' })
  cleanups.push(() => training.close())
  const backend = await cleanups.standIn()
  const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: backend.url }] }], upstreams: { training: { url: training.url, auth: { forward_client: true } } } })
  const answer = await fetch(`${gw.url}/v1/preview/training-jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model_id: '3f1c2a8e-5b7d-4e2f-9a61-0c8d7e6b5a43', trajectory_groups: [{ trajectories: [{ reward: 1, messages_and_choices: [] }] }] }),
  })
  expect(answer.status).toBe(401)
  expect(gw.logLines().filter((line) => line.msg === REFUSED)).toHaveLength(0)
  // The chat backend's auth_refused is at 0 from the start; the training upstream has none.
  const text = await scrape(gw.url)
  expect(metricSum(text, 'sluice_upstream_errors_total', { reason: 'auth_refused' })).toBe(0)
  expect(metricValue(text, 'sluice_upstream_errors_total', { backend: 'training', reason: 'auth_refused' })).toBeUndefined()
})
