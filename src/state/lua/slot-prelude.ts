/**
 * Lua shared by every slot script (prepended to each): the argument header,
 * the clock (Redis `TIME`, so replicas with skewed clocks agree), pruning of
 * expired leases and dead replicas' waiters, and handing free slots to the
 * head of the queue.
 *
 * KEYS: 1 queue, 2 seq, 3 waiters, 4 owners, 5 grants, 6 accepts, 7.. one lease ZSET per backend.
 * ARGV: 1 replica id, 2 model, 3 slots per backend, 4 lease/heartbeat TTL ms,
 *       5 replica channel prefix, 6 freed channel, 7 n backends,
 *       8..7+n backend names, 8+n..7+2n usable flags ('1'/'0'),
 *       then the script's own arguments from index `rest`.
 * Waiter ids are `<replica id>/<n>`; queue members are
 * `<14 hex priority>:<16 hex seq>:<waiter id>` (32 characters before the id).
 * Every script answers one JSON object: its fields plus `counts` (leases
 * per backend) and `handed` ([id, backend, ...] slots handed to this
 * replica's own waiters).
 */
export const SLOT_PRELUDE = `
local Q, SEQ, W, OWN, GR, ACC = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local me, model = ARGV[1], ARGV[2]
local slots, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local replica_channel, freed_channel = ARGV[5], ARGV[6]
local n = tonumber(ARGV[7])
local names, usable = {}, {}
for i = 1, n do
  names[i] = ARGV[7 + i]
  usable[i] = ARGV[7 + n + i] == '1'
end
local rest = 8 + 2 * n

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function lease_key(i) return KEYS[6 + i] end
local function count(i) return redis.call('ZCARD', KEYS[6 + i]) end
local function owner_of(id) return string.match(id, '^([^/]*)/') end
local function waiter_of(member) return string.sub(member, 33) end

local function index_of(name)
  for i = 1, n do if names[i] == name then return i end end
  return nil
end

local function drop_waiter(id)
  local member = redis.call('HGET', W, id)
  if not member then return false end
  redis.call('ZREM', Q, member)
  redis.call('HDEL', W, id)
  return true
end

-- Waiters and grants with no heartbeat left at all: every one of their replicas is dead. The
-- heartbeats lapse with the newest of them, and a replica killed while it was the only one with
-- waiters took them along: nothing showed its waiter dead, it stayed at the head for good and
-- every replica queued behind it (a Redis review). The queue keys themselves get no TTL: a
-- replica of an older build, mid-rollout, adds to them without renewing one, and they expired
-- under its live waiters (a code review).
local function forget_orphaned_queue()
  if redis.call('EXISTS', OWN) == 1 then return end
  redis.call('DEL', Q, W, GR)
end

-- Whether the lease a grant stands for is gone (pruned after it expired): its replica was frozen
-- past it and no script saw that replica dead, so its grant survived; the slot may be someone
-- else's by now (a code review ran two requests on a 1-slot backend). A backend this replica's
-- configuration does not name cannot be looked at, and the grant stands as before.
local function lease_lapsed(id, backend)
  local i = index_of(backend)
  return i ~= nil and not redis.call('ZSCORE', lease_key(i), id)
end

-- Expired leases, and the waiters and pending grants of replicas whose heartbeat lapsed.
local function prune()
  for i = 1, n do redis.call('ZREMRANGEBYSCORE', lease_key(i), '-inf', now) end
  forget_orphaned_queue()
  local dead = redis.call('ZRANGEBYSCORE', OWN, '-inf', now)
  if #dead == 0 then return end
  local gone = {}
  for _, rid in ipairs(dead) do gone[rid] = true end
  local all = redis.call('HGETALL', W)
  for i = 1, #all, 2 do
    if gone[owner_of(all[i])] then
      redis.call('ZREM', Q, all[i + 1])
      redis.call('HDEL', W, all[i])
    end
  end
  for _, id in ipairs(redis.call('HKEYS', GR)) do
    if gone[owner_of(id)] then redis.call('HDEL', GR, id) end
  end
  for _, rid in ipairs(dead) do redis.call('HDEL', ACC, rid) end
  redis.call('ZREMRANGEBYSCORE', OWN, '-inf', now)
end

-- The backends this replica's waiters can take (KEYS accepts): its configuration's, less those it
-- finds unusable (down by its own checks: a slot there handed to its waiter was a 502, and held up
-- the waiters that could use it). Said at each arrival and heartbeat; kept as long as its heartbeat.
local function say_accepts()
  local taken = {}
  for i = 1, n do
    if usable[i] then taken[#taken + 1] = names[i] end
  end
  redis.call('HSET', ACC, me, table.concat(taken, '\\n'))
  redis.call('PEXPIRE', ACC, ttl)
end

-- Whether the waiters of replica \`owner\` can take backend \`name\`. One that never said (an
-- older build) takes any, as before. \`seen\` caches each owner's set for one script run.
local function accepts(owner, name, seen)
  if owner == me then return index_of(name) ~= nil end
  local set = seen[owner]
  if set == nil then
    local raw = redis.call('HGET', ACC, owner)
    set = false
    if raw then
      set = {}
      for entry in string.gmatch(raw, '[^\\n]+') do set[entry] = true end
    end
    seen[owner] = set
  end
  return set == false or set[name] == true
end

-- How far down the queue a free slot looks for a waiter that can take it; past that, the
-- backstop's claims find it (each replica claims for its own waiters).
local SCAN = 64

-- The queue member of the first waiter (from the head) whose replica has backend i, or nil.
local function first_taker(i, seen)
  for _, member in ipairs(redis.call('ZRANGE', Q, 0, SCAN - 1)) do
    if accepts(owner_of(waiter_of(member)), names[i], seen) then return member end
  end
  return nil
end

-- Of the backends \`candidates\`, those whose first taker is queue member \`member\`.
local function firsts_for(member, candidates)
  local seen, out = {}, {}
  for _, i in ipairs(candidates) do
    if first_taker(i, seen) == member then out[#out + 1] = i end
  end
  return out
end

-- Indexes of the backends usable here with a free slot.
local function room()
  local out = {}
  for i = 1, n do
    if usable[i] and count(i) < slots then out[#out + 1] = i end
  end
  return out
end

local function names_of(indexes)
  local out = {}
  for _, i in ipairs(indexes) do out[#out + 1] = names[i] end
  return out
end

-- The preferred backend when it has room, else the only one with room, else nil (the caller's balancer chooses).
local function pick(candidates, preferred)
  for _, i in ipairs(candidates) do
    if names[i] == preferred then return i end
  end
  if #candidates == 1 then return candidates[1] end
  return nil
end

local handed = {}

-- Hands backend i's free slots to the first waiters whose replica has it: a lease in the waiter's
-- name, a grant record, and a message to its replica (or the reply, when it is this one).
-- A lease handed to another replica lasts no longer than that replica's
-- heartbeat: were it dead, its waiters would otherwise keep taking slots for
-- a TTL after its death and hold each for a TTL more. A live one renews the
-- lease (every TTL/3) long before: its heartbeat is at most a backstop old.
local function hand_off(i)
  local given = 0
  local seen = {}
  while count(i) < slots do
    local head = first_taker(i, seen)
    if not head then break end
    local id = waiter_of(head)
    local owner = owner_of(id)
    local expiry = now + ttl
    if owner ~= me then
      local beat = tonumber(redis.call('ZSCORE', OWN, owner))
      if beat and beat > now and beat < expiry then expiry = beat end
    end
    redis.call('ZREM', Q, head)
    redis.call('HDEL', W, id)
    redis.call('ZADD', lease_key(i), expiry, id)
    redis.call('HSET', GR, id, names[i])
    if owner == me then
      handed[#handed + 1] = id
      handed[#handed + 1] = names[i]
    else
      -- With the lease's expiry: a replica frozen past it reads the message late, when the lease
      -- and the grant are gone here, and must not use it (a Redis review ran a backend over its slots).
      redis.call('PUBLISH', replica_channel .. owner, cjson.encode({ kind = 'grant', model = model, id = id, backend = names[i], expires = expiry }))
    end
    given = given + 1
  end
  return given
end

-- Other replicas may see a backend as usable that this one does not: let them look.
local function announce_if_waiting(given)
  if given == 0 and redis.call('ZCARD', Q) > 0 then redis.call('PUBLISH', freed_channel, me) end
end

-- Counts of leases not yet expired: a script that does not prune (a renewal) must not report a dead
-- replica's expired leases as in flight (the balancer weighs these counts).
local function reply(fields)
  local counts = {}
  for i = 1, n do counts[i] = redis.call('ZCOUNT', lease_key(i), '(' .. now, '+inf') end
  fields.counts = counts
  fields.handed = handed
  -- Redis's clock when the script ran, so a replica can tell a grant message's expiry passed.
  fields.now = now
  return cjson.encode(fields)
end
`
