/**
 * FailoverModelSlots' local queue when Redis answers again, without Redis:
 * the shared slots are a recording stand-in and the link an event emitter
 * (the real ones are tested against redis-server in redis-store.test.ts).
 * Regression: a request queued locally during an outage was served on local
 * counts after Redis returned, while Redis handed the same freed slot to
 * another replica's waiter (two requests on a one-slot backend).
 */
import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { FailoverModelSlots, type AdoptingModelSlots } from '../../src/state/failover-model-slots.js'
import { MemoryModelSlots } from '../../src/state/memory-slots.js'
import type { RedisLink } from '../../src/state/redis-link.js'
import { RedisUnavailable } from '../../src/state/redis-unavailable.js'
import type { SlotLease, SlotRequest } from '../../src/state/store.js'
import { RecordingObserver } from './model-slots.contract.js'

class SharedStandIn implements AdoptingModelSlots {
  up = false
  /** Redis up but over the call budget: calls fail, the link stays up. */
  slow = false
  readonly acquired: SlotRequest[] = []
  async acquire(request: SlotRequest): Promise<SlotLease> {
    if (!this.up || this.slow) throw new RedisUnavailable('stand-in: Redis is away')
    this.acquired.push(request)
    return { backend: 'a', waitedMs: 0, release: () => undefined }
  }
  async tryAcquire(): Promise<SlotLease | null> {
    return null
  }
  adopt(): void {}
  releaseAdopted(): void {}
  wake(): void {}
  turnAway(): void {}
  queueDepth(): number {
    return 0
  }
  inFlight(): number {
    return 0
  }
  load(): number {
    return 0
  }
  close(): void {}
}

function setup(clock = { now: () => Date.now() }) {
  const shared = new SharedStandIn()
  const link = Object.assign(new EventEmitter(), { up: () => shared.up, newId: () => 'adopted-1' }) as unknown as RedisLink & EventEmitter
  const local = new MemoryModelSlots({ model: 'm', backends: ['a'], slotsPerBackend: 1, maxQueue: 10, maxWaitMs: 10_000, usable: () => true }, clock, new RecordingObserver())
  const slots = new FailoverModelSlots(shared, local, link, { clock })
  const comeBack = () => {
    shared.up = true
    link.emit('up')
  }
  return { shared, local, slots, comeBack }
}

const request = (signal: AbortSignal = new AbortController().signal): SlotRequest => ({ priority: 0, signal, choose: (names) => names[0]! })

describe('FailoverModelSlots when Redis answers again', () => {
  it('moves a request waiting in the local queue to Redis; the local slot that frees later takes no one', async () => {
    const { shared, local, slots, comeBack } = setup()
    const first = await slots.acquire(request())
    const second = slots.acquire(request())
    expect(local.queueDepth()).toBe(1)

    comeBack()
    const lease = await second
    expect(shared.acquired).toHaveLength(1)
    expect(local.queueDepth()).toBe(0)
    first.release()
    expect(local.inFlight('a')).toBe(0)
    lease.release()
    local.close()
  })

  // Regression (black-box review, 2026-11-28): each move between the queues restarted max_wait_ms.
  it('a request moved to Redis keeps the arrival it first asked at: one wait limit in all', async () => {
    let now = 1_000_000
    const { shared, local, slots, comeBack } = setup({ now: () => now })
    const first = await slots.acquire(request())
    const second = slots.acquire(request())
    now += 600
    comeBack()
    const lease = await second
    expect(shared.acquired.map((r) => r.arrivedAt)).toEqual([1_000_000])
    first.release()
    lease.release()
    local.close()
  })

  it('a client that left while waiting locally is not moved: its wait ends with its own reason', async () => {
    const { shared, local, slots, comeBack } = setup()
    const first = await slots.acquire(request())
    const client = new AbortController()
    const second = slots.acquire(request(client.signal))
    client.abort(new Error('client gone'))
    await expect(second).rejects.toThrow('client gone')
    comeBack()
    expect(shared.acquired).toHaveLength(0)
    first.release()
    local.close()
  })
})

describe('FailoverModelSlots load (what the balancer weighs)', () => {
  // Regression (review): with Redis up but slow, requests admitted on local limits were in no count
  // Redis had answered, and the balancer weighed every one of them on the same frozen figures.
  it('while Redis is up but too slow to answer, counts the requests admitted on local limits', async () => {
    const { shared, local, slots } = setup()
    shared.up = true
    shared.slow = true
    const lease = await slots.acquire(request())
    expect(local.inFlight('a')).toBe(1)
    expect(slots.load('a')).toBe(1)
    lease.release()
    local.close()
  })
})

// Regression (session 23 Redis review): a reload's two generations serve and bound their local
// queues as one while Redis is away, by asking each other; FailoverModelSlots answered nothing, so
// the other generation's waiters were never ahead, and never the worst.
describe('FailoverModelSlots asked by another generation about its local queue', () => {
  it('answers for its local queue: who is ahead, who is worst, and evicts that one', async () => {
    const { local, slots } = setup()
    const held = await slots.acquire(request())
    const waiting = slots.acquire({ ...request(), priority: 5, arrivedAt: 100 })
    expect(local.queueDepth()).toBe(1)

    expect(slots.worstWaiter()).toMatchObject({ priority: 5, arrivedAt: 100 })
    // Ahead of a worse rank only when it could be admitted now: not while the one slot is held.
    expect(slots.headAhead({ priority: 9, arrivedAt: 200 })).toBe(false)
    held.release()
    await waiting.then((lease) => lease.release())
    const again = await slots.acquire(request())
    const queued = slots.acquire({ ...request(), priority: 5, arrivedAt: 300 })
    slots.evictWorst()
    await expect(queued).rejects.toMatchObject({ reason: 'queue_full' })
    expect(slots.worstWaiter()).toBeUndefined()
    again.release()
    local.close()
  })
})
