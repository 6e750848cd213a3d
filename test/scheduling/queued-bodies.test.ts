import { describe, expect, it } from 'vitest'
import { QueuedBodies } from '../../src/scheduling/queued-bodies.js'

describe('QueuedBodies', () => {
  it('takes up to its limit, counts nothing it refused, and frees what is released', () => {
    const budget = new QueuedBodies().budget(100)
    expect(budget.take(60)).toBe(true)
    expect(budget.take(41)).toBe(false)
    expect(budget.held).toBe(60)
    expect(budget.take(40)).toBe(true)
    expect(budget.held).toBe(100)
    budget.release(60)
    expect(budget.take(41)).toBe(true)
    expect(budget.held).toBe(81)
  })

  it('is one count for every view: a reload’s generations share the room, each by its own limit', () => {
    const bodies = new QueuedBodies()
    const old = bodies.budget(100)
    const fresh = bodies.budget(150)
    expect(old.take(90)).toBe(true)
    expect(fresh.take(50)).toBe(true)
    expect(fresh.take(11)).toBe(false)
    expect(old.take(1)).toBe(false)
    expect(bodies.held).toBe(140)
    old.release(90)
    expect(fresh.held).toBe(50)
    expect(old.take(50)).toBe(true)
  })
})
