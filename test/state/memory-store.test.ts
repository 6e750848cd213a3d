import { pino } from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import type { GatewayConfig } from '../../src/config/resolve.js'
import { createMetrics } from '../../src/metrics/registry.js'
import { buildAdmissionState } from '../../src/state/admission-state.js'
import { MemoryKeyLimiter } from '../../src/state/memory-key-limiter.js'
import { buildMemoryState } from '../../src/state/memory-state.js'
import { MemoryModelSlots } from '../../src/state/memory-slots.js'
import type { SlotPeers } from '../../src/state/slot-peers.js'
import { inTurn } from '../../src/state/wake-turns.js'
import { AdmissionRefused, type ModelSlots } from '../../src/state/store.js'
import { describeKeyLimiterContract } from './key-limiter.contract.js'
import { describeModelSlotsContract, RecordingObserver } from './model-slots.contract.js'

afterEach(() => vi.useRealTimers())

describeModelSlotsContract('MemoryModelSlots', (settings, clock, observer) => new MemoryModelSlots(settings, clock, observer), { fakeTimers: true })

describeKeyLimiterContract('MemoryKeyLimiter', (clock) => new MemoryKeyLimiter(clock))

describe('MemoryKeyLimiter usage (carried into Redis after an outage)', () => {
  it('reads each key\u2019s use of its trailing minute, and keeps what was handed over as counted there', async () => {
    let now = 1_000_000
    const limiter = new MemoryKeyLimiter({ now: () => now })
    const limits = { requests_per_minute: 60, tokens_per_minute: 600 }
    expect(limiter.usage()).toEqual([])
    await limiter.admit('a', limits)
    const ticket = await limiter.admit('a', limits)
    await ticket.chargeTokens(300)
    await limiter.admit('unlimited', {})
    expect(limiter.usage()).toEqual([{ keyId: 'a', limits, requests: 2, tokens: 300 }])
    now += 1000
    const [use] = limiter.usage()
    expect(use).toEqual({ keyId: 'a', limits, requests: 1, tokens: 290 })
    await limiter.admit('a', limits)
    limiter.countedElsewhere(use!)
    // The request taken after the reading is still to be carried; the carried use is enforced here still.
    expect(limiter.usage()).toEqual([{ keyId: 'a', limits, requests: 1, tokens: 0, alreadyShared: 1 }])
    const tight = { requests_per_minute: 2, tokens_per_minute: 600 }
    await expect(limiter.admit('a', tight)).rejects.toMatchObject({ reason: 'rate_limit_requests' })
  })
})

function config(text: string): GatewayConfig {
  const result = parseConfig(text, {})
  if (!result.ok) throw new Error(`expected a valid config, got ${JSON.stringify(result.issues)}`)
  return result.config
}

const TWO_MODELS = `models:
  - name: small
    max_concurrency_per_backend: 1
    queue: { max_size: 1, max_wait_ms: 1000 }
    backends:
      - { url: "http://127.0.0.1:8001", name: s1 }
      - { url: "http://127.0.0.1:8002", name: s2 }
  - name: big
    backends:
      - { url: "http://127.0.0.1:8003", name: b1 }
`

describe('buildMemoryState', () => {
  const clock = { now: () => 0 }
  const choose = (candidates: readonly string[]) => candidates[0]!

  it('builds one ModelSlots per model from its backends, slots and queue settings', async () => {
    vi.useFakeTimers()
    const asked: string[] = []
    const observer = new RecordingObserver()
    const state = buildMemoryState(config(TWO_MODELS), (model, backend) => (asked.push(`${model}/${backend}`), backend !== 's1'), clock, observer)
    expect([...state.slots.keys()]).toEqual(['small', 'big'])
    const small = state.slots.get('small')!

    // s1 is unusable, s2 has one slot, the queue holds one: the third request is turned away.
    const lease = await small.acquire({ priority: 0, signal: new AbortController().signal, choose })
    expect(lease.backend).toBe('s2')
    expect(asked).toContain('small/s1')
    const waiting = small.acquire({ priority: 0, signal: new AbortController().signal, choose })
    const waitingOutcome = waiting.catch((e: unknown) => e)
    await expect(small.acquire({ priority: 0, signal: new AbortController().signal, choose })).rejects.toMatchObject({ reason: 'queue_full' })

    // max_wait_ms from the config.
    await vi.advanceTimersByTimeAsync(1000)
    const timedOut = await waitingOutcome
    expect(timedOut).toBeInstanceOf(AdmissionRefused)
    expect((timedOut as AdmissionRefused).reason).toBe('queue_timeout')
    expect(observer.calls.filter((c) => c.kind === 'slotTaken')).toEqual([{ kind: 'slotTaken', model: 'small', backend: 's2' }])
    lease.release()
    expect(small.inFlight('s2')).toBe(0)
    state.close()
  })

  it('close() turns away the waiters of every model', async () => {
    const state = buildMemoryState(config(TWO_MODELS), () => true, clock, new RecordingObserver())
    const small = state.slots.get('small')!
    const big = state.slots.get('big')!
    await small.acquire({ priority: 0, signal: new AbortController().signal, choose })
    await small.acquire({ priority: 0, signal: new AbortController().signal, choose })
    const bigLeases = await Promise.all(Array.from({ length: 64 }, () => big.acquire({ priority: 0, signal: new AbortController().signal, choose })))
    expect(big.inFlight('b1')).toBe(64)
    const waiters = [
      small.acquire({ priority: 0, signal: new AbortController().signal, choose }),
      big.acquire({ priority: 0, signal: new AbortController().signal, choose }),
    ]
    state.close()
    for (const waiter of waiters) await expect(waiter).rejects.toMatchObject({ reason: 'shutting_down' })
    for (const lease of bigLeases) lease.release()
    expect(big.inFlight('b1')).toBe(0)
  })

  it('counts requests running under another store’s leases (elsewhere) against the slots', async () => {
    let elsewhere = 1
    const settings = { model: 'm', backends: ['a'], slotsPerBackend: 2, maxQueue: 10, maxWaitMs: 1000, usable: () => true, elsewhere: () => elsewhere }
    const slots = new MemoryModelSlots(settings, clock, new RecordingObserver())
    const lease = await slots.acquire({ priority: 0, signal: new AbortController().signal, choose })
    const waiting = slots.acquire({ priority: 0, signal: new AbortController().signal, choose })
    expect(slots.queueDepth()).toBe(1)
    // The other store's request ended: wake() serves the queue.
    elsewhere = 0
    slots.wake()
    ;(await waiting).release()
    lease.release()
    expect(slots.inFlight('a')).toBe(0)
    slots.close()
  })

  it('weighs requests under another store’s leases (elsewhere) in the load the balancer sees, not in its own count', async () => {
    const settings = { model: 'm', backends: ['a'], slotsPerBackend: 5, maxQueue: 10, maxWaitMs: 1000, usable: () => true, elsewhere: () => 3 }
    const slots = new MemoryModelSlots(settings, clock, new RecordingObserver())
    const lease = await slots.acquire({ priority: 0, signal: new AbortController().signal, choose })
    expect(slots.inFlight('a')).toBe(1)
    expect(slots.load('a')).toBe(4)
    lease.release()
    slots.close()
  })

  it('counts a peer state’s leases on the same backend and hands it a slot its own queue does not take', async () => {
    // Two generations of one process after a reload: each state is the other's peer.
    const states: ReturnType<typeof buildMemoryState>[] = []
    const peerOf = (self: number): SlotPeers => ({
      held: (model, backend) => states[1 - self]!.slots.get(model)!.inFlight(backend),
      freed: (model) => states[1 - self]!.slots.get(model)!.wake(),
      keyHeld: () => 0,
      limit: () => null,
      headAhead: (model, rank) => states[1 - self]!.slots.get(model)!.headAhead?.(rank) ?? false,
      queued: (model) => states[1 - self]!.slots.get(model)!.queueDepth(),
      worst: () => null,
    })
    states.push(buildMemoryState(config(TWO_MODELS), () => true, clock, new RecordingObserver(), peerOf(0)))
    states.push(buildMemoryState(config(TWO_MODELS), () => true, clock, new RecordingObserver(), peerOf(1)))
    const [old, fresh] = states.map((state) => state.slots.get('small')!) as [ModelSlots, ModelSlots]
    const acquire = (slots: ModelSlots) => slots.acquire({ priority: 0, signal: new AbortController().signal, choose })

    const s1 = await acquire(old)
    const s2 = await acquire(old)
    expect([s1.backend, s2.backend]).toEqual(['s1', 's2'])
    // Both backends are full with the old state's requests: the fresh one queues.
    const waiting = acquire(fresh)
    expect(fresh.queueDepth()).toBe(1)
    s1.release()
    const lease = await waiting
    expect(lease.backend).toBe('s1')
    // And the old one counts the fresh one's lease.
    const oldWaiting = acquire(old)
    expect(old.queueDepth()).toBe(1)
    lease.release()
    expect((await oldWaiting).backend).toBe('s1')
    for (const state of states) state.close()
  })

  it('shares one key limiter across models', async () => {
    const state = buildMemoryState(config(TWO_MODELS), () => true, clock, new RecordingObserver())
    const ticket = await state.keys.admit('k', { max_concurrency: 1 })
    await expect(state.keys.admit('k', { max_concurrency: 1 })).rejects.toMatchObject({ reason: 'concurrency' })
    ticket.release()
    state.close()
  })
})

/**
 * A reload's two generations of one model on one backend, wired as generation-peers.ts wires them:
 * each counts the other's leases, wakes it when it frees a slot, and asks it who comes first.
 * `servingLimit`: the limit of the serving (fresh) generation, which the retiring one follows.
 */
function twoGenerations(oldLimit: number, servingLimit: number | (() => number), maxQueue = 10): { old: MemoryModelSlots; fresh: MemoryModelSlots } {
  const clock = { now: () => 0 }
  const pair: MemoryModelSlots[] = []
  const serving = typeof servingLimit === 'number' ? () => servingLimit : servingLimit
  const settings = (self: number, limit: number) => ({
    model: 'm',
    backends: ['a'],
    slotsPerBackend: limit,
    maxQueue,
    maxWaitMs: 60_000,
    usable: () => true,
    elsewhere: (backend: string) => pair[1 - self]!.inFlight(backend),
    onFreed: () => inTurn(() => pair[1 - self]!.wake()),
    peerAhead: (rank: { priority: number; arrivedAt: number }) => pair[1 - self]!.headAhead(rank),
    peerQueued: () => pair[1 - self]!.queueDepth(),
    peerWorst: () => {
      const other = pair[1 - self]!
      const rank = other.worstWaiter()
      return rank === undefined ? null : { rank, evict: () => other.evictWorst() }
    },
    limit: self === 0 ? serving : () => serving(),
  })
  pair.push(new MemoryModelSlots(settings(0, oldLimit), clock, new RecordingObserver()))
  pair.push(new MemoryModelSlots(settings(1, serving()), clock, new RecordingObserver()))
  return { old: pair[0]!, fresh: pair[1]! }
}

/** Asks `slots` for a slot as `name`, with its priority and arrival time; `granted` records the order. */
function ask(slots: ModelSlots, name: string, priority: number, arrivedAt: number, granted: string[]) {
  const choose = (names: readonly string[]) => names[0]!
  return slots.acquire({ priority, arrivedAt, signal: new AbortController().signal, choose }).then((lease) => (granted.push(name), lease))
}

// Regression (session 23 queue review): each generation served its own queue first, so after a
// reload a request of priority -10 ran after two of priority 5, and a raised limit let new
// arrivals take every slot while the waiters of before the reload timed out.
describe('two generations of one model after a reload', () => {
  it('are served as one queue: priority first, then arrival, whichever generation a waiter is in', async () => {
    const { old, fresh } = twoGenerations(1, 1)
    const granted: string[] = []
    const held = await ask(old, 'held', 0, 0, granted)
    const w1 = ask(old, 'w1', 5, 100, granted)
    const n1 = ask(fresh, 'n1', 5, 200, granted)
    const n2 = ask(fresh, 'n2', -10, 300, granted)
    expect([old.queueDepth(), fresh.queueDepth()]).toEqual([1, 2])

    held.release()
    ;(await n2).release()
    ;(await w1).release()
    ;(await n1).release()
    expect(granted).toEqual(['held', 'n2', 'w1', 'n1'])
  })

  it('the retiring generation\'s waiters run under the serving one\'s raised limit, before later arrivals of a worse priority', async () => {
    const { old, fresh } = twoGenerations(1, 3)
    const granted: string[] = []
    await ask(old, 'held', 0, 0, granted)
    const w1 = ask(old, 'w1', -5, 100, granted)
    const w2 = ask(old, 'w2', -5, 110, granted)
    // The reload: the serving generation's arrivals find the old waiters ahead of them.
    const n1 = ask(fresh, 'n1', 5, 200, granted)
    await Promise.all([w1, w2])
    expect(granted).toEqual(['held', 'w1', 'w2'])
    expect(fresh.queueDepth()).toBe(1)
    ;(await w1).release()
    await n1
    expect(granted).toEqual(['held', 'w1', 'w2', 'n1'])
  })

  // Session 23 diff review: each alternation between the generations nested one more call
  // (serve, wake the other, serve, wake back), and 3,000 such waiters overflowed the stack.
  it('a raised limit freeing thousands of slots for waiters that alternate between them: served in order, no deep recursion', async () => {
    let limit = 1
    const { old, fresh } = twoGenerations(1, () => limit, 20_000)
    const granted: string[] = []
    await ask(old, 'held', -1, 0, granted)
    const waiters: Promise<unknown>[] = []
    for (let i = 0; i < 5000; i++) {
      waiters.push(ask(old, `o${i}`, 2 * i, 10 + i, granted))
      waiters.push(ask(fresh, `f${i}`, 2 * i + 1, 10 + i, granted))
    }
    limit = 20_001
    old.wake()
    await Promise.all(waiters)
    expect(granted).toHaveLength(10_001)
    expect(granted.slice(0, 5)).toEqual(['held', 'o0', 'f0', 'o1', 'f1'])
    expect(granted.at(-1)).toBe('f4999')
  })

  it('are bounded together by max_size: the newest of the worst priority in either is turned away', async () => {
    const { old, fresh } = twoGenerations(1, 1, 2)
    const granted: string[] = []
    await ask(old, 'held', 0, 0, granted)
    const w1 = ask(old, 'w1', 5, 100, granted)
    const n1 = ask(fresh, 'n1', 5, 200, granted)
    // Full at two, across both: an arrival no better than any waiter is the one turned away.
    await expect(ask(fresh, 'n2', 5, 300, granted)).rejects.toMatchObject({ reason: 'queue_full' })
    await expect(ask(old, 'w2', 5, 310, granted)).rejects.toMatchObject({ reason: 'queue_full' })
    // A better one evicts the newest of the worst priority, here the fresh generation's own n1 ...
    const w3 = ask(old, 'w3', 0, 400, granted)
    await expect(n1).rejects.toMatchObject({ reason: 'queue_full' })
    // ... and then the old generation's w1, from the fresh generation's arrival.
    const n4 = ask(fresh, 'n4', 0, 500, granted)
    await expect(w1).rejects.toMatchObject({ reason: 'queue_full' })
    expect([old.queueDepth(), fresh.queueDepth()]).toEqual([1, 1])
    for (const slots of [old, fresh]) slots.close()
    await Promise.allSettled([w3, n4])
  })
})

describe('buildAdmissionState', () => {
  it('builds the memory state for state.kind memory, always reachable, exporting no sluice_redis_up', async () => {
    const metrics = createMetrics()
    const state = buildAdmissionState(config(TWO_MODELS), { usable: () => true, clock: { now: () => 0 }, observer: new RecordingObserver(), logger: pino({ level: 'silent' }), metrics })
    expect([...state.slots.keys()]).toEqual(['small', 'big'])
    expect(state.reachable()).toBe(true)
    expect(await metrics.registry.metrics()).not.toContain('sluice_redis_up')
    state.close()
    await state.disconnect()
  })
})
