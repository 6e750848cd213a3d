import { describe, expect, it } from 'vitest'
import { ClientDeparture } from '../../src/proxy/client-departure.js'

describe('ClientDeparture', () => {
  it('is not aborted until the client departs, then carries an AbortError reason', () => {
    const client = new ClientDeparture()
    expect(client.aborted).toBe(false)
    expect(client.reason).toBeUndefined()
    expect(() => client.throwIfAborted()).not.toThrow()
    client.depart()
    expect(client.aborted).toBe(true)
    expect(client.reason).toBeInstanceOf(Error)
    expect(client.reason!.name).toBe('AbortError')
    expect(() => client.throwIfAborted()).toThrow(client.reason!)
  })

  it('runs each listener once, in order, and not those removed', () => {
    const client = new ClientDeparture()
    const heard: string[] = []
    const removed = () => heard.push('removed')
    client.addEventListener('abort', () => heard.push('first'))
    client.addEventListener('abort', removed)
    client.addEventListener('abort', () => heard.push('second'))
    client.removeEventListener('abort', removed)
    client.depart()
    client.depart()
    expect(heard).toEqual(['first', 'second'])
  })

  it('keeps its first reason and never runs a listener added after the departure', () => {
    const client = new ClientDeparture()
    client.depart()
    const reason = client.reason
    let late = 0
    client.addEventListener('abort', () => late++)
    client.depart()
    expect(late).toBe(0)
    expect(client.reason).toBe(reason)
  })

  it('removing a listener that was never added changes nothing', () => {
    const client = new ClientDeparture()
    let heard = 0
    client.addEventListener('abort', () => heard++)
    client.removeEventListener('abort', () => heard++)
    client.depart()
    expect(heard).toBe(1)
  })
})
