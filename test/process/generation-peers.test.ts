/** Which generations count against each other's slots after a reload (src/generation-peers.ts). */
import { describe, expect, it } from 'vitest'
import { generationPeers } from '../../src/generation-peers.js'
import type { Generation } from '../../src/generation.js'

/** A generation as the peers see it: its config's backends and its slots' in-flight counts. */
function fakeGeneration(backends: Record<string, string>, inFlight: Record<string, number>, woken: string[]): Generation {
  const slots = new Map([['m', { inFlight: (backend: string) => inFlight[backend] ?? 0, wake: () => woken.push('m') }]])
  const models = [{ name: 'm', backends: Object.entries(backends).map(([name, url]) => ({ name, url })) }]
  return { config: { models }, context: { state: { slots } } } as unknown as Generation
}

describe('generationPeers', () => {
  it('counts only the other generations, on the same backend name and URL', () => {
    const woken: string[] = []
    const current = fakeGeneration({ b1: 'http://a:1', b2: 'http://b:1' }, { b1: 5, b2: 5 }, woken)
    const moved = fakeGeneration({ b1: 'http://a:1', b2: 'http://b:2' }, { b1: 2, b2: 3 }, woken)
    const older = fakeGeneration({ b1: 'http://a:1' }, { b1: 1 }, woken)
    const live = [current, moved, older]
    const peers = generationPeers(() => current, () => live)

    expect(peers.held('m', 'b1', 'http://a:1')).toBe(3)
    // b2 moved to another server in `moved`: its requests run elsewhere.
    expect(peers.held('m', 'b2', 'http://b:1')).toBe(0)
    expect(peers.held('other-model', 'b1', 'http://a:1')).toBe(0)
    peers.freed('m')
    expect(woken).toEqual(['m', 'm'])
  })

  it('counts nothing while a generation is alone', () => {
    const only = fakeGeneration({ b1: 'http://a:1' }, { b1: 7 }, [])
    expect(generationPeers(() => only, () => [only]).held('m', 'b1', 'http://a:1')).toBe(0)
  })
})
