/**
 * The slot scripts (each one atomic; see slot-prelude.ts for the shared
 * header, keys and reply). Embedded as strings so `tsc` alone builds them
 * into dist/.
 */
import { SLOT_PRELUDE } from './slot-prelude.js'

/**
 * A new arrival. ARGV[rest..]: waiter id, priority prefix, preferred backend
 * ('' for none), queue max size, mode ('queue' | 'try' | 'now').
 * With an empty queue (or in 'try' mode, used for retries) it takes a slot at
 * once, or answers `room` with the backends that have one for the caller's
 * balancer to choose. Otherwise it takes its place in the queue; where that
 * makes it the first waiter able to take a backend with room (those ahead
 * have other backends), it takes the slot (or answers `room`) as above.
 * Failing that it stays queued, under the full-queue rule: the newest
 * request of the worst priority present is turned away (the arrival itself,
 * or an evicted waiter whose replica is told). 'now' is an arrival that may
 * not wait (its body would pass the replica's body budget): a slot at once
 * as above, else `none`, and nobody is evicted.
 */
const ACQUIRE = `
local id, prio, preferred = ARGV[rest], ARGV[rest + 1], ARGV[rest + 2]
local max_queue, mode = tonumber(ARGV[rest + 3]), ARGV[rest + 4]
prune()
if mode == 'try' or redis.call('ZCARD', Q) == 0 then
  local candidates = room()
  local i = pick(candidates, preferred)
  if i then
    redis.call('ZADD', lease_key(i), now + ttl, id)
    return reply({ status = 'granted', backend = names[i] })
  end
  if #candidates > 1 then return reply({ status = 'room', room = names_of(candidates) }) end
  if mode == 'try' then return reply({ status = 'none' }) end
end
-- An arrival asked again after a \`room\` answer keeps the place that answer gave it.
local member = redis.call('HGET', W, id)
if not member then
  local serial = redis.call('INCR', SEQ)
  -- Kept alive by every arrival and heartbeat (SYNC); once it lapses no waiter is left to order against.
  redis.call('PEXPIRE', SEQ, ttl)
  member = prio .. ':' .. string.format('%016x', serial) .. ':' .. id
  -- Ordering is the sorted set's own (byte-wise), never Lua string comparison (locale-dependent).
  redis.call('ZADD', Q, 0, member)
end
local seq = tonumber(string.sub(member, 16, 31), 16)
-- A backend with room that no waiter ahead can take (theirs is another configuration: a reload's
-- old generation, a replica mid-rollout) goes to the arrival now, not at its backstop's claim.
local first = firsts_for(member, room())
if #first > 0 then
  local i = pick(first, preferred)
  if i then
    drop_waiter(id)
    redis.call('ZREM', Q, member)
    redis.call('ZADD', lease_key(i), now + ttl, id)
    return reply({ status = 'granted', backend = names[i] })
  end
  -- Queued while the caller's balancer chooses (it asks again, or leaves).
  redis.call('HSET', W, id, member)
  say_accepts()
  redis.call('ZADD', OWN, now + ttl, me)
  redis.call('PEXPIRE', OWN, ttl)
  return reply({ status = 'room', room = names_of(first), seq = seq })
end
if mode == 'now' then
  drop_waiter(id)
  redis.call('ZREM', Q, member)
  return reply({ status = 'none' })
end
local evicted = nil
if redis.call('ZCARD', Q) > max_queue then
  local worst = redis.call('ZRANGE', Q, -1, -1)[1]
  if worst == member then
    drop_waiter(id)
    redis.call('ZREM', Q, member)
    return reply({ status = 'rejected' })
  end
  local victim = waiter_of(worst)
  drop_waiter(victim)
  if owner_of(victim) == me then
    evicted = victim
  else
    redis.call('PUBLISH', replica_channel .. owner_of(victim), cjson.encode({ kind = 'evict', model = model, id = victim }))
  end
end
redis.call('HSET', W, id, member)
say_accepts()
redis.call('ZADD', OWN, now + ttl, me)
-- The set lapses with its newest heartbeat: a model no replica queues for leaves no key behind.
redis.call('PEXPIRE', OWN, ttl)
return reply({ status = 'queued', seq = seq, evicted = evicted })
`

/**
 * This replica's best waiter asks for a slot. ARGV[rest..]: waiter id,
 * preferred backend. Granted a usable backend with room only when no
 * waiter ahead of it (after dropping dead replicas' waiters) could take
 * that backend: the global head, or one behind waiters whose replicas do
 * not have it (another configuration's); a slot already handed to it is
 * taken.
 */
const CLAIM = `
local id, preferred = ARGV[rest], ARGV[rest + 1]
prune()
local given = redis.call('HGET', GR, id)
if given then
  redis.call('HDEL', GR, id)
  if lease_lapsed(id, given) then return reply({ status = 'gone' }) end
  return reply({ status = 'granted', backend = given })
end
local member = redis.call('HGET', W, id)
if not member then return reply({ status = 'gone' }) end
local candidates = room()
local first = firsts_for(member, candidates)
if #first == 0 then
  local head = redis.call('ZRANGE', Q, 0, 0)[1]
  if waiter_of(head) == id then return reply({ status = 'full' }) end
  if #candidates > 0 then redis.call('PUBLISH', freed_channel, me) end
  return reply({ status = 'behind' })
end
local i = pick(first, preferred)
if i then
  drop_waiter(id)
  redis.call('ZADD', lease_key(i), now + ttl, id)
  return reply({ status = 'granted', backend = names[i] })
end
if #first > 1 then return reply({ status = 'room', room = names_of(first) }) end
return reply({ status = 'full' })
`

/** A lease ends. ARGV[rest..]: lease id, backend. Its slot goes to the head waiters at once. */
const RELEASE = `
local lease, backend = ARGV[rest], ARGV[rest + 1]
local i = index_of(backend)
if i then redis.call('ZREM', lease_key(i), lease) end
redis.call('HDEL', GR, lease)
prune()
local given = 0
if i and usable[i] then given = hand_off(i) end
announce_if_waiting(given)
return reply({ status = 'released' })
`

/**
 * Waiters leave (timeout, client gone, shutdown). ARGV[rest..]: waiter ids.
 * One that was handed a slot meanwhile gives it back (to the next head).
 */
const LEAVE = `
prune()
local given = 0
for k = rest, #ARGV do
  local id = ARGV[k]
  if not drop_waiter(id) then
    local backend = redis.call('HGET', GR, id)
    if backend then
      redis.call('HDEL', GR, id)
      local i = index_of(backend)
      if i then
        redis.call('ZREM', lease_key(i), id)
        if usable[i] then given = given + hand_off(i) end
      end
    end
  end
end
announce_if_waiting(given)
return reply({ status = 'left' })
`

/**
 * The backstop, every second or so while this replica has waiters:
 * heartbeat, grants whose message was lost, waiters that are gone
 * (evicted, or dropped while this replica looked dead), and entries of this
 * replica it no longer knows (an answer lost to a timeout). ARGV[rest..]:
 * the ids of this replica's waiters.
 */
const SYNC = `
-- Before this heartbeat is written: with none left, the entries are all dead replicas' (this one's
-- own too: it looked dead, and its waiters come back as gone).
forget_orphaned_queue()
redis.call('ZADD', OWN, now + ttl, me)
redis.call('PEXPIRE', OWN, ttl)
say_accepts()
redis.call('PEXPIRE', SEQ, ttl)
prune()
local mine, granted, gone = {}, {}, {}
for k = rest, #ARGV do
  local id = ARGV[k]
  mine[id] = true
  local backend = redis.call('HGET', GR, id)
  if backend then
    redis.call('HDEL', GR, id)
    if lease_lapsed(id, backend) then
      gone[#gone + 1] = id
    else
      granted[#granted + 1] = id
      granted[#granted + 1] = backend
    end
  elseif not redis.call('HGET', W, id) then
    gone[#gone + 1] = id
  end
end
local all = redis.call('HGETALL', W)
for i = 1, #all, 2 do
  if owner_of(all[i]) == me and not mine[all[i]] then
    redis.call('ZREM', Q, all[i + 1])
    redis.call('HDEL', W, all[i])
  end
end
for _, id in ipairs(redis.call('HKEYS', GR)) do
  if owner_of(id) == me and not mine[id] then redis.call('HDEL', GR, id) end
end
return reply({ status = 'synced', granted = granted, gone = gone })
`

/**
 * Renews this replica's leases. ARGV[rest..]: backend, lease id, ...
 * A lease that expired meanwhile (renewals failed for a whole TTL) is put
 * back: its request is still running on that backend.
 */
const RENEW = `
for k = rest, #ARGV, 2 do
  local i = index_of(ARGV[k])
  if i then redis.call('ZADD', lease_key(i), now + ttl, ARGV[k + 1]) end
end
return reply({ status = 'renewed' })
`

/**
 * Redis is reachable again: this replica's entries that no request of its
 * holds are dropped, and the slots they took go to the head waiters.
 * ARGV[rest..]: the highest id serial handed out before the reconnection,
 * then the ids this replica holds (leases and waiters). Only ids up to that
 * serial count: a newer one may belong to a call still on the wire.
 */
const RECONCILE = `
local below = tonumber(ARGV[rest])
local kept = {}
for k = rest + 1, #ARGV do kept[ARGV[k]] = true end
local function orphan(id)
  if kept[id] then return false end
  local owner, serial = string.match(id, '^([^/]*)/(%w+)$')
  return owner == me and (tonumber(serial, 36) or math.huge) <= below
end
prune()
local dropped = 0
for i = 1, n do
  for _, id in ipairs(redis.call('ZRANGE', lease_key(i), 0, -1)) do
    if orphan(id) then
      redis.call('ZREM', lease_key(i), id)
      dropped = dropped + 1
    end
  end
end
local all = redis.call('HGETALL', W)
for i = 1, #all, 2 do
  if orphan(all[i]) then
    redis.call('ZREM', Q, all[i + 1])
    redis.call('HDEL', W, all[i])
    dropped = dropped + 1
  end
end
for _, id in ipairs(redis.call('HKEYS', GR)) do
  if orphan(id) then redis.call('HDEL', GR, id) end
end
local given = 0
for i = 1, n do
  if usable[i] then given = given + hand_off(i) end
end
announce_if_waiting(given)
return reply({ status = 'reconciled', dropped = dropped })
`

export const SLOT_SCRIPTS = {
  sluiceSlotAcquire: SLOT_PRELUDE + ACQUIRE,
  sluiceSlotClaim: SLOT_PRELUDE + CLAIM,
  sluiceSlotRelease: SLOT_PRELUDE + RELEASE,
  sluiceSlotLeave: SLOT_PRELUDE + LEAVE,
  sluiceSlotSync: SLOT_PRELUDE + SYNC,
  sluiceSlotRenew: SLOT_PRELUDE + RENEW,
  sluiceSlotReconcile: SLOT_PRELUDE + RECONCILE,
} as const

export type SlotScript = keyof typeof SLOT_SCRIPTS
