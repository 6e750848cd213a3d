/**
 * A reload cannot move the listeners (host, port, metrics_port): it says so
 * with a warn line. The comparison is with the listeners actually open, so a
 * reload that asks for them again after one that asked for others is quiet.
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
  })
})
