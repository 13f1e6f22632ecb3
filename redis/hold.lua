-- cellrate's concurrency limits as a Redis server-side script (docs/design/redis.md).
-- The one copy, redis/hold.lua, beside decide.lua and shipped the same way:
-- both faces send these exact bytes.
--
-- KEYS[1]: the limit's key, a sorted set of the holdings: one member a
-- holding, '<holder>/<cost>', scored by the instant its lease ends (server's
-- clock, TIME, in whole microseconds since the epoch: below 2^53, exact), so
-- a holding costs the same at any cost. The units beyond one per holding are
-- the score of the member EXTRA, less EXTRA_BASE (above every lease's end, so
-- no range of leases meets it); absent, every holding is one unit. Units held
-- = members - (1 when EXTRA is there) + extra. A member without '/' is a unit
-- of the earlier layout ('<holder>:<unit>', one member a unit): one unit,
-- read as it is.
-- ARGV[1] is the mode:
--   ACQUIRE, limit, cost, lease_ns: gives back up to RECLAIM_MAX holdings
--     whose lease ended, then takes cost units when the units held and cost
--     fit in limit. Returns the holder (a string) of an admission, 0 for a
--     refusal.
--   RELEASE, holder, cost: gives back the holding of holder (unless it was
--     reclaimed). Returns how many units came back (0: released before,
--     reclaimed, or another's holder).
--   COUNT: the units held now, whose lease has not ended (writes nothing).
-- Each call's work is bounded, whatever the cost: an acquire reclaims at most
-- RECLAIM_MAX holdings (the units of more stay counted, so a refusal may come
-- early, never an admission over the limit, until the next calls reclaim
-- them). The key itself expires with its last lease, so a limit with nothing
-- in flight is an absent key.

-- The protocol: what both stores (cellrate.redis in Python and in Lua) must
-- agree on, read by both as the lines of decide.lua's protocol are.
local COUNT = '0'
local ACQUIRE = '1'
local RELEASE = '2'
-- The name of a limit given none: this, then the limit (two limits of
-- another limit never share a key).
-- DEFAULT_NAME = 'concurrency'
-- (A store made without a lease is refused by the core's options table:
-- no holder may keep units forever.)

local EXTRA = 'extra'
local EXTRA_BASE = 9000000000000000
local BELOW_EXTRA = '(9000000000000000' -- a range's exclusive bound, below EXTRA
local RECLAIM_MAX = 200

local key = KEYS[1]
local mode = ARGV[1]

if mode == RELEASE then
    local holder, cost = ARGV[2], tonumber(ARGV[3])
    if redis.call('ZREM', key, holder .. '/' .. ARGV[3]) == 0 then
        return 0
    end
    if cost > 1 and tonumber(redis.call('ZINCRBY', key, 1 - cost, EXTRA)) <= EXTRA_BASE then
        redis.call('ZREM', key, EXTRA)
    end
    return cost
end

local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
-- The units beyond one per holding (EXTRA's score less EXTRA_BASE; absent, none).
local extra_score = redis.call('ZSCORE', key, EXTRA)
local extra = extra_score and tonumber(extra_score) - EXTRA_BASE or 0
-- The holdings whose lease ended, at most RECLAIM_MAX, and the units beyond one
-- per holding among them (a member without '/', of the earlier layout, is one unit).
local ended = redis.call('ZRANGEBYSCORE', key, '-inf', now_us, 'LIMIT', 0, RECLAIM_MAX)
local ended_extra = 0
if extra_score then
    for i = 1, #ended do
        local units = string.match(ended[i], '/(%d+)$')
        if units then
            ended_extra = ended_extra + tonumber(units) - 1
        end
    end
end

if mode == COUNT then
    -- (a number joined to a string keeps 14 digits only: formatted)
    return redis.call('ZCOUNT', key, string.format('(%d', now_us), BELOW_EXTRA)
        + extra - ended_extra
end

local limit, cost, lease_ns = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
if #ended > 0 then
    redis.call('ZREM', key, unpack(ended))
end
local held = redis.call('ZCARD', key) - (extra_score and 1 or 0) + extra - ended_extra
local admitted = held + cost <= limit
-- EXTRA as it must be now: without the holdings reclaimed, with the one taken
local new_extra = extra - ended_extra + (admitted and cost - 1 or 0)
if new_extra ~= extra then
    if new_extra > 0 then
        redis.call('ZADD', key, EXTRA_BASE + new_extra, EXTRA)
    elseif extra_score then
        redis.call('ZREM', key, EXTRA)
    end
end
if not admitted then
    return 0
end
-- The lease in whole microseconds, rounded up, from its decimal digits
-- (tonumber of the whole would round a lease past 2^53 ns).
local lease_us = 0
if #lease_ns > 3 then
    lease_us = tonumber(string.sub(lease_ns, 1, -4))
end
if tonumber(string.sub(lease_ns, -3)) > 0 then
    lease_us = lease_us + 1
end
local expiry_us = now_us + lease_us
-- A holder unique in this key: the instant, and a count when another
-- holding of this cost took the same microsecond.
local holder = clock[1] .. string.format('%06d', tonumber(clock[2]))
local again = 0
while redis.call('ZADD', key, 'NX', expiry_us, holder .. (again > 0 and ('.' .. again) or '')
                 .. '/' .. ARGV[3]) == 0 do
    again = again + 1
end
if again > 0 then
    holder = holder .. '.' .. again
end
local last = redis.call('ZREVRANGEBYSCORE', key, BELOW_EXTRA, '-inf', 'WITHSCORES',
                        'LIMIT', 0, 1)
redis.call('PEXPIREAT', key, math.floor(tonumber(last[2]) / 1000) + 1)
return holder
