/**
 * interface.md bounds `seed` at ±9223372036854776000 and
 * `truncate_prompt_tokens` at 9223372036854776000; `priority`, which it
 * leaves unbounded, has vLLM's int64 range (a value outside it was queued,
 * ahead of everyone, and then refused by the backend). All past 2^53, where the
 * doubles JSON.parse gives cannot tell a value inside from one just outside
 * (9223372036854776001 reads as 9223372036854776000). The schema passed such
 * a value while the backend got the client's own digits
 * (proxy/chat-upstream-body.ts), so a value that large written as a plain
 * integer is checked again here, on its digits. Other spellings (`1e19`,
 * `9.2e18`) are read as doubles by any JSON parser: for `seed` and
 * `truncate_prompt_tokens` the schema's check of the double is the
 * interface's; for `priority` a double of 2^63 or more in magnitude is
 * refused here, as vLLM's pydantic refuses such a float as an int64 (the
 * schema's bound, 2^63 - 1 as a double, is 2^63: `9223372036854775808.0`
 * and `-9223372036854775809.0` passed, a code review).
 */
import { topLevelLayout, type ObjectLayout } from '../json/json-object-layout.js'

export interface IntegerBounds {
  readonly min: bigint
  readonly max: bigint
  /** An int64 that vLLM reads from a float too: any spelling but a plain integer must be below 2^63 in magnitude. */
  readonly int64?: boolean
}

const INT64_LIMIT = 2 ** 63

export const WIDE_INTEGER_BOUNDS = {
  seed: { min: -9223372036854776000n, max: 9223372036854776000n },
  truncate_prompt_tokens: { min: -1n, max: 9223372036854776000n },
  priority: { min: -(2n ** 63n), max: 2n ** 63n - 1n, int64: true },
} as const satisfies Readonly<Record<string, IntegerBounds>>

export interface BoundViolation {
  readonly param: string
  readonly message: string
}

/** Below this a double holds every integer exactly, and the schema's check was exact. */
const EXACT_DOUBLE_LIMIT = 2 ** 53
const PLAIN_INTEGER = /^-?(?:0|[1-9][0-9]*)$/

/** `raw`: the body's bytes, which parsed to `body`. The first wide member out of its bounds, or null. */
export function findWideIntegerViolation(raw: Uint8Array | null, body: Readonly<Record<string, unknown>>, bounds: Readonly<Record<string, IntegerBounds>> = WIDE_INTEGER_BOUNDS): BoundViolation | null {
  let layout: ObjectLayout | null | undefined
  for (const name in bounds) {
    const value = body[name]
    if (raw === null || typeof value !== 'number' || Math.abs(value) < EXACT_DOUBLE_LIMIT) continue
    layout ??= topLevelLayout(raw)
    const digits = layout === null ? null : lastValueText(raw, layout, name)
    const { min, max, int64 } = bounds[name]! as IntegerBounds
    if (digits === null || !PLAIN_INTEGER.test(digits)) {
      if (int64 === true && Math.abs(value) >= INT64_LIMIT) return { param: name, message: `must be from ${min} to ${max} (written other than as a plain integer, below 2^63 in magnitude)` }
      continue
    }
    const exact = BigInt(digits)
    if (exact > max) return { param: name, message: `must be <= ${max}` }
    if (exact < min) return { param: name, message: `must be >= ${min}` }
  }
  return null
}

/** The text of the member's value; the last one when the name repeats, as JSON.parse keeps the last. */
function lastValueText(raw: Uint8Array, layout: ObjectLayout, name: string): string | null {
  for (let i = layout.members.length - 1; i >= 0; i--) {
    const member = layout.members[i]!
    if (member.name === name) return Buffer.from(raw.buffer, raw.byteOffset + member.start, member.end - member.start).toString('latin1')
  }
  return null
}
