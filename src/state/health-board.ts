/**
 * Where replicas tell each other which backends they found down or ejected
 * (DESIGN.md "Shared state": backend health is global in Redis mode). The
 * local board shares nothing (memory mode: each replica on its own checks);
 * the Redis board is redis-health-board.ts.
 */
import type { SharedVerdict } from '../routing/health-state.js'

export interface HealthBoard {
  /** This replica found `backend` down or ejected: every replica should treat it so until the verdict lapses. */
  publish(model: string, backend: string, verdict: SharedVerdict): void
  /** This replica's check found `backend` healthy again: its own verdict is withdrawn (another replica's, which replaced it, stands). */
  clear(model: string, backend: string): void
  /** Delivers the model's verdicts (null: none in force), now and as they change; once per model. */
  watch(model: string, backends: readonly string[], onVerdict: (backend: string, verdict: SharedVerdict | null) => void): void
  /** Stops delivering. */
  close(): void
}

/** Memory mode: nothing is shared, so nothing ever arrives. */
export const LOCAL_HEALTH_BOARD: HealthBoard = {
  publish: () => undefined,
  clear: () => undefined,
  watch: () => undefined,
  close: () => undefined,
}
