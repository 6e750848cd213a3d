// Reads one callgrind output file (one thread's counts): the instructions
// each function executed itself, and the instructions and calls spent in
// each function with everything it called (from its callers' call lines).
// JIT code has no symbols; its addresses are named from Node's perf map.
import { readFile } from 'node:fs/promises'

/** { thread, total, self: Map<name, Ir>, inclusive: Map<name, { calls, instructions }> } */
export async function readCallgrindProfile(path, names = () => null) {
  const lines = (await readFile(path, 'utf8')).split('\n')
  const ids = new Map()
  const named = (spec) => {
    const match = /^\((\d+)\)(?: (.*))?$/.exec(spec)
    if (match === null) return spec
    if (match[2] !== undefined) ids.set(match[1], nameOf(match[2], names))
    return ids.get(match[1])
  }
  const self = new Map()
  const inclusive = new Map()
  let current = null
  let callee = null
  let calls = 0
  for (const line of lines) {
    if (line.startsWith('fn=')) current = named(line.slice(3))
    else if (line.startsWith('cfn=')) callee = named(line.slice(4))
    else if (line.startsWith('calls=')) calls = Number(line.slice(6).split(' ')[0])
    else if (/^[0-9+*-]/.test(line)) {
      const cost = Number(line.split(' ')[1] ?? 0)
      if (calls > 0) {
        const entry = inclusive.get(callee) ?? { calls: 0, instructions: 0 }
        entry.calls += calls
        entry.instructions += cost
        inclusive.set(callee, entry)
        calls = 0
      } else self.set(current, (self.get(current) ?? 0) + cost)
    }
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  return { thread: Number(/-(\d+)$/.exec(path)?.[1] ?? 1), total, self, inclusive }
}

/** Callgrind names unknown code by its address: such names become the perf map's, when it has one. */
function nameOf(raw, names) {
  const address = /^0x([0-9a-f]+)/.exec(raw)
  return (address && names(parseInt(address[1], 16))) ?? raw
}

/** An address → name lookup over Node's /tmp/perf-<pid>.map ("start size name" per line, hex). */
export async function perfMapNames(path) {
  const entries = (await readFile(path, 'utf8'))
    .split('\n')
    .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
    .filter((match) => match !== null)
    .map(([, start, size, name]) => ({ start: parseInt(start, 16), end: parseInt(start, 16) + parseInt(size, 16), name }))
  // Stable sort: for code that reused an address, the later entry comes last and wins below.
  entries.sort((a, b) => a.start - b.start)
  return (address) => {
    let low = 0
    let high = entries.length - 1
    let found = -1
    while (low <= high) {
      const middle = (low + high) >> 1
      if (entries[middle].start <= address) {
        found = middle
        low = middle + 1
      } else high = middle - 1
    }
    for (let i = found; i >= 0 && i > found - 8; i--) if (address < entries[i].end) return entries[i].name
    return null
  }
}
