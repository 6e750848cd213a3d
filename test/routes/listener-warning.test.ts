/**
 * Node logs a MaxListenersExceededWarning for an emitter that gets more
 * than ten listeners of one event. A platform response carried eleven
 * 'close' listeners (the gateway's six, fastify's and the stream pipe's
 * five), so every forwarded training, checkpoint or object call added a
 * warn line to the log (three audits found it). Each route is driven here
 * in this process, its warnings listened to.
 */
import { describe, expect, it } from 'vitest'
import OpenAI from 'openai'
import { hashPassword } from '../../src/auth/scrypt-hash.js'
import { startObjectStoreStandIn } from '../../src/dev/object-store-stand-in.js'
import { startTrainingStandIn } from '../../src/dev/training-stand-in.js'
import { makeKey } from '../support/gateway.js'
import { trackedAfterEach } from '../support/tracked.js'

const cleanups = trackedAfterEach()
const MODEL_ID = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
// Key limits add the key's share to what a response's close gives back.
const key = makeKey('all', ['chat', 'training', 'checkpoints'], { limits: { max_concurrency: 4, requests_per_minute: 1000 } })
const ALICE = { username: 'alice', password: 'alice-password' }

describe('listeners on a response', () => {
  it('no route makes Node warn of a listener leak: chat, training, checkpoints, objects', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error) => void warnings.push(warning)
    process.on('warning', onWarning)
    cleanups.push(() => process.off('warning', onWarning))
    const backend = await cleanups.standIn({ tokens: 3 })
    const training = await startTrainingStandIn({ checkpoints: { [MODEL_ID]: 3 } })
    const store = await startObjectStoreStandIn()
    cleanups.push(() => training.close(), () => store.close())
    const gw = await cleanups.gateway({
      auth: { keys: [key.entry], users: [{ username: ALICE.username, password_scrypt: await hashPassword(ALICE.password), scopes: ['objects'] }] },
      models: [{ name: 'm', backends: [{ url: backend.url }] }],
      upstreams: { training: { url: training.url }, checkpoints: { url: training.url }, objects: { url: store.url } },
    })
    const bearer = { authorization: `Bearer ${key.token}` }
    const basic = { authorization: `Basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}` }
    const json = { 'content-type': 'application/json' }

    const answers = [
      await fetch(`${gw.url}/v1/preview/training-jobs`, { method: 'POST', headers: { ...bearer, ...json }, body: JSON.stringify({ model_id: MODEL_ID, trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: 'user', content: 'hi' }], reward: 1 }] }] }) }),
      await fetch(`${gw.url}/v1/preview/models/${MODEL_ID}/checkpoints`, { headers: bearer }),
      await fetch(`${gw.url}/obj/read`, { method: 'POST', headers: { ...basic, ...json }, body: JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' }) }),
    ]
    for (const answer of answers) await answer.arrayBuffer()
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key.token })
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    for await (const chunk of stream) void chunk

    expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([])
  })
})
