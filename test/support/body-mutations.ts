/**
 * Hostile request bodies for property tests: a valid body, then mutations
 * (replace any member with any JSON value, drop members, add `__proto__` /
 * `constructor` / `prototype` keys, deep nesting, arrays near the body
 * limit, extreme numbers written as raw JSON text, duplicated keys, invalid
 * UTF-8 bytes), then exact bytes. Raw text (numbers like 1e400, escaped
 * keys, nesting deeper than JSON.stringify can go) is spliced in through
 * placeholder strings, so the test never has to build it as a JS value.
 */
import fc from 'fast-check'
import { smallJson } from './schema-arbitrary.js'

export type Mutation =
  | { readonly kind: 'replace'; readonly pick: number; readonly value: unknown }
  | { readonly kind: 'root'; readonly value: unknown }
  | { readonly kind: 'drop'; readonly pick: number }
  | { readonly kind: 'poison'; readonly pick: number; readonly key: string; readonly value: unknown }
  | { readonly kind: 'nest'; readonly pick: number; readonly depth: number; readonly shape: 'array' | 'object' }
  | { readonly kind: 'huge'; readonly pick: number; readonly element: string; readonly target: number }
  | { readonly kind: 'number'; readonly pick: number; readonly text: string }
  | { readonly kind: 'badUtf8'; readonly pick: number; readonly bytes: readonly number[] }

export interface BodySpec {
  readonly base: unknown
  readonly mutations: readonly Mutation[]
  /** Raw `"key":value` text added at the start or end of the top-level object. */
  readonly duplicate: { readonly key: string; readonly value: string; readonly first: boolean } | null
  /** Invalid UTF-8 bytes inserted at a raw offset (usually breaking the JSON). */
  readonly strayBytes: { readonly at: number; readonly bytes: readonly number[] } | null
  readonly padding: { readonly before: string; readonly after: string }
}

/** Numbers at and past the edges of doubles and int64, as JSON text. */
export const EXTREME_NUMBERS = [
  '1e400',
  '-1e400',
  '1e-400',
  '-0',
  '0.0',
  '1.0',
  '1E2',
  '4.9e-324',
  '1.7976931348623157e308',
  '2e308',
  '9007199254740993',
  '9223372036854775807',
  '-9223372036854775808',
  '9223372036854775808',
  '9223372036854777856',
  '-9223372036854777856',
  '123456789012345678901234567890',
  '-1',
  '1.5',
]

/** Keys that poison prototypes, some written with JSON escapes. */
export const POISON_KEYS = ['"__proto__"', '"constructor"', '"prototype"', '"\\u005f\\u005fproto\\u005f\\u005f"', '"__pro\\u0074o__"', '"\\u0063onstructor"']

const INVALID_UTF8 = [[0xff], [0xfe], [0x80], [0xc0, 0x80], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]

export interface MutationLimits {
  /** Deepest nesting generated (JSON.stringify overflows the stack somewhere past 4,000). */
  readonly maxDepth: number
  /** The gateway's body limit: huge arrays aim just under and just over it. */
  readonly bodyLimit: number
}

export function mutationArbitrary(limits: MutationLimits): fc.Arbitrary<Mutation> {
  const pick = fc.nat()
  const anyValue = fc.oneof(smallJson, fc.constantFrom<unknown>(null, true, false, 0, -1, '', [], {}, 'm', 1e308, -1e-308, Number.MAX_SAFE_INTEGER))
  return fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('replace' as const), pick, value: anyValue }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('root' as const), value: anyValue }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('poison' as const),
        pick,
        key: fc.constantFrom(...POISON_KEYS),
        value: fc.oneof(anyValue, fc.constant({ prototype: { polluted: true } }), fc.constant({ polluted: true })),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('nest' as const), pick, depth: fc.integer({ min: 1, max: limits.maxDepth }), shape: fc.constantFrom('array' as const, 'object' as const) }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('huge' as const),
        pick,
        element: fc.constantFrom('0', '"x"', 'null', '{}', '[]', '1e400', '-9223372036854775808', '{"role":"user","content":"x"}', '"\\ud800"'),
        target: fc.oneof(fc.integer({ min: limits.bodyLimit - 300, max: limits.bodyLimit + 300 }), fc.integer({ min: 1000, max: limits.bodyLimit / 2 })),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('number' as const), pick, text: fc.constantFrom(...EXTREME_NUMBERS) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('badUtf8' as const), pick, bytes: fc.constantFrom(...INVALID_UTF8) }) },
  )
}

export function bodySpecArbitrary(base: fc.Arbitrary<unknown>, limits: MutationLimits, duplicateKeys: readonly string[]): fc.Arbitrary<BodySpec> {
  return fc.record({
    base,
    mutations: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 6, arbitrary: fc.array(mutationArbitrary(limits), { minLength: 1, maxLength: 2 }) }),
    duplicate: rarely(
      fc.record({
        key: fc.constantFrom(...duplicateKeys),
        value: fc.oneof(smallJson.map((value) => JSON.stringify(value)), fc.constantFrom(...EXTREME_NUMBERS)),
        first: fc.boolean(),
      }),
      8,
    ),
    strayBytes: rarely(fc.record({ at: fc.nat(), bytes: fc.constantFrom(...INVALID_UTF8) }), 20),
    padding: fc.record({ before: fc.constantFrom('', '', '', '', '', ' ', '\n', '\t\r\n', '\ufeff'), after: fc.constantFrom('', '', ' ', '\n', '\r\n\t ') }),
  })
}

/** `arbitrary` once in `every` draws, else null. */
function rarely<T>(arbitrary: fc.Arbitrary<T>, every: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: every - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary })
}

type Path = readonly (string | number)[]

/** Every member's path, depth first; the root itself is `[]`. */
function pathsOf(value: unknown): { members: Path[]; objects: Path[] } {
  const members: Path[] = []
  const objects: Path[] = []
  const stack: { node: unknown; path: Path }[] = [{ node: value, path: [] }]
  while (stack.length > 0) {
    const { node, path } = stack.pop()!
    if (path.length > 0) members.push(path)
    if (node === null || typeof node !== 'object') continue
    if (!Array.isArray(node)) objects.push(path)
    const entries: [string | number, unknown][] = Array.isArray(node) ? node.map((v, i) => [i, v]) : Object.entries(node)
    for (const [key, child] of entries) stack.push({ node: child, path: [...path, key] })
  }
  return { members, objects }
}

function parentOf(root: unknown, path: Path): Record<string | number, unknown> {
  let node = root as Record<string | number, unknown>
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>
  return node
}

/** Body text and bytes for a spec, with a short label for failure reports. */
export function encodeBody(spec: BodySpec): { bytes: Buffer; label: string } {
  let value: unknown = structuredClone(spec.base)
  const raw = new Map<string, string>()
  const bad = new Map<string, readonly number[]>()
  const placeholder = (text: string) => {
    const name = `@@RAW${raw.size}@@`
    raw.set(name, text)
    return name
  }
  // Where a mutation puts something: an existing member (replaced) or a new top-level member.
  const target = (pick: number): { holder: Record<string | number, unknown>; key: string | number } => {
    const { members } = pathsOf(value)
    const isObject = value !== null && typeof value === 'object' && !Array.isArray(value)
    if (members.length === 0 || (isObject && pick % 5 === 0)) {
      if (!isObject) value = {}
      return { holder: value as Record<string, unknown>, key: `x_${pick % 7}` }
    }
    const path = members[pick % members.length]!
    return { holder: parentOf(value, path), key: path.at(-1)! }
  }
  for (const mutation of spec.mutations) {
    switch (mutation.kind) {
      case 'root':
        value = structuredClone(mutation.value)
        break
      case 'replace': {
        const { holder, key } = target(mutation.pick)
        holder[key] = structuredClone(mutation.value)
        break
      }
      case 'drop': {
        const { members } = pathsOf(value)
        const inObjects = members.filter((path) => typeof path.at(-1) === 'string')
        const path = inObjects[mutation.pick % Math.max(1, inObjects.length)]
        if (path !== undefined) delete parentOf(value, path)[path.at(-1)!]
        break
      }
      case 'poison': {
        const { objects } = pathsOf(value)
        const path = objects[mutation.pick % Math.max(1, objects.length)]
        if (path === undefined) break
        const holder = path.length === 0 ? (value as Record<string, unknown>) : (parentOf(value, path)[path.at(-1)!] as Record<string, unknown>)
        // The key is raw text (it may be written with escapes); its value is JSON.
        holder[placeholder(mutation.key)] = structuredClone(mutation.value)
        break
      }
      case 'nest': {
        const { holder, key } = target(mutation.pick)
        const open = mutation.shape === 'array' ? '[' : '{"a":'
        const close = mutation.shape === 'array' ? ']' : '}'
        holder[key] = placeholder(`${open.repeat(mutation.depth)}0${close.repeat(mutation.depth)}`)
        break
      }
      case 'huge': {
        const { holder, key } = target(mutation.pick)
        holder[key] = placeholder(`@@HUGE:${mutation.element}:${mutation.target}@@`)
        break
      }
      case 'number': {
        const { holder, key } = target(mutation.pick)
        holder[key] = placeholder(mutation.text)
        break
      }
      case 'badUtf8': {
        const { holder, key } = target(mutation.pick)
        const name = `@@BAD${bad.size}@@`
        bad.set(name, mutation.bytes)
        holder[key] = `a${name}b`
        break
      }
    }
  }
  let text = JSON.stringify(value) ?? 'null'
  let huge: { name: string; element: string; target: number } | null = null
  for (const [name, rawText] of raw) {
    const match = /^@@HUGE:(.*):(\d+)@@$/s.exec(rawText)
    if (match) huge = { name, element: match[1]!, target: Number(match[2]) }
    else text = text.replaceAll(JSON.stringify(name), rawText)
  }
  if (spec.duplicate !== null && text.startsWith('{')) {
    const member = `${JSON.stringify(spec.duplicate.key)}:${spec.duplicate.value}`
    const empty = text === '{}'
    text = spec.duplicate.first ? `{${member}${empty ? '' : ','}${text.slice(1)}` : `${text.slice(0, -1)}${empty ? '' : ','}${member}}`
  }
  text = `${spec.padding.before}${text}${spec.padding.after}`
  if (huge !== null) {
    const quoted = JSON.stringify(huge.name)
    const rest = Buffer.byteLength(text) - quoted.length + 2
    const count = Math.max(0, Math.floor((huge.target - rest + 1) / (huge.element.length + 1)))
    text = text.replace(quoted, `[${Array.from({ length: count }, () => huge.element).join(',')}]`)
  }
  let bytes = Buffer.from(text, 'utf8')
  for (const [name, sequence] of bad) {
    const at = bytes.indexOf(name)
    if (at >= 0) bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(sequence), bytes.subarray(at + name.length)])
  }
  if (spec.strayBytes !== null && bytes.length > 0) {
    const at = spec.strayBytes.at % bytes.length
    bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(spec.strayBytes.bytes), bytes.subarray(at)])
  }
  const label = `${bytes.length} bytes: ${bytes.subarray(0, 300).toString('latin1')}${bytes.length > 300 ? '…' : ''}`
  return { bytes, label }
}
