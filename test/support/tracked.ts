/**
 * Cleanups that also start what most HTTP tests start (a vLLM stand-in, a
 * gateway), registering its teardown in the same call: a test cannot start one
 * and forget to stop it, and test files need no start-and-push wrappers of
 * their own.
 */
import { startVllmStandIn, type StandInOptions, type VllmStandIn } from '../../src/dev/vllm-stand-in.js'
import type { RedisTimings } from '../../src/state/redis-link.js'
import { cleanupsAfterEach, type Cleanups } from './cleanups.js'
import { startTestGateway, type TestGateway } from './gateway.js'
import { startRedisTestGateway } from './redis-gateway.js'

export interface TrackedCleanups extends Cleanups {
  /** startVllmStandIn, closed after the test. */
  standIn(options?: StandInOptions): Promise<VllmStandIn>
  /** startTestGateway, shut down after the test (shutdown is idempotent: a test may also shut it down itself). */
  gateway(object: Record<string, unknown>): Promise<TestGateway>
  /** startRedisTestGateway, shut down after the test. */
  redisGateway(object: Record<string, unknown>, redisTimings?: RedisTimings): Promise<TestGateway>
}

/** cleanupsAfterEach with the starters above; call at module level, once per file. */
export function trackedAfterEach(): TrackedCleanups {
  const cleanups = cleanupsAfterEach()
  async function tracked<T>(starting: Promise<T>, stop: (started: T) => Promise<unknown>): Promise<T> {
    const started = await starting
    cleanups.push(() => stop(started))
    return started
  }
  return {
    push: cleanups.push,
    standIn: (options = {}) => tracked(startVllmStandIn(options), (server) => server.close()),
    gateway: (object) => tracked(startTestGateway(object), (gw) => gw.shutdown()),
    redisGateway: (object, redisTimings) => tracked(startRedisTestGateway(object, redisTimings), (gw) => gw.shutdown()),
  }
}
