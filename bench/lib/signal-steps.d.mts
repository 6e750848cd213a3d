// Types for signal-steps.mjs, so the TypeScript tests can import it.
export function serveSteps(steps: ReadonlyArray<() => string | Promise<string>>): void
export function stepper(pid: number, dir: string): () => Promise<string>
