/**
 * closeIfUnread's verdicts over a stand-in response: bytes waiting, a
 * 'drain', the end. Fake timers step the checks; no socket is involved.
 */
import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { closeIfUnread } from '../../src/proxy/stalled-reader.js'

const IDLE_MS = 1000

class FakeResponse extends EventEmitter {
  writableLength = 0
  writableEnded = false
  writableFinished = false
  destroyed = false
  destroy(): void {
    this.destroyed = true
    this.emit('close')
  }
}

function watched(response: FakeResponse): { closed: () => number } {
  let closed = 0
  closeIfUnread(response as unknown as ServerResponse, IDLE_MS, () => closed++)
  return { closed: () => closed }
}

beforeEach(() => vi.useFakeTimers())
afterEach(() => vi.useRealTimers())

describe('closeIfUnread', () => {
  it('closes a connection whose waiting bytes did not move over a whole check', () => {
    const response = new FakeResponse()
    response.writableLength = 500
    const watch = watched(response)
    vi.advanceTimersByTime(IDLE_MS - 1)
    expect(response.destroyed).toBe(false)
    vi.advanceTimersByTime(1)
    expect(response.destroyed).toBe(true)
    expect(watch.closed()).toBe(1)
  })

  // Regression (flow review, session 27): a piped answer's bytes, none waiting when the guard began, were first
  // seen a whole check later, and a client that read nothing was let go only after twice idleMs.
  it('closes a connection within a quarter of idleMs past idleMs of bytes waiting that began after it was watched', () => {
    const response = new FakeResponse()
    const watch = watched(response)
    vi.advanceTimersByTime(IDLE_MS / 10)
    response.writableLength = 64 * 1024
    vi.advanceTimersByTime(IDLE_MS - 1)
    expect(response.destroyed).toBe(false)
    vi.advanceTimersByTime(IDLE_MS / 4 + 1)
    expect(response.destroyed).toBe(true)
    expect(watch.closed()).toBe(1)
  })

  // Regression (diff review, session 27): the clock started at the second check after the last progress.
  it('closes a connection within a quarter of idleMs past idleMs of its reader\u2019s last progress', () => {
    const response = new FakeResponse()
    response.writableLength = 1000
    const watch = watched(response)
    vi.advanceTimersByTime(IDLE_MS / 4 + 1)
    response.writableLength = 900
    vi.advanceTimersByTime(IDLE_MS - 1)
    expect(response.destroyed).toBe(false)
    vi.advanceTimersByTime(IDLE_MS / 4)
    expect(response.destroyed).toBe(true)
    expect(watch.closed()).toBe(1)
  })

  it('keeps a reader that takes some bytes between checks', () => {
    const response = new FakeResponse()
    response.writableLength = 500
    watched(response)
    for (let left = 400; left >= 0; left -= 100) {
      response.writableLength = left
      vi.advanceTimersByTime(IDLE_MS)
    }
    vi.advanceTimersByTime(5 * IDLE_MS)
    expect(response.destroyed).toBe(false)
  })

  it("keeps a pipe's reader that caught up ('drain') although the writer refilled as much", () => {
    const response = new FakeResponse()
    watched(response)
    response.writableLength = 64 * 1024
    vi.advanceTimersByTime(IDLE_MS)
    response.emit('drain')
    vi.advanceTimersByTime(IDLE_MS)
    expect(response.destroyed).toBe(false)
    // Then it stops reading: no drain, the same bytes waiting.
    vi.advanceTimersByTime(IDLE_MS)
    expect(response.destroyed).toBe(true)
  })

  it('does not blame the client for an upstream that sends nothing: no bytes waiting, no close', () => {
    const response = new FakeResponse()
    watched(response)
    vi.advanceTimersByTime(10 * IDLE_MS)
    expect(response.destroyed).toBe(false)
    // Bytes that just arrived get a whole check before they count as unread.
    response.writableLength = 10
    vi.advanceTimersByTime(IDLE_MS)
    expect(response.destroyed).toBe(false)
  })

  it('stops checking once the answer finished or the connection closed', () => {
    const finished = new FakeResponse()
    finished.writableLength = 500
    watched(finished)
    finished.writableFinished = true
    vi.advanceTimersByTime(3 * IDLE_MS)
    expect(finished.destroyed).toBe(false)
    expect(vi.getTimerCount()).toBe(0)

    const gone = new FakeResponse()
    gone.writableLength = 500
    watched(gone)
    gone.emit('close')
    expect(vi.getTimerCount()).toBe(0)
    expect(gone.listenerCount('drain')).toBe(0)
  })

  it('arms no timer for a whole answer the socket already took', () => {
    const response = new FakeResponse()
    response.writableEnded = true
    watched(response)
    expect(vi.getTimerCount()).toBe(0)
  })
})
