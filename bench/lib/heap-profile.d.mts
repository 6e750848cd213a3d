// Types for heap-profile.mjs, so the TypeScript tests can import it.
export interface SamplingHeapProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: readonly SamplingHeapProfileNode[]
}
export function allocationSites(profile: { readonly head: SamplingHeapProfileNode }): { total: number; bySite: Map<string, number> }
