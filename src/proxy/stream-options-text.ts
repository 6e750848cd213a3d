/**
 * The `stream_options` a stream's backend gets when the gateway asks for
 * usage on the client's behalf (schemas/normalize-chat.ts) and the client
 * sent the object: its own members other than the two the gateway sets,
 * as the client wrote them, then `include_usage` and
 * `continuous_usage_stats`. Built from the parsed object, a member such as
 * 12345678901234567891 reached the backend rounded and `1.0` as `1` (a
 * splice review), where every other member goes as written.
 */
import { RawJson } from '../json/raw-json.js'
import { topLevelLayout, withoutByteOrderMark } from '../json/json-object-layout.js'

const SET_BY_GATEWAY = new Set(['include_usage', 'continuous_usage_stats'])

/** `fallback` (the object to serialize) when the bytes cannot be laid out, which the parser would have refused. */
export function streamOptionsText(received: Buffer | null, fallback: Readonly<Record<string, unknown>>): RawJson | Readonly<Record<string, unknown>> {
  if (received === null) return fallback
  const body = withoutByteOrderMark(received)
  const outer = topLevelLayout(body)
  // The last occurrence: the one JSON.parse kept, and so the one validated.
  const span = outer?.members.findLast((member) => member.name === 'stream_options')
  if (span === undefined) return fallback
  const object = body.subarray(span.start, span.end)
  const inner = topLevelLayout(object)
  if (inner === null) return fallback
  const members: string[] = []
  for (const member of inner.members) {
    if (!SET_BY_GATEWAY.has(member.name)) members.push(`${JSON.stringify(member.name)}:${object.toString('utf8', member.start, member.end)}`)
  }
  members.push('"include_usage":true', '"continuous_usage_stats":false')
  return new RawJson(`{${members.join(',')}}`)
}
