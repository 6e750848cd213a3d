/**
 * fast-check arbitraries read off a JSON schema (the request schemas of
 * src/schemas are plain JSON Schema): values of the right type, enum and
 * range, with only a few optional members each, so that a mutation starts
 * from a request that is usually valid and the property covers both sides.
 */
import fc from 'fast-check'

export interface JsonSchema {
  readonly type?: string | readonly string[]
  readonly enum?: readonly unknown[]
  readonly properties?: Readonly<Record<string, JsonSchema>>
  readonly patternProperties?: Readonly<Record<string, JsonSchema>>
  readonly additionalProperties?: JsonSchema | boolean
  readonly required?: readonly string[]
  readonly items?: JsonSchema
  readonly minItems?: number
  readonly minLength?: number
  readonly minimum?: number
  readonly maximum?: number
  readonly pattern?: string
  readonly format?: string
}

/** A TypeBox schema as the plain JSON Schema it is. */
export function plainSchema(schema: unknown): JsonSchema {
  return JSON.parse(JSON.stringify(schema)) as JsonSchema
}

export interface SchemaArbitraryOptions {
  /** Replacement arbitraries for top-level members, by name. */
  readonly overrides?: Readonly<Record<string, fc.Arbitrary<unknown>>>
  /** At most this many optional members per object (default 3). */
  readonly maxOptional?: number
  /** Top-level optional members drawn more often than the rest (up to `maxOptional` more of them). */
  readonly favoured?: readonly string[]
}

/** A small JSON value of any kind. */
export const smallJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 2, depthSize: 'small' })

/** Strings that include lone surrogates, controls and astral characters now and then. */
export const anyString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.constantFrom('', ' ', '\u0000', '\r\n', '\ud800', '😀', '../..', '%2e%2e'),
)

const isoDateTime = fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((date) => date.toISOString())

export function schemaArbitrary(schema: JsonSchema, options: SchemaArbitraryOptions = {}, depth = 0): fc.Arbitrary<unknown> {
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum)
  const types = schema.type === undefined ? [] : typeof schema.type === 'string' ? [schema.type] : schema.type
  if (types.length === 0) return smallJson
  const arbitraries = types.map((type) => ofType(schema, type, options, depth))
  return arbitraries.length === 1 ? arbitraries[0]! : fc.oneof(...arbitraries)
}

function ofType(schema: JsonSchema, type: string, options: SchemaArbitraryOptions, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null)
    case 'boolean':
      return fc.boolean()
    case 'string':
      return stringFor(schema)
    case 'integer':
      return integerFor(schema)
    case 'number':
      return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: -1000, max: 1000 }))
    case 'array':
      return fc.array(schema.items === undefined ? smallJson : schemaArbitrary(schema.items, {}, depth + 1), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(schema.minItems ?? 0, 3),
      })
    case 'object':
      return objectFor(schema, options, depth)
    default:
      return smallJson
  }
}

function stringFor(schema: JsonSchema): fc.Arbitrary<string> {
  if (schema.pattern?.includes('[0-9a-fA-F]{8}') === true) return fc.uuid()
  if (schema.format === 'iso-date-time') return isoDateTime
  const minLength = schema.minLength ?? 0
  return anyString.filter((text) => text.length >= minLength)
}

function integerFor(schema: JsonSchema): fc.Arbitrary<number> {
  const low = Math.max(schema.minimum ?? -1_000_000, -1_000_000)
  const high = Math.min(schema.maximum ?? 1_000_000, 1_000_000)
  // The bounds themselves (which may be beyond 2^53, such as seed's) are the interesting values.
  const edges = [schema.minimum, schema.maximum, 0, 1, -1].filter(
    (value): value is number => value !== undefined && value >= (schema.minimum ?? -Infinity) && value <= (schema.maximum ?? Infinity),
  )
  return fc.oneof(fc.integer({ min: low, max: high }), fc.constantFrom(...edges))
}

function objectFor(schema: JsonSchema, options: SchemaArbitraryOptions, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {}
  const names = Object.keys(properties)
  const pattern = Object.values(schema.patternProperties ?? {})[0] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined)
  if (names.length === 0) {
    return fc.dictionary(fc.string({ maxLength: 6 }), pattern === undefined ? smallJson : schemaArbitrary(pattern, {}, depth + 1), { maxKeys: 3 })
  }
  const required = new Set(schema.required ?? [])
  const favoured = depth === 0 ? (options.favoured ?? []).filter((name) => names.includes(name) && !required.has(name)) : []
  const optional = names.filter((name) => !required.has(name) && !favoured.includes(name))
  const overrides = depth === 0 ? (options.overrides ?? {}) : {}
  const member = (name: string) => overrides[name] ?? schemaArbitrary(properties[name]!, {}, depth + 1)
  const most = options.maxOptional ?? 3
  const chosen = fc.tuple(fc.subarray(favoured, { maxLength: Math.min(favoured.length, most) }), fc.subarray(optional, { maxLength: Math.min(optional.length, most) }))
  return chosen.chain(([some, others]) => {
    const members = [...required, ...some, ...others]
    return fc.record(Object.fromEntries(members.map((name) => [name, member(name)])) as Record<string, fc.Arbitrary<unknown>>)
  })
}
