/**
 * Where a parsed body holds a key the body parser refuses: `__proto__`, or
 * `constructor` holding `prototype` (secure-json-parse's rule, the one
 * fastify applies: such keys pollute prototypes in JavaScript code that
 * merges objects). Looked for only in a body whose text may hold one
 * (jsonShape): `value` comes from JSON.parse, which makes them own
 * properties and pollutes nothing.
 */

/** An object or array waiting to be looked at, and how it was reached. */
interface Reached {
  readonly node: object
  readonly parent: Reached | null
  readonly name: string | number
}

/**
 * The dotted path of the first such key, breadth first as the parser looks;
 * null when there is none. Paths are written out only for the key found:
 * one string per member made a body with a `constructor` member and 8 MiB
 * of numbers hold the event loop for 4-5 s (a review).
 */
export function prototypeKeyPath(value: unknown): string | null {
  if (value === null || typeof value !== 'object') return null
  let level: Reached[] = [{ node: value, parent: null, name: '' }]
  while (level.length > 0) {
    const next: Reached[] = []
    for (const reached of level) {
      const key = prototypeKeyOf(reached.node)
      if (key !== null) return pathTo(reached, key)
      addChildren(reached, next)
    }
    level = next
  }
  return null
}

/** `__proto__` or `constructor` when `node` holds such a key itself, else null. JSON arrays hold neither. */
function prototypeKeyOf(node: object): string | null {
  if (Array.isArray(node)) return null
  if (Object.hasOwn(node, '__proto__')) return '__proto__'
  if (!Object.hasOwn(node, 'constructor')) return null
  const ctor = (node as Record<string, unknown>).constructor
  return ctor !== null && typeof ctor === 'object' && Object.hasOwn(ctor, 'prototype') ? 'constructor' : null
}

/** The objects and arrays `reached` holds, added to `next`; plain values are not kept. */
function addChildren(reached: Reached, next: Reached[]): void {
  const node = reached.node
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const child: unknown = node[i]
      if (child !== null && typeof child === 'object') next.push({ node: child, parent: reached, name: i })
    }
    return
  }
  for (const name of Object.keys(node)) {
    const child = (node as Record<string, unknown>)[name]
    if (child !== null && typeof child === 'object') next.push({ node: child, parent: reached, name })
  }
}

function pathTo(reached: Reached, key: string): string {
  const names: (string | number)[] = [key]
  for (let at: Reached | null = reached; at !== null && at.parent !== null; at = at.parent) names.push(at.name)
  return names.reverse().join('.')
}
