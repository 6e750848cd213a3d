/**
 * Redis mode: the balancer weighs every replica's requests on a backend,
 * not only its own. Regression: prefix_affinity's bounded load (and
 * least_loaded) counted this replica's requests only, so a backend the
 * other replicas had loaded looked idle here and kept getting this
 * replica's share of the hot prefix. Two gateways on one redis-server in
 * front of two stand-ins that hold every request; replica A serves only
 * backend x and loads it, replica B balances x and y by prefix affinity.
 */
import { expect, it } from 'vitest'
import type { VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import { affinityKey, rankByAffinity } from '../../src/routing/balancers/prefix-affinity.js'
import { makeKey, type TestGateway } from '../support/gateway.js'
import { until } from '../support/metrics.js'
import { describeWithRedis, useInspectedRedis, uniquePrefix, type TestRedis } from '../support/redis-server.js'
import { trackedAfterEach } from '../support/tracked.js'

const key = makeKey('team-a', ['chat'])
const cleanups = trackedAfterEach()
let redis: TestRedis

const CANDIDATES = [
  { name: 'x', weight: 1 },
  { name: 'y', weight: 1 },
]

/** A prompt whose affinity ranks `first` ahead of the other backend. */
function promptPreferring(first: 'x' | 'y'): string {
  for (let i = 0; ; i++) {
    const content = `prompt ${i}`
    const ranked = rankByAffinity(CANDIDATES, affinityKey({ messages: [{ role: 'user', content }] })!)
    if (CANDIDATES[ranked[0]!]!.name === first) return content
  }
}

function chat(gw: TestGateway, content: string): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }),
  })
}

async function gateway(prefix: string, backends: readonly { url: string; name: string }[]): Promise<TestGateway> {
  const gw = await cleanups.redisGateway(
    {
      server: { shutdown_grace_ms: 200 },
      state: { kind: 'redis', redis_url: redis.url, key_prefix: prefix },
      auth: { keys: [key.entry] },
      models: [{ name: 'm', served_name: 'stand-in-model', balance: 'prefix_affinity', max_concurrency_per_backend: 16, backends }],
    },
    { callBudgetMs: 1000 },
  )
  await until(async () => (await fetch(`${gw.url}/readyz`)).status === 200, 'readyz 200')
  return gw
}

describeWithRedis('the balancer in Redis mode', () => {
  useInspectedRedis((started) => ({ redis } = started))

  it('prefix_affinity passes over a backend the other replicas have loaded', async () => {
    const x: VllmStandIn = await cleanups.standIn({ hold: true })
    const y: VllmStandIn = await cleanups.standIn({ hold: true })
    const prefix = uniquePrefix('load')
    const a = await gateway(prefix, [{ url: x.url, name: 'x' }])
    const b = await gateway(prefix, [
      { url: x.url, name: 'x' },
      { url: y.url, name: 'y' },
    ])
    const hot = promptPreferring('x')
    const answers = Array.from({ length: 6 }, () => chat(a, hot))
    await until(() => x.heldCount() === 6, 'replica A’s six requests held at x')
    // B's first request (its prefix prefers y) brings back the shared lease counts.
    answers.push(chat(b, promptPreferring('y')))
    await until(() => y.heldCount() === 1, 'replica B’s first request held at y')

    // x: 6 of 7 in flight, over its bound of max(1.5 × 3.5, 3.5 + 2) = 5.5: the hot prefix goes to y.
    answers.push(chat(b, hot))
    await until(() => x.heldCount() + y.heldCount() === 8, 'replica B’s hot request held')
    expect([x.heldCount(), y.heldCount()]).toEqual([6, 2])

    x.releaseHeld(6)
    y.releaseHeld(2)
    for (const answer of await Promise.all(answers)) expect(answer.status).toBe(200)
  })
})
