/**
 * Per-key limit scripts: the token buckets of scheduling/token-bucket.ts in
 * Lua (same formulas, same order of operations, so both stores compute the
 * same Retry-After), and the key's concurrency as a ZSET of tickets with
 * expiries, so a dead replica's share expires.
 *
 * KEYS: 1 rate hash (ru, rt: requests bucket use and time; tu, tt: tokens), 2 active tickets ZSET.
 * ARGV[1] is the time in ms, or '' to use Redis `TIME` (the default: replicas
 * with skewed clocks agree; tests pass a hand-moved clock).
 */
const KEY_PRELUDE = `
local now
if ARGV[1] == '' then
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local WINDOW = 60000

-- refill() of token-bucket.ts: what was used, draining at the current rate; a missing bucket has used nothing;
-- a clock that steps back counts nothing twice. Fields ru/rt (requests) and tu/tt (tokens): what is used, not
-- what is left (the rl/ra and tl/ta of earlier versions are ignored, and expire).
local function refill(field, per)
  local used = tonumber(redis.call('HGET', KEYS[1], field .. 'u'))
  local at = tonumber(redis.call('HGET', KEYS[1], field .. 't'))
  if used == nil or at == nil then return 0, now end
  if now <= at then return used, at end
  return math.max(0, used - ((now - at) * per) / WINDOW), now
end

local function wait_for(used, needed, per)
  local shortfall = used + needed - per
  if shortfall <= 0 then return 0 end
  return math.ceil((shortfall * WINDOW) / per)
end

local function store(field, used, at, per)
  redis.call('HSET', KEYS[1], field .. 'u', string.format('%.17g', used), field .. 't', string.format('%.17g', at))
  -- Once drained a bucket equals a missing one: let Redis forget it then, and not before a minute is
  -- out: a reload that lowers the limit drains the same use more slowly than the expiry set under the
  -- old one (a code review: 2 of 10 used, lowered to 3, gone at 13 s where 1.3 were still used).
  local drained_in = math.max(WINDOW, math.ceil((used * WINDOW) / per))
  local keep = tonumber(redis.call('PTTL', KEYS[1]))
  if drained_in + 1000 > keep then redis.call('PEXPIRE', KEYS[1], drained_in + 1000) end
end
`

/**
 * ARGV: now, max concurrency, requests per minute, tokens per minute (0 = no
 * limit), ticket id, ticket TTL ms. Checks in the memory limiter's order:
 * concurrency, tokens, requests; a refusal takes nothing.
 */
const ADMIT = `
local max_concurrency, rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ticket, ttl = ARGV[5], tonumber(ARGV[6])
local twait, rwait, rused, rat = 0, 0, 0, now
if tpm > 0 then
  local used = refill('t', tpm)
  if not (used < tpm) then twait = wait_for(used, 1, tpm) end
end
if rpm > 0 then
  rused, rat = refill('r', rpm)
  -- takeRequest(): use counts at most a minute's allowance (more only after a reload lowered the limit),
  -- and the cap is kept, refused or not, or every try would start again from the old use.
  if rused > rpm then
    rused = rpm
    store('r', rused, rat, rpm)
  end
  if rused + 1 > rpm then rwait = wait_for(rused, 1, rpm) end
end
-- Every refusal's Retry-After is when all of the key's limits let it in.
local wait = math.max(twait, rwait)
if max_concurrency > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local active = redis.call('ZCARD', KEYS[2])
  if active >= max_concurrency then return cjson.encode({ status = 'concurrency', active = active, retry = wait }) end
end
if twait > 0 then return cjson.encode({ status = 'rate_limit_tokens', retry = wait }) end
if rwait > 0 then return cjson.encode({ status = 'rate_limit_requests', retry = wait }) end
if rpm > 0 then store('r', rused + 1, rat, rpm) end
if max_concurrency > 0 then
  redis.call('ZADD', KEYS[2], now + ttl, ticket)
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
return cjson.encode({ status = 'admitted' })
`

/**
 * ARGV: now, requests per minute, tokens per minute (0 = no limit), requests,
 * tokens, and for a carry the ms its id is remembered. Counts use against the
 * buckets: an answer's tokens when it ends, and what a replica admitted on its
 * local limits while Redis was away. KEYS[3], a carry's marker, makes a carry
 * sent again (its first answer lost) count once: 'repeat' counts nothing.
 */
const DEBIT = `
if KEYS[3] and not redis.call('SET', KEYS[3], '1', 'NX', 'PX', tonumber(ARGV[6])) then return 'repeat' end
local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local requests, tokens = tonumber(ARGV[4]), tonumber(ARGV[5])
if rpm > 0 and requests > 0 then
  local used, at = refill('r', rpm)
  store('r', used + requests, at, rpm)
end
if tpm > 0 and tokens > 0 then
  local used, at = refill('t', tpm)
  store('t', used + tokens, at, tpm)
end
return 'debited'
`

/** ARGV: now, ticket TTL ms, ticket ids. Renews (or puts back) the tickets still held. */
const RENEW = `
local ttl = tonumber(ARGV[2])
for k = 3, #ARGV do redis.call('ZADD', KEYS[2], now + ttl, ARGV[k]) end
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return 'renewed'
`

/**
 * Redis is reachable again: a replica's tickets that none of its requests
 * holds are dropped (an admission whose answer was lost with the
 * connection, a release while Redis hung). ARGV: now, replica id, the
 * highest id serial it handed out before the reconnection (newer tickets
 * may belong to calls still on the wire), then the tickets it holds.
 */
const RECONCILE = `
local me, below = ARGV[2], tonumber(ARGV[3])
local kept = {}
for k = 4, #ARGV do kept[ARGV[k]] = true end
local dropped = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local owner, serial = string.match(id, '^([^/]*)/(%w+)$')
  if owner == me and not kept[id] and (tonumber(serial, 36) or math.huge) <= below then
    redis.call('ZREM', KEYS[2], id)
    dropped = dropped + 1
  end
end
return dropped
`

export const KEY_SCRIPTS = {
  sluiceKeyAdmit: KEY_PRELUDE + ADMIT,
  sluiceKeyDebit: KEY_PRELUDE + DEBIT,
  sluiceKeyRenew: KEY_PRELUDE + RENEW,
  sluiceKeyReconcile: KEY_PRELUDE + RECONCILE,
} as const

export type KeyScript = keyof typeof KEY_SCRIPTS
