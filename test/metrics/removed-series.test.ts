/**
 * After a reload, the gauges of what no configuration serves any more are
 * dropped (src/metrics/removed-series.ts): a removed backend's
 * `sluice_backend_up 0` once kept the no-healthy-backend alert firing for a
 * model that no longer existed.
 */
import { describe, expect, it } from 'vitest'
import { removedSeries } from '../../src/metrics/removed-series.js'
import { configFrom, makeKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'
import { until } from '../support/metrics.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()

const model = (name: string, backends: string[]) => ({ name, backends: backends.map((b, i) => ({ url: `http://127.0.0.1:${9000 + i}`, name: b })) })
const config = (...models: ReturnType<typeof model>[]) => configFrom({ models })

describe('removedSeries', () => {
  it('lists the models and backends the retired config had and no serving config has', () => {
    const retired = config(model('kept', ['a', 'b']), model('gone', ['x']))
    const serving = [config(model('kept', ['a']), model('new', ['b']))]
    expect(removedSeries(retired, serving)).toEqual({ models: ['gone'], backends: [{ model: 'kept', backend: 'b' }, { model: 'gone', backend: 'x' }] })
  })

  it('keeps what any of several serving configs still has (a generation still retiring)', () => {
    const retired = config(model('m', ['a']))
    expect(removedSeries(retired, [config(model('other', ['z'])), config(model('m', ['a']))])).toEqual({ models: [], backends: [] })
  })
})

describe('a reload that removes a model', () => {
  it('drops its backend_up, inflight and queue_depth series once the old generation closed; counters stay', async () => {
    const backend = await cleanups.standIn({ tokens: 1 })
    const models = [
      { name: 'kept', backends: [{ url: backend.url, name: 'b' }] },
      { name: 'gone', backends: [{ url: backend.url, name: 'b' }] },
    ]
    const gw = await cleanups.gateway({ auth: { keys: [key.entry] }, models })
    const answer = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gone', messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(answer.status).toBe(200)
    const scrape = async () => (await fetch(`${gw.url}/metrics`)).text()
    expect(await scrape()).toMatch(/sluice_backend_up\{model="gone",backend="b"\}/)

    await gw.reload(configFrom({ server: { port: 0 }, auth: { keys: [key.entry] }, models: [models[0]] }))

    await until(async () => !/sluice_backend_up\{model="gone"/.test(await scrape()), 'the removed model\'s backend_up series to go')
    const text = await scrape()
    expect(text).not.toMatch(/sluice_(inflight_requests|queue_depth)\{model="gone"/)
    expect(text).toMatch(/sluice_backend_up\{model="kept",backend="b"\}/)
    expect(text).toMatch(/sluice_requests_total\{route="chat",model="gone",status="200"\} 1/)
  })
})
