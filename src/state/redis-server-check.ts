/**
 * Whether the server at `redis_url` can hold the shared state. The client is
 * a standalone one: it writes, and follows no MOVED reply. A read-only
 * replica refuses every script (READONLY), and a Redis Cluster node answers
 * MOVED for the hash slots it does not hold; either way each call failed
 * and admission fell back to local limits, while `/readyz` and
 * `sluice_redis_up` said Redis was up. Such a server now counts as down,
 * with the reason in the log.
 */
import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'

/**
 * Replies that say this server will not run the shared state's scripts until
 * an operator or a failover changes it. NOREPLICAS (a primary with
 * `min-replicas-to-write` whose replicas dropped away), MISCONF (a failed
 * snapshot with `stop-writes-on-bgsave-error`) and OOM (`maxmemory` with
 * `noeviction`) refuse every write: a Redis review saw every admission go
 * local, a 2-slot backend run 6, while `/readyz` said Redis was up.
 */
const REFUSALS = /^(READONLY|MOVED|ASK|CROSSSLOT|CLUSTERDOWN|NOPERM|NOREPLICAS|MISCONF|OOM)\b/
/** Of those, the ones a writable primary gives: the check below finds them by writing, not by ROLE. */
const WRITE_REFUSALS = /^(NOREPLICAS|MISCONF|OOM)\b/

/** The refusal an error is (its reply's first word, `NOPERM` for any ACL refusal), or null for any other failure. */
export function serverRefusal(error: unknown): string | null {
  const message = error instanceof Error ? error.message : String(error)
  if (isForbidden(message)) return 'NOPERM'
  return REFUSALS.exec(message)?.[1] ?? null
}

/**
 * Why the server cannot hold the shared state, or null when it can (or cannot tell: an ACL may forbid ROLE).
 * Its commands are sent at once and the answers read in order (the connection keeps it): the check costs a
 * round trip, as a PING does (two for a database other than 0). One after another it took five, so a Redis
 * 200 ms away never passed it within its budget and stayed down (a diff review), where the README counts a
 * merely slow Redis up.
 */
export async function serverProblem(client: Redis, keyPrefix: string): Promise<string | null> {
  // First and alone (a round trip only for a database other than 0): the probe's writes must not land in
  // database 0 when the one named is refused.
  const database = await databaseProblem(client)
  if (database !== null) return database
  const permission = sent(permissionProblem(client, keyPrefix))
  const role = sent(client.call('ROLE') as Promise<unknown[]>)
  const clusterInfo = sent(client.info('cluster'))
  const problem = await permission
  if (problem !== null) return problem
  if ((await role)[0] !== 'master') return 'the server at redis_url is a read-only replica: point redis_url at its primary'
  if (!/^cluster_enabled:1\b/m.test(await clusterInfo)) return null
  const cluster = String(await client.call('CLUSTER', 'INFO'))
  if (/^cluster_known_nodes:1\b/m.test(cluster) && /^cluster_slots_assigned:16384\b/m.test(cluster)) return null
  return 'the server at redis_url is a Redis Cluster node that does not hold every hash slot: the gateway talks to one standalone primary and follows no MOVED reply'
}

/** A call already sent whose answer may be read later, or never (an earlier answer decided): its failure is no unhandled rejection. */
function sent<T>(call: Promise<T>): Promise<T> {
  call.catch(() => undefined)
  return call
}

/**
 * The database redis_url names must exist: ioredis selects it on connect,
 * and when the server has fewer databases (16 by default) it logs the
 * refusal and goes on in database 0, so replicas configured apart would
 * have shared one state (a security audit saw "Redis connected" after
 * "ERR DB index is out of range", at debug level).
 */
async function databaseProblem(client: Redis): Promise<string | null> {
  const db = client.options.db ?? 0
  if (db === 0) return null
  try {
    await client.select(db)
    return null
  } catch (error) {
    // Only the server's refusal says the database is missing; a lost connection says nothing.
    if (!(error instanceof Error) || error.name !== 'ReplyError') throw error
    const reply = error.message.split('\n')[0]
    return `the server at redis_url refuses database ${db} (${reply}): name one it has (its "databases" setting)`
  }
}

/**
 * Every command the shared state's scripts run, and the ZREM the gateway
 * sends itself, each once on probe keys under the prefix (one hash tag,
 * for a one-node cluster), left as they were found: an ACL that forbids
 * any of them is found on connecting, not by a call that fails later
 * (which, marking Redis down while this probe passed, would flap). The
 * PUBLISH needs the channel rights Redis 7 gives a new user none of.
 */
const PROBE = `
local h, z, c = KEYS[1], KEYS[2], KEYS[3]
redis.call('TIME')
redis.call('HSET', h, 'f', '1')
redis.call('HGET', h, 'f')
redis.call('HGETALL', h)
redis.call('HKEYS', h)
redis.call('HDEL', h, 'f')
redis.call('ZADD', z, 0, 'm')
redis.call('ZSCORE', z, 'm')
redis.call('ZCARD', z)
redis.call('ZCOUNT', z, '-inf', '+inf')
redis.call('ZRANGE', z, 0, -1)
redis.call('ZRANGEBYSCORE', z, '-inf', '+inf')
redis.call('ZREMRANGEBYSCORE', z, '-inf', '-inf')
redis.call('ZREM', z, 'm')
redis.call('EXISTS', c)
redis.call('SET', c, '0', 'NX', 'PX', 1)
redis.call('INCR', c)
redis.call('PTTL', c)
redis.call('PEXPIRE', c, 1)
redis.call('DEL', c)
redis.call('PUBLISH', ARGV[1], '')
return 1
`
const PROBE_SHA = createHash('sha1').update(PROBE).digest('hex')

/** Redis's words for a call an ACL forbids: NOPERM for commands and keys, an ERR for a script's PUBLISH to a channel. */
const FORBIDDEN = /^NOPERM\b|^ERR The user executing the script can't/

/** Whether an error is an ACL's refusal (redis-link.ts counts Redis down for it too). */
export function isForbidden(message: string): boolean {
  return FORBIDDEN.test(message)
}

/**
 * The user redis_url names must be allowed what the gateway does: EVAL (the
 * first call of each script), EVALSHA (every later one), the scripts'
 * commands on keys under key_prefix and PUBLISH to its channels, and ZREM.
 * An ACL user lacking any of them had every call refused and every
 * admission went local, while `/readyz` said Redis was up and nothing was
 * logged (a Redis review: a 2-slot backend held 4).
 */
async function permissionProblem(client: Redis, keyPrefix: string): Promise<string | null> {
  const keys = ['h', 'z', 'c'].map((suffix) => `${keyPrefix}{permission-probe}:${suffix}`)
  const channel = `${keyPrefix}permission-probe`
  // Sent together, answered in order: EVALSHA finds the script EVAL loaded just before it.
  const calls = [client.eval(PROBE, keys.length, ...keys, channel), client.evalsha(PROBE_SHA, keys.length, ...keys, channel), client.zrem(keys[1]!, 'm')].map(sent)
  try {
    for (const call of calls) await call
    return null
  } catch (error) {
    if (!(error instanceof Error) || error.name !== 'ReplyError') throw error
    const reply = error.message.split('\n')[0]
    if (WRITE_REFUSALS.test(error.message)) return `the server at redis_url refuses writes (${reply}): the shared state cannot be kept there until it takes them again`
    // A read-only replica refuses the writes too: the role check says that better.
    if (!isForbidden(error.message)) return null
    return `the user in redis_url may not do what the shared state needs (${reply}): grant it EVAL, EVALSHA, ZREM, the hash, sorted set and string commands, EXISTS, DEL, PTTL and PEXPIRE on keys matching ${keyPrefix}* and PUBLISH to channels matching ${keyPrefix}* (README, Shared state)`
  }
}
