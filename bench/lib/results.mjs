// What every benchmark's results JSON records about where it ran, and how it
// is written: one place, so the files in bench/results/ stay comparable.
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'

/** Cores, CPU model and Node version, plus whatever the benchmark adds (load averages, nginx, ulimit). */
export function machine(extra = {}) {
  return { cores: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, ...extra }
}

/** Writes `bench/results/<file>` as indented JSON; returns its path. */
export async function writeResult(file, result) {
  await mkdir('bench/results', { recursive: true })
  const path = `bench/results/${file}`
  await writeFile(path, `${JSON.stringify(result, null, 2)}\n`)
  return path
}
