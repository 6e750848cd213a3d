/** The messages a replica reads off its channel: what the Lua scripts publish, and nothing else. */
import { describe, expect, it } from 'vitest'
import { parseReplicaMessage } from '../../src/state/replica-message.js'

describe('parseReplicaMessage', () => {
  it('reads a grant and an eviction', () => {
    expect(parseReplicaMessage('{"kind":"grant","model":"m","id":"a1","backend":"gpu-a"}')).toEqual({ kind: 'grant', model: 'm', id: 'a1', backend: 'gpu-a' })
    expect(parseReplicaMessage('{"kind":"evict","model":"m","id":"a1"}')).toEqual({ kind: 'evict', model: 'm', id: 'a1', backend: undefined })
  })

  it('ignores what this version does not understand', () => {
    for (const raw of ['not json', 'null', '[]', '{"kind":"resize","model":"m","id":"a1"}', '{"kind":"grant","model":1,"id":"a1"}', '{"kind":"grant","model":"m"}']) {
      expect(parseReplicaMessage(raw), raw).toBeNull()
    }
    expect(parseReplicaMessage('{"kind":"grant","model":"m","id":"a1","backend":7}')?.backend).toBeUndefined()
  })
})
