/**
 * Small schema builders on top of TypeBox that produce error messages a
 * person can act on: enums as `enum` (one error naming the allowed values,
 * not one per literal) and nullable types as a type list (`integer or null`).
 */
import { Type, type Static, type TSchema, type TUnsafe } from 'typebox'

export function stringEnum<const T extends readonly string[]>(
  values: T,
  options: Record<string, unknown> = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })
}

/** `T|null` of the interface. Works for schemas that carry a single `type`. */
export function nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const plain = schema as unknown as { type?: unknown; enum?: unknown[] }
  if (typeof plain.type !== 'string') throw new Error('nullable() needs a schema with one type')
  const widened: Record<string, unknown> = { ...(schema as object), type: [plain.type, 'null'] }
  if (plain.enum) widened.enum = [...plain.enum, null]
  return Type.Unsafe<Static<T> | null>(widened)
}
