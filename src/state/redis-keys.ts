/**
 * Names of everything Sluice keeps in Redis, and the queue's member format.
 * Every key of one model shares the hash tag `{m:<model>}` and every key of
 * one API key the tag `{k:<key id>}`, so each script touches one Redis
 * Cluster slot. The README ("Shared state (Redis)") documents the layout.
 */

/** Braces would end the hash tag early and `%` is the escape itself. */
function tagSafe(name: string): string {
  return name.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)
}

export interface ModelKeys {
  /** ZSET, every score 0: waiters ordered by member (see `queueMember`). */
  readonly queue: string
  /** Arrival counter (INCR). */
  readonly seq: string
  /** HASH waiter id → its queue member. */
  readonly waiters: string
  /** ZSET replica id → heartbeat expiry (ms): a replica past it has its waiters dropped. */
  readonly owners: string
  /** HASH waiter id → backend: slots handed to a waiter, until its replica has taken them. */
  readonly grants: string
  /**
   * HASH replica id → the backends its configuration has (names, one per
   * line): a slot is handed only to a waiter whose replica has that backend.
   * Replicas (and a reload's generations, each a replica id of its own) may
   * have different sets for a while; a waiter handed a backend its config
   * does not have failed with 500 (a chaos audit).
   */
  readonly accepts: string
  /** One ZSET per backend, lease id → expiry (ms), in the order of `backends`. */
  readonly leases: readonly string[]
  /** Published when a slot frees and no waiter could be handed it. */
  readonly freedChannel: string
  /** HASH backend → a replica's verdict that it is down or ejected (JSON, with its expiry). */
  readonly health: string
  /** Published when a verdict of `health` is set or withdrawn. */
  readonly healthChannel: string
}

export function modelKeys(prefix: string, model: string, backends: readonly string[]): ModelKeys {
  const base = `${prefix}{m:${tagSafe(model)}}:`
  return {
    queue: `${base}queue`,
    seq: `${base}seq`,
    waiters: `${base}waiters`,
    owners: `${base}owners`,
    grants: `${base}grants`,
    accepts: `${base}accepts`,
    leases: backends.map((b) => `${base}leases:${tagSafe(b)}`),
    freedChannel: `${base}freed`,
    health: `${base}health`,
    healthChannel: `${base}health-changed`,
  }
}

/** The KEYS array of every slot script: fixed keys first, then one lease set per backend. */
export function slotScriptKeys(keys: ModelKeys): string[] {
  return [keys.queue, keys.seq, keys.waiters, keys.owners, keys.grants, keys.accepts, ...keys.leases]
}

export interface KeyLimitKeys {
  /** HASH: ru/rt (requests bucket use and time), tu/tt (tokens bucket). */
  readonly rate: string
  /** ZSET ticket id → expiry (ms): requests of the key queued or in flight. */
  readonly active: string
}

export function keyLimitKeys(prefix: string, keyId: string): KeyLimitKeys {
  const base = `${prefix}{k:${tagSafe(keyId)}}:`
  return { rate: `${base}rate`, active: `${base}active` }
}

/** A carry's marker (lua/key-scripts.ts DEBIT): present while Redis remembers having counted that carry. */
export function keyCarryMarker(prefix: string, keyId: string, carryId: string): string {
  return `${prefix}{k:${tagSafe(keyId)}}:carry:${carryId}`
}

/** Where a replica hears about grants and evictions of its own waiters. */
export function replicaChannel(prefix: string, replicaId: string): string {
  return `${prefix}replica:${replicaId}`
}

const PRIORITY_OFFSET = 2n ** 53n
const SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * The first part of a queue member: priority + 2^53 as 14 hex digits, so
 * members sort by priority when compared as strings (ZRANGEBYLEX order).
 * Priorities beyond the safe integer range are clamped into it.
 */
export function priorityPrefix(priority: number): string {
  const whole = Number.isFinite(priority) ? BigInt(Math.trunc(priority)) : priority > 0 ? SAFE : -SAFE
  const clamped = whole > SAFE ? SAFE : whole < -SAFE ? -SAFE : whole
  return (clamped + PRIORITY_OFFSET).toString(16).padStart(14, '0')
}
