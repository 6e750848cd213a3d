/**
 * Shared backend health (redis-health-board.ts): one hash per model, field =
 * backend, value = a replica's verdict as JSON. Each change is published on
 * the model's health channel (the message, `{"backend", "verdict"}` JSON with
 * a null verdict for a withdrawal, is built by the caller).
 *
 * KEYS: 1 health hash, 2 health channel.
 */

/** ARGV: backend, verdict JSON, ms the hash must live at least (the verdict's lifetime), message. */
const PUBLISH = `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local keep = tonumber(ARGV[3])
if tonumber(redis.call('PTTL', KEYS[1])) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
redis.call('PUBLISH', KEYS[2], ARGV[4])
return 'published'
`

/**
 * ARGV: backend, message, the withdrawing gateway's signature (`by`). Only
 * its own verdict is withdrawn: another replica's, which replaced it, stands
 * until that replica withdraws it or stops refreshing it. A verdict without
 * `by` (an older release's) is anyone's to withdraw, as before.
 */
const CLEAR = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 'none' end
local ok, verdict = pcall(cjson.decode, current)
if ok and type(verdict) == 'table' and verdict.by ~= nil and verdict.by ~= ARGV[3] then return 'not ours' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[2], ARGV[2])
return 'cleared'
`

/** Every verdict of the model: a flat list of backend, JSON. */
const READ = `
return redis.call('HGETALL', KEYS[1])
`

export const HEALTH_SCRIPTS = {
  sluiceHealthPublish: PUBLISH,
  sluiceHealthClear: CLEAR,
  sluiceHealthRead: READ,
} as const

export type HealthScript = keyof typeof HEALTH_SCRIPTS
