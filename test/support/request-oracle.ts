/**
 * An oracle for the property tests: given the exact request a test sends,
 * says whether the gateway must forward it ('valid'), must refuse it with a
 * 4xx ('invalid'), or may do either ('either', where the contract leaves
 * room or a known defect is covered by its own test), and what a backend
 * must receive when it is forwarded. Written from DESIGN.md, README.md and
 * interface.md, not from the gateway's code: the request schemas (the
 * contract's field table as JSON Schema) are compiled by an Ajv of its own,
 * the cross-field rules and the normalization are restated here.
 */
import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { isIsoDateTime } from '../../src/schemas/iso-date-time.js'

export type VerdictKind = 'valid' | 'invalid' | 'either'

export interface Verdict {
  readonly kind: VerdictKind
  readonly why: string
}

export const valid: Verdict = { kind: 'valid', why: 'valid' }
export const invalid = (why: string): Verdict => ({ kind: 'invalid', why })
export const either = (why: string): Verdict => ({ kind: 'either', why })

/** The stricter verdict wins: invalid over either over valid. */
export function combine(...verdicts: Verdict[]): Verdict {
  return verdicts.find((v) => v.kind === 'invalid') ?? verdicts.find((v) => v.kind === 'either') ?? valid
}

function compile(schema: unknown, strictNumbers: boolean): ValidateFunction {
  const ajv = new Ajv({ strict: false, allErrors: false, coerceTypes: false, useDefaults: false, strictNumbers })
  addFormats.default(ajv, ['uuid', 'date-time'])
  ajv.addFormat('iso-date-time', { type: 'string', validate: isIsoDateTime })
  return ajv.compile(schema as object)
}

export interface SchemaOracle {
  check(value: unknown): Verdict
}

/**
 * Schema validity. `1e400` parses to Infinity: with strictNumbers Ajv says
 * it is no number, without it says it is one. Where the two disagree the
 * contract does not decide (a JSON number literal, out of double range),
 * so either answer is accepted.
 */
export function schemaOracle(schema: unknown): SchemaOracle {
  const strict = compile(schema, true)
  const lax = compile(schema, false)
  return {
    check(value) {
      const strictOk = strict(value)
      const laxOk = lax(value)
      if (strictOk && laxOk) return valid
      if (!strictOk && !laxOk) return invalid(`schema: ${JSON.stringify(strict.errors?.[0] ?? null)}`)
      return either('a non-finite number in a typed member')
    },
  }
}

/** True when a parsed JSON value has an own `__proto__`, or a `constructor` object with an own `prototype`. */
export function hasPrototypeKeys(value: unknown): boolean {
  const stack = [value]
  while (stack.length > 0) {
    const node = stack.pop()
    if (node === null || typeof node !== 'object') continue
    if (Object.hasOwn(node, '__proto__')) return true
    const ctor = Object.hasOwn(node, 'constructor') ? (node as { constructor: unknown }).constructor : undefined
    if (ctor !== null && typeof ctor === 'object' && Object.hasOwn(ctor, 'prototype')) return true
    for (const child of Object.values(node)) stack.push(child)
  }
  return false
}

export function hasNonFiniteNumber(value: unknown): boolean {
  const stack = [value]
  while (stack.length > 0) {
    const node = stack.pop()
    if (typeof node === 'number' && !Number.isFinite(node)) return true
    if (node !== null && typeof node === 'object') for (const child of Object.values(node)) stack.push(child)
  }
  return false
}

/** The deepest nesting the gateway accepts (README: "JSON limits"). */
export const MAX_JSON_DEPTH = 128

/** Objects and arrays allowed per byte of the body limit (README: "JSON limits"). */
export const BYTES_PER_JSON_CONTAINER = 16

/** Distinct object layouts (member names in order, from the start) allowed per byte of the body limit (README: "JSON limits"). */
export const BYTES_PER_JSON_LAYOUT = 64

/** The deepest nesting of objects and arrays, how many there are, and how many distinct layouts the objects have. */
function shapeOf(value: unknown): { depth: number; containers: number; layouts: number } {
  let deepest = 0
  let containers = 0
  // Each layout by its number, found by its parent layout's number and its last name.
  const layouts = new Map<string, number>()
  const stack: [unknown, number][] = [[value, 0]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (node === null || typeof node !== 'object') continue
    containers++
    deepest = Math.max(deepest, depth + 1)
    if (!Array.isArray(node)) addLayouts(layouts, Object.keys(node))
    for (const child of Object.values(node)) stack.push([child, depth + 1])
  }
  return { depth: deepest, containers, layouts: layouts.size }
}

/** Names that are array indices make no layout (README: "JSON limits"). */
const ARRAY_INDEX = /^(0|[1-9]\d{0,9})$/

function addLayouts(layouts: Map<string, number>, names: string[]): void {
  let parent = 0
  for (const name of names) {
    if (ARRAY_INDEX.test(name) && Number(name) <= 4294967294) continue
    const step = `${parent}:${name}`
    parent = layouts.get(step) ?? layouts.set(step, layouts.size + 1).size
  }
}

export type Transport = { readonly verdict: Verdict; readonly value?: undefined } | { readonly verdict: Verdict; readonly value: unknown }

/**
 * What HTTP and JSON say about a body, before any field is looked at:
 * Content-Type, size, encoding, syntax, prototype keys.
 */
export function transportVerdict(contentType: string | undefined, bytes: Buffer, bodyLimit: number): Transport {
  if (bytes.length > bodyLimit) return { verdict: invalid('over the body limit (413)') }
  const media = mediaVerdict(contentType)
  if (media.kind === 'invalid') return { verdict: media }
  const cautions: Verdict[] = [media]
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    // RFC 8259 §8.1: JSON between systems MUST be UTF-8.
    return { verdict: invalid('invalid UTF-8') }
  }
  if (text.startsWith('\ufeff')) {
    // RFC 8259 §8.1: a parser MAY ignore a byte order mark.
    text = text.slice(1)
    cautions.push(either('a byte order mark'))
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { verdict: invalid('not JSON') }
  }
  if (hasPrototypeKeys(value)) return { verdict: invalid('__proto__ or constructor.prototype key') }
  // The gateway's documented JSON limits (README): nesting depth, objects and arrays for the size, finite numbers.
  const shape = shapeOf(value)
  if (shape.depth > MAX_JSON_DEPTH) return { verdict: invalid(`nested deeper than ${MAX_JSON_DEPTH}`) }
  if (shape.containers > Math.floor(bodyLimit / BYTES_PER_JSON_CONTAINER)) return { verdict: invalid('more objects and arrays than the body limit allows') }
  if (shape.layouts > Math.floor(bodyLimit / BYTES_PER_JSON_LAYOUT)) return { verdict: invalid('more distinct object layouts than the body limit allows') }
  if (hasNonFiniteNumber(value)) return { verdict: invalid('a number beyond the double range') }
  return { verdict: combine(...cautions), value }
}

/** `application/json` is the contract; case and parameters are not (RFC 9110 §8.3.1 media types are case-insensitive). */
function mediaVerdict(contentType: string | undefined): Verdict {
  if (contentType === undefined) return invalid('no Content-Type (415)')
  const [type = '', ...params] = contentType.split(';')
  if (type.trim().toLowerCase() !== 'application/json') return invalid(`Content-Type ${contentType} (415)`)
  const exact = type.trim() === 'application/json' && params.every((p) => /^\s*charset=(utf-8|"utf-8")\s*$/i.test(p))
  return exact ? valid : either(`Content-Type ${contentType}`)
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
