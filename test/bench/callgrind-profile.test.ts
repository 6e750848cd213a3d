import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { perfMapNames, readCallgrindProfile } from '../../bench/lib/callgrind-profile.mjs'

// One thread's dump in callgrind's compressed format: names given once as
// "(id) name", then "(id)"; a call's cost line follows its "calls=" line
// and holds the callee's whole cost, not the caller's own.
const DUMP = `version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  /usr/bin/node server.mjs
part: 1

positions: line
events: Ir
summary: 600

ob=(1) /usr/bin/node
fl=(1) ???
fn=(1) main
0 100
cfn=(2) 0x00000000000010a0
calls=2 0
0 500
fn=(2)
0 300
cfn=(3) v8::internal::Runtime_Slow(int)
calls=4 0
0 200
fn=(3)
+1 150
* 50
fn=(4) 0x0000000000009000
0 7

totals: 607
`
// Node's perf map: "start size name" in hex, one JIT function per line; the later of two at one address wins.
const PERF_MAP = `1000 100 JS:~forward file:///app.js:1:1
1000 100 JS:*forward file:///app.js:1:1
2000 10 JS:*other file:///app.js:9:1
`

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'callgrind-profile-'))
  await writeFile(join(dir, 'callgrind.out.4242.1-02'), DUMP)
  await writeFile(join(dir, 'perf-4242.map'), PERF_MAP)
})
afterAll(() => rm(dir, { recursive: true, force: true }))

describe('readCallgrindProfile', () => {
  it('counts own instructions per function, leaving the cost of calls to the callee', async () => {
    const profile = await readCallgrindProfile(join(dir, 'callgrind.out.4242.1-02'))
    expect(profile.thread).toBe(2)
    expect(Object.fromEntries(profile.self)).toEqual({ main: 100, '0x00000000000010a0': 300, 'v8::internal::Runtime_Slow(int)': 200, '0x0000000000009000': 7 })
    expect(profile.total).toBe(607)
    expect(profile.inclusive.get('0x00000000000010a0')).toEqual({ calls: 2, instructions: 500 })
    expect(profile.inclusive.get('v8::internal::Runtime_Slow(int)')).toEqual({ calls: 4, instructions: 200 })
  })

  it('names JIT code from the perf map, and keeps the address where the map has none', async () => {
    const names = await perfMapNames(join(dir, 'perf-4242.map'))
    const profile = await readCallgrindProfile(join(dir, 'callgrind.out.4242.1-02'), names)
    expect(profile.self.get('JS:*forward file:///app.js:1:1')).toBe(300)
    expect(profile.inclusive.get('JS:*forward file:///app.js:1:1')).toEqual({ calls: 2, instructions: 500 })
    expect(profile.self.get('0x0000000000009000')).toBe(7)
  })
})

describe('perfMapNames', () => {
  it('finds the function whose code holds an address, and none past its end', async () => {
    const names = await perfMapNames(join(dir, 'perf-4242.map'))
    expect(names(0x1000)).toBe('JS:*forward file:///app.js:1:1')
    expect(names(0x10ff)).toBe('JS:*forward file:///app.js:1:1')
    expect(names(0x1100)).toBeNull()
    expect(names(0x2005)).toBe('JS:*other file:///app.js:9:1')
    expect(names(0xfff)).toBeNull()
  })
})
