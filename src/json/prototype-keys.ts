/**
 * Where a parsed body holds a key the body parser refuses: `__proto__`, or
 * `constructor` holding `prototype` (secure-json-parse's rule, the one
 * fastify applies: such keys pollute prototypes in JavaScript code that
 * merges objects). Looked for only in a body whose text may hold one
 * (jsonShape): `value` comes from JSON.parse, which makes them own
 * properties and pollutes nothing.
 */

/** The dotted path of the first such key, breadth first as the parser looks; null when there is none. */
export function prototypeKeyPath(value: unknown): string | null {
  let level: { readonly node: unknown; readonly path: string }[] = [{ node: value, path: '' }]
  while (level.length > 0) {
    const next: typeof level = []
    for (const { node, path } of level) {
      if (node === null || typeof node !== 'object') continue
      const own = (key: string) => Object.prototype.hasOwnProperty.call(node, key)
      if (own('__proto__')) return join(path, '__proto__')
      const ctor = (node as Record<string, unknown>).constructor
      if (own('constructor') && ctor !== null && typeof ctor === 'object' && Object.prototype.hasOwnProperty.call(ctor, 'prototype')) return join(path, 'constructor')
      for (const key of Object.keys(node)) next.push({ node: (node as Record<string, unknown>)[key], path: join(path, key) })
    }
    level = next
  }
  return null
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}
