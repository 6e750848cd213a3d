import { describe, expect, it } from 'vitest'
import { allocationSites, type SamplingHeapProfileNode } from '../../bench/lib/heap-profile.mjs'

function node(functionName: string, url: string, lineNumber: number, selfSize: number, children: SamplingHeapProfileNode[] = []): SamplingHeapProfileNode {
  return { callFrame: { functionName, url, lineNumber }, selfSize, children }
}

describe('allocationSites (a V8 sampling heap profile read per allocation site)', () => {
  // The shape HeapProfiler.stopSampling returns: a call tree from "(root)",
  // each node with the bytes sampled where that function allocated itself.
  const profile = {
    head: node('(root)', '', -1, 0, [
      node('handleChat', 'file:///srv/sluice/dist/routes/chat.js', 20, 1000, [
        node('forwardChat', 'file:///srv/sluice/dist/proxy/chat-forward.js', 8, 3000),
        node('parse', '', -1, 512),
      ]),
      // The same function reached by another path: one site, the bytes added up.
      node('emit', 'node:events', 470, 0, [node('forwardChat', 'file:///srv/sluice/dist/proxy/chat-forward.js', 8, 500)]),
      node('', '/srv/sluice/node_modules/fastify/lib/route.js', 464, 256),
      node('Request', '/srv/sluice/node_modules/@scope/pkg/lib/request.js', 47, 128),
    ]),
  }

  it('adds up every node that allocated, once', () => {
    expect(allocationSites(profile).total).toBe(1000 + 3000 + 512 + 500 + 256 + 128)
  })

  it('names a site by function and where it is defined, 1-based line, path cut to whose code it is', () => {
    const { bySite } = allocationSites(profile)
    expect(Object.fromEntries(bySite)).toEqual({
      'handleChat dist/routes/chat.js:21': 1000,
      'forwardChat dist/proxy/chat-forward.js:9': 3500,
      'parse (V8 or native)': 512,
      '(anonymous) fastify/lib/route.js:465': 256,
      'Request @scope/pkg/lib/request.js:48': 128,
    })
  })

  it('leaves out functions that only called others', () => {
    expect([...allocationSites(profile).bySite.keys()].some((site) => site.startsWith('emit') || site.startsWith('(root)'))).toBe(false)
  })
})
