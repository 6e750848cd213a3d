/**
 * A backend's error reported inside a stream. vLLM, when generation fails
 * after its 200 and headers went out, writes its error body as one more
 * event and then `data: [DONE]`, in either of its two shapes (DESIGN.md):
 * `{"object": "error", "message": ..., "type": ..., "code": 400}` before
 * 0.10.1, `{"error": {"message": ..., "type": ..., "code": 400}}` after,
 * spaced as Python's json.dumps writes it. The event reaches the client
 * unchanged; the gateway only notes it, since the status it logged is 200.
 *
 * Looked for in every streamed event whose first line is its `data:` line
 * (as vLLM writes them; an error event with an `event:` or `id:` line first
 * is passed on but not noted), so the common case is decided on the first
 * bytes: a chat chunk does not start with `{"error"` or `{"object":"error"`
 * (vLLM writes `"id"` first), and only an event that does is parsed.
 */
import { bytesAt } from '../bytes-at.js'
import { dataOf } from './stream-usage.js'

export interface ErrorEvent {
  /** The error's `type` (vLLM: BadRequestError, InternalServerError, ...), when it is a short word. */
  readonly type: string | null
  /** Its `code` (vLLM: the HTTP status it stands for), when it is a number. */
  readonly code: number | null
}

const SPACE = 0x20
const TAB = 0x09
const OPEN_BRACE = 0x7b
const COLON = 0x3a
const DATA_FIELD_LENGTH = 'data:'.length
/** The key of the newer shape, and the `object` value of the older one. */
const QUOTED_ERROR = Buffer.from('"error"')
const OBJECT_KEY = Buffer.from('"object"')
/** Only a word-like type is kept for a log line: a message-sized one may carry the prompt. */
const TYPE_WORD = /^[A-Za-z0-9_.-]{1,64}$/

/** The error a `data:` event carries, or null (nearly always: it is a chunk, usage or a comment). */
export function errorEventOf(event: Buffer): ErrorEvent | null {
  if (!startsLikeErrorBody(event)) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(dataOf(event.toString('utf8')) ?? '')
  } catch {
    return null
  }
  if (typeof parsed !== 'object' || parsed === null) return null
  const body = parsed as Record<string, unknown>
  const error = body.object === 'error' ? body : body.error
  if (typeof error !== 'object' || error === null || Array.isArray(error)) return null
  const { type, code } = error as Record<string, unknown>
  return { type: typeof type === 'string' && TYPE_WORD.test(type) ? type : null, code: typeof code === 'number' && Number.isFinite(code) ? code : null }
}

/**
 * `data:`, then `{` and the key `"error"`, or `{"object": "error"` (spaces
 * allowed between tokens). A server whose chunks start with `"object"` has
 * its value compared too, so its chunks are not parsed.
 */
function startsLikeErrorBody(event: Buffer): boolean {
  let at = skipSpaces(event, DATA_FIELD_LENGTH)
  if (event[at] !== OPEN_BRACE) return false
  at = skipSpaces(event, at + 1)
  if (bytesAt(event, QUOTED_ERROR, at)) return true
  if (!bytesAt(event, OBJECT_KEY, at)) return false
  at = skipSpaces(event, at + OBJECT_KEY.length)
  if (event[at] !== COLON) return false
  return bytesAt(event, QUOTED_ERROR, skipSpaces(event, at + 1))
}

function skipSpaces(event: Buffer, from: number): number {
  let at = from
  while (event[at] === SPACE || event[at] === TAB) at++
  return at
}

