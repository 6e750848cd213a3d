/**
 * What a reload cannot change. The listeners (host, port, metrics_port, max_connections): a
 * warn line, compared with the listeners actually open, so a reload that
 * asks for them again after one that asked for others is quiet. Where the
 * admission state lives (state.kind, redis_url, key_prefix): the reload is
 * refused, and the current config keeps serving.
 */
import { describe, expect, it } from 'vitest'
import { configFrom, makeKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('k', ['chat'])
const cleanups = trackedAfterEach()
const WARNING = 'listener settings change only on restart'

describe('a reload that changes listener settings', () => {
  // Regression: compared with the last loaded config, so going back to the listeners in use warned again.
  it('warns once for a change, and not for a change back to the listeners in use', async () => {
    const config = (server: Record<string, unknown>) => ({ server: { port: 0, ...server }, auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
    const gw = await cleanups.gateway(config({}))
    const warnings = () => gw.logLines().filter((line) => line.msg === WARNING)

    await gw.reload(configFrom(config({ metrics_port: 19999 })))
    expect(warnings().map((line) => line.keys)).toEqual([['server.metrics_port']])

    await gw.reload(configFrom(config({})))
    expect(warnings()).toHaveLength(1)

    await gw.reload(configFrom(config({ host: '0.0.0.0' })))
    expect(warnings().map((line) => line.keys)).toEqual([['server.metrics_port'], ['server.host']])

    await gw.reload(configFrom(config({ max_connections: 100 })))
    expect(warnings().map((line) => line.keys)).toEqual([['server.metrics_port'], ['server.host'], ['server.max_connections']])
  })
})

describe('a reload that moves the admission state', () => {
  const config = (state: Record<string, unknown>) => ({ server: { port: 0 }, state, auth: { keys: [key.entry] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })

  // Regression (audit): memory -> redis let a backend run twice its slots and a key past max_concurrency:
  // the requests running under the old generation were not counted where the new one looked.
  it('is refused, naming what changed, and the current state keeps serving', async () => {
    const gw = await cleanups.gateway(config({ kind: 'memory' }))

    await expect(gw.reload(configFrom(config({ kind: 'redis', redis_url: 'redis://127.0.0.1:1' })))).rejects.toThrow('state.kind, state.redis_url change only on restart')

    expect(gw.context.config.state.kind).toBe('memory')
    // Keys only Redis mode reads may change in memory mode.
    await gw.reload(configFrom(config({ kind: 'memory', key_prefix: 'other:' })))
  })

  it('in redis mode, another key_prefix or redis_url is refused too', async () => {
    const redisState = { kind: 'redis', redis_url: 'redis://127.0.0.1:1', key_prefix: 'a:' }
    const gw = await cleanups.redisGateway(config(redisState))

    await expect(gw.reload(configFrom(config({ ...redisState, key_prefix: 'b:' })))).rejects.toThrow('state.key_prefix changes only on restart')
    await expect(gw.reload(configFrom(config({ ...redisState, redis_url: 'redis://127.0.0.1:2' })))).rejects.toThrow('state.redis_url changes only on restart')
  })
})
