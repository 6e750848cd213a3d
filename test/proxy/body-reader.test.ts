import { PassThrough, Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { readBody } from '../../src/proxy/body-reader.js'

/** Reads `chunks` through readBody; the body, or the error's code. */
function read(chunks: readonly (Buffer | string)[], announced: string | undefined, limit: number): Promise<Buffer | string> {
  return new Promise((resolve) => readBody(Readable.from(chunks), announced, limit, (error, body) => resolve(error === null ? body! : String((error as Error & { code?: string }).code))))
}

describe('readBody', () => {
  // Regression (audit): fastify's reader kept every chunk; 1-byte chunks cost ~390 bytes of memory per byte.
  it('joins a body sent a byte at a time, past its first buffer, into the same bytes', async () => {
    const text = JSON.stringify({ content: 'x'.repeat(200_000) })
    const body = await read([...text].map((c) => Buffer.from(c)), undefined, 1 << 20)
    expect(Buffer.isBuffer(body) && body.toString()).toBe(text)
  })

  it('takes a body exactly at the limit, announced or not', async () => {
    expect((await read(['abcd'], '4', 4)).toString()).toBe('abcd')
    expect((await read(['ab', 'cd'], undefined, 4)).toString()).toBe('abcd')
  })

  it('refuses a body over the limit, announced (without reading) or counted', async () => {
    expect(await read(['abcde'], '5', 4)).toBe('FST_ERR_CTP_BODY_TOO_LARGE')
    expect(await read(['abc', 'de'], undefined, 4)).toBe('FST_ERR_CTP_BODY_TOO_LARGE')
  })

  it('refuses a body shorter than its Content-Length', async () => {
    expect(await read(['abc'], '5', 10)).toBe('FST_ERR_CTP_INVALID_CONTENT_LENGTH')
  })

  it('ends a read cut off midway with the given error, once: bytes and an end after it change nothing', () => {
    const payload = new PassThrough()
    const outcomes: (Error | Buffer | null)[] = []
    const cutOff = readBody(payload, '10', 100, (error, body) => outcomes.push(error ?? body ?? null))
    payload.write('abc')
    const reason = new Error('shutting down')
    cutOff(reason)
    payload.end('defghij')
    cutOff(new Error('again'))
    expect(outcomes).toEqual([reason])
  })

  // The listeners are removed only when the read stops before the stream's end (each removal is ~1,000
  // instructions, three per request); after the end the stream emits no more data.
  it('stops listening when it stops early, and leaves an ended stream as it is', async () => {
    const early = new PassThrough()
    readBody(early, undefined, 4, () => undefined)
    early.write('abcde')
    expect(early.listenerCount('data')).toBe(0)
    expect(early.listenerCount('end')).toBe(0)

    const whole = new PassThrough()
    const read = new Promise<Error | null>((resolve) => readBody(whole, '3', 10, (error) => resolve(error)))
    whole.end('abc')
    expect(await read).toBeNull()
    // An error after the end reaches the reader's listener (not an unhandled 'error'), which settles nothing twice.
    expect(() => whole.emit('error', new Error('late'))).not.toThrow()
  })

  it('reads an empty body as empty', async () => {
    expect((await read([], '0', 10)).length).toBe(0)
  })
})
