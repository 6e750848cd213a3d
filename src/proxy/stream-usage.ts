/**
 * Token usage from chat answers: the `usage` of a JSON answer, and the usage
 * chunk of an event stream. When the gateway asked the backend for
 * `include_usage` on the client's behalf, the usage-only chunk and the
 * `"usage":null` members it causes are removed, so the client's stream is
 * what it would have been without the gateway.
 */
import { ByteSearch } from '../byte-search.js'

export interface TokenUsage {
  readonly prompt: number
  readonly completion: number
}

export function usageOf(value: unknown): TokenUsage | null {
  const usage = (value as { usage?: unknown } | null)?.usage
  if (usage === null || typeof usage !== 'object') return null
  const { prompt_tokens, completion_tokens } = usage as Record<string, unknown>
  return { prompt: tokenCount(prompt_tokens), completion: tokenCount(completion_tokens) }
}

/**
 * A count the backend reported, or 0 when it is not one. A negative count
 * once made the token counter throw while the answer was being settled: a
 * JSON answer became a 500 and a stream was never ended.
 */
function tokenCount(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0
}

/** A chat completion answer as the gateway reads it: its choices (for an estimate) and its usage (null when it reports none). */
export interface ReadCompletion {
  readonly choices: readonly unknown[]
  readonly usage: TokenUsage | null
}

/**
 * A chat completion answer, parsed once; `undefined` when the body is not
 * a completion at all: not JSON, or not an object with a `choices` array
 * (a client library would take `[1,2]` for a completion and fail later,
 * far from the cause).
 */
export function readCompletion(body: Buffer): ReadCompletion | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString('utf8'))
  } catch {
    return undefined
  }
  const choices = (parsed as { choices?: unknown } | null)?.choices
  if (typeof parsed !== 'object' || parsed === null || !Array.isArray(choices)) return undefined
  return { choices, usage: usageOf(parsed) }
}


const USAGE_KEY = Buffer.from('"usage":')
/** Looked for in every streamed event: see byte-search.ts for why not Buffer's indexOf. */
const USAGE_KEY_SEARCH = new ByteSearch(USAGE_KEY)
/**
 * A delta with generated text, reasoning or a tool call: the role-only first
 * chunk does not count. Spaces allowed where JSON allows them (Python's
 * json.dumps writes `"content": "Hi"`; vLLM itself writes compact JSON).
 */
const CONTENT_DELTA = /"(?:content|reasoning_content|reasoning)"\s*:\s*"[^"]|"tool_calls"\s*:\s*\[\s*\{/

/** Whether an event carries generated output (for time to first token). */
export function carriesContent(event: Buffer): boolean {
  return CONTENT_DELTA.test(event.toString('utf8'))
}
/**
 * Between the members: JSON's whitespace, or a line break and the next
 * line's `data:` (a backend may split one event's JSON over several data
 * lines, which the SSE spec joins with a newline; a review saw the member
 * left in when it began such a line).
 */
const GAP = String.raw`(?:\s|(?<=[\r\n])data: ?)*`
const TRAILING_NULL_USAGE = new RegExp(String.raw`,${GAP}"usage"${GAP}:${GAP}null${GAP}\}(?:\r\n\r\n|\n\n|\r\r)$`)

export interface EventVerdict {
  /** The event as the client gets it; null to drop it. */
  readonly forward: Buffer | null
  readonly usage: TokenUsage | null
}

const NULL_CLOSE = Buffer.from('null}')
const COMMA = 0x2c
const LF = 0x0a
const CR = 0x0d

/** How nearly every chunk of a stream with include_usage ends, as vLLM writes it: one line, LF-framed. */
const NULL_USAGE_TAIL = Buffer.from(',"usage":null}\n\n')
/** What is left of that tail once `,"usage":null` is cut out. */
const CLOSE_EVENT = Buffer.from('}\n\n')

/** Looks at one whole SSE event. Cheap for the common cases: no `"usage":` in it, or a trailing `"usage":null`. */
export function inspectEvent(event: Buffer, stripInjectedUsage: boolean): EventVerdict {
  if (endsInNullUsage(event)) return { forward: stripInjectedUsage ? withoutNullUsage(event) : event, usage: null }
  const at = USAGE_KEY_SEARCH.firstIn(event)
  if (at < 0) return { forward: event, usage: null }
  const nullUsageEnd = trailingNullUsageEnd(event, at)
  if (nullUsageEnd >= 0) {
    // Every chunk of a stream with include_usage ends so: no JSON parse for it.
    if (!stripInjectedUsage) return { forward: event, usage: null }
    return { forward: Buffer.concat([event.subarray(0, at - 1), event.subarray(nullUsageEnd)]), usage: null }
  }
  const text = event.toString('utf8')
  const data = dataOf(text)
  let parsed: unknown
  try {
    parsed = data === null ? null : JSON.parse(data)
  } catch {
    return { forward: event, usage: null }
  }
  const usage = usageOf(parsed)
  if (!stripInjectedUsage) return { forward: event, usage }
  const choices = (parsed as { choices?: unknown } | null)?.choices
  if (usage !== null && Array.isArray(choices) && choices.length === 0) return { forward: null, usage }
  if (usage === null) {
    const cut = withoutTrailingNullUsage(event)
    if (cut !== null) return { forward: cut, usage: null }
  }
  return { forward: event, usage }
}

/**
 * The event less a trailing `, "usage": null` however it is spaced, cut out
 * of the bytes: through a decoded string, bytes that are not UTF-8 would
 * come out as U+FFFD. Matched on latin1 text, where a character is a byte.
 */
function withoutTrailingNullUsage(event: Buffer): Buffer | null {
  const text = event.toString('latin1')
  const match = TRAILING_NULL_USAGE.exec(text)
  if (match === null) return null
  const close = text.lastIndexOf('}')
  return Buffer.concat([event.subarray(0, match.index), event.subarray(close)])
}

/**
 * The event is one line ending in `,"usage":null}` + LF LF and holds no
 * other `"usage":`. It runs for every streamed chunk, so the tail is
 * compared byte by byte before anything scans the event; other framings
 * (CRLF) take trailingNullUsageEnd's path.
 */
function endsInNullUsage(event: Buffer): boolean {
  const tailAt = event.length - NULL_USAGE_TAIL.length
  if (tailAt < 0) return false
  for (let i = 0; i < NULL_USAGE_TAIL.length; i++) if (event[tailAt + i] !== NULL_USAGE_TAIL[i]) return false
  return event.indexOf(LF) === event.length - 2 && USAGE_KEY_SEARCH.firstIn(event) === tailAt + 1
}

/** The event with its trailing `,"usage":null` cut out. */
function withoutNullUsage(event: Buffer): Buffer {
  const keep = event.length - NULL_USAGE_TAIL.length
  const out = Buffer.allocUnsafe(keep + CLOSE_EVENT.length)
  event.copy(out, 0, 0, keep)
  CLOSE_EVENT.copy(out, keep)
  return out
}

/**
 * Where `,"usage":null` ends when it is the last member of a one-line
 * `data:` event (`at` is where `"usage":` starts), else -1. A second
 * `"usage":` anywhere (say in a key) or a multi-line event takes the slow
 * path, which parses the JSON.
 */
function trailingNullUsageEnd(event: Buffer, at: number): number {
  const valueAt = at + USAGE_KEY.length
  if (event[at - 1] !== COMMA || event.lastIndexOf(USAGE_KEY) !== at) return -1
  if (event.indexOf(NULL_CLOSE, valueAt) !== valueAt) return -1
  const close = valueAt + NULL_CLOSE.length - 1
  const tail = event.subarray(close + 1).toString('latin1')
  if (tail !== '\n\n' && tail !== '\r\n\r\n' && tail !== '\r\r') return -1
  // One line: the first line break is the terminator's.
  return firstLineBreak(event) > close ? valueAt + 'null'.length : -1
}

function firstLineBreak(event: Buffer): number {
  const lf = event.indexOf(LF)
  const cr = event.indexOf(CR)
  return lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr)
}

/** The payload of an event's `data:` lines (joined by newlines, per the SSE spec). */
export function dataOf(event: string): string | null {
  const lines = event.split(/\r\n|\r|\n/).filter((line) => line.startsWith('data:'))
  if (lines.length === 0) return null
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n')
}
