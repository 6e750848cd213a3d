// Types for callgrind-profile.mjs, so the TypeScript tests can import it.
export interface CallgrindProfile {
  readonly thread: number
  readonly total: number
  readonly self: Map<string, number>
  readonly inclusive: Map<string, { calls: number; instructions: number }>
}
export function readCallgrindProfile(path: string, names?: (address: number) => string | null): Promise<CallgrindProfile>
export function perfMapNames(path: string): Promise<(address: number) => string | null>
