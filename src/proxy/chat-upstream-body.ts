/**
 * The bytes a backend receives for a chat request. The normalized body
 * (schemas/normalize-chat.ts) differs from the client's in a few top-level
 * members: the ones the gateway added (the request id, a mirrored
 * `max_completion_tokens`, `stream_options`, a missing model) and the ones
 * it changed (the served model name). Those are spliced into the client's
 * own bytes; everything else goes as received, numbers and escapes
 * included (a re-serialized body rounded a seed past 2^53). The cost grows
 * with the members changed, not with the prompt: for a 100-byte body it is
 * what JSON.stringify cost (~11,000 instructions, `npm run bench --
 * instructions`), for a 200 KB one a fifteenth. A changed member the
 * client sent twice gets the new value in both places (serializing the
 * parsed body instead rounded the rest's numbers). Only bytes that cannot
 * be laid out, which the parser would have refused, are serialized.
 */
import { CLOSE_BRACE, isJsonWhitespace, OPEN_BRACE } from '../json/json-bytes.js'
import { topLevelLayout, withoutByteOrderMark, type MemberSpan } from '../json/json-object-layout.js'
import { MemberRewrite } from '../json/member-rewrite.js'

type JsonObject = Readonly<Record<string, unknown>>

/**
 * `received`: the client's body as received, which parsed to `sent`;
 * `changes`: the top-level members the backend's body sets
 * (schemas/normalize-chat.ts), whether the client sent them or not.
 */
export function upstreamChatBody(received: Buffer | null, sent: JsonObject, changes: JsonObject): Buffer | string {
  const diff = received === null ? null : memberDiff(sent, changes)
  if (received === null || diff === null) return serialized(sent, changes)
  const raw = withoutByteOrderMark(received)
  if (diff.changed.length === 0) return diff.added.length === 0 ? raw : (withMembersAppended(raw, diff.added, changes) ?? serialized(sent, changes))
  return spliced(raw, diff, changes) ?? serialized(sent, changes)
}

/** The whole normalized body, serialized: members keep their place, added ones come last. */
function serialized(sent: JsonObject, changes: JsonObject): string {
  return JSON.stringify(Object.assign({}, sent, changes))
}

interface MemberDiff {
  readonly added: readonly string[]
  readonly changed: readonly string[]
}

/** Which of the changes add a member and which replace one the client sent (a change to the same value is none); null when one is undefined. */
function memberDiff(sent: JsonObject, changes: JsonObject): MemberDiff | null {
  const added: string[] = []
  const changed: string[] = []
  for (const name in changes) {
    const value = changes[name]
    // JSON.stringify would leave such a member out; the splice cannot.
    if (value === undefined) return null
    // Own members only: `valueOf` or `toString` read through the prototype are not the client's.
    if (!Object.hasOwn(sent, name)) added.push(name)
    else if (sent[name] !== value) changed.push(name)
  }
  return { added, changed }
}

/**
 * The common case: nothing the client sent changed, so the new members go
 * before the closing brace, found from the end without laying out the body.
 */
function withMembersAppended(raw: Buffer, added: readonly string[], changes: JsonObject): Buffer | null {
  // Past the closing brace there is only whitespace: a few bytes from the end.
  let close = raw.length - 1
  while (close >= 0 && raw[close] !== CLOSE_BRACE) close--
  if (close < 0) return null
  return Buffer.concat([raw.subarray(0, close), Buffer.from(`${members(added, changes, isEmptyBefore(raw, close))}}`)])
}

/** Replaces the values of changed members in place, then appends the added ones. */
function spliced(raw: Buffer, diff: MemberDiff, changes: JsonObject): Buffer | null {
  const layout = topLevelLayout(raw)
  if (layout === null) return null
  const replaced: MemberSpan[] = []
  for (const name of diff.changed) {
    // Every occurrence of a repeated name gets the new value: the backend's parser may keep the first or the last.
    const before = replaced.length
    for (const member of layout.members) if (member.name === name) replaced.push(member)
    if (replaced.length === before) return null
  }
  replaced.sort((a, b) => a.start - b.start)
  const parts: Buffer[] = []
  let from = 0
  for (const span of replaced) {
    parts.push(raw.subarray(from, span.start), Buffer.from(replacementText(changes[span.name], raw.subarray(span.start, span.end))))
    from = span.end
  }
  parts.push(raw.subarray(from, layout.close), Buffer.from(`${members(diff.added, changes, layout.members.length === 0)}}`))
  return Buffer.concat(parts)
}

/** `,"name":value` for each name (no comma before the first when the object was empty). */
function members(names: readonly string[], changes: JsonObject, first: boolean): string {
  let text = ''
  for (const name of names) text += `${first && text === '' ? '' : ','}${jsonText(name)}:${jsonText(changes[name])}`
  return text
}

/** The text that replaces a member's value `clientBytes`: a rewrite of those bytes, or the new value's. */
function replacementText(value: unknown, clientBytes: Buffer): string {
  if (value instanceof MemberRewrite) return value.rewrite(clientBytes) ?? JSON.stringify(value.fallback)
  return jsonText(value)
}

/** JSON.stringify, with the shortcut the members the gateway adds take (each call of it costs ~1,400 instructions). */
function jsonText(value: unknown): string {
  if (typeof value === 'string' && needsNoEscape(value)) return `"${value}"`
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  return JSON.stringify(value)
}

/** Whether only whitespace lies between the opening brace and the closing one at `close`. */
function isEmptyBefore(raw: Buffer, close: number): boolean {
  let i = close - 1
  while (i >= 0 && isJsonWhitespace(raw[i])) i--
  return raw[i] === OPEN_BRACE
}

/** Whether JSON.stringify would write the string as it is: no quote, backslash, control character or surrogate. */
function needsNoEscape(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff)) return false
  }
  return true
}
