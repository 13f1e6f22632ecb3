-- cellrate's concurrency limits as a Redis server-side script (docs/design/redis.md).
-- The one copy, lua/cellrate/redis_hold.lua, beside redis_decide.lua and
-- shipped the same way: both faces send these exact bytes.
--
-- KEYS[1]: the limit's key, a sorted set of the units held: one member a
-- unit, '<holder>:<unit>', scored by the instant its lease ends (server's
-- clock, TIME, in whole microseconds since the epoch: below 2^53, exact).
-- ARGV[1] is the mode:
--   ACQUIRE, limit, cost, lease_ns: drops the units whose lease ended, then
--     takes cost units when the units held and cost fit in limit. Returns the
--     holder (a string) of an admission, 0 for a refusal.
--   RELEASE, holder, cost: gives back the units of holder (those its lease
--     kept). Returns how many came back (0: released before, reclaimed, or
--     another's holder).
--   COUNT: the units held now, whose lease has not ended (writes nothing).
-- The key itself expires with its last lease, so a limit with nothing in
-- flight is an absent key.

-- The protocol: what both stores (cellrate.redis in Python and in Lua) must
-- agree on, read by both as the lines of redis_decide.lua's protocol are.
local COUNT = '0'
local ACQUIRE = '1'
local RELEASE = '2'
-- The name of a limit given none: this, then the limit (two limits of
-- another limit never share a key).
-- DEFAULT_NAME = 'concurrency'
-- What a store made without a lease says (no holder may keep units forever).
-- LEASE_REQUIRED = is required by the Redis store: the seconds after which units not released come back (a holder killed never releases)

local key = KEYS[1]
local mode = ARGV[1]
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

if mode == COUNT then
    return redis.call('ZCOUNT', key, '(' .. now_us, '+inf')
end

if mode == RELEASE then
    local holder, cost = ARGV[2], tonumber(ARGV[3])
    local released = 0
    for unit = 1, cost do
        released = released + redis.call('ZREM', key, holder .. ':' .. unit)
    end
    return released
end

local limit, cost, lease_ns = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now_us)
if redis.call('ZCARD', key) + cost > limit then
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
-- holding took the same microsecond.
local holder = clock[1] .. string.format('%06d', tonumber(clock[2]))
local again = 0
while redis.call('ZSCORE', key, holder .. (again > 0 and ('.' .. again) or '') .. ':1') do
    again = again + 1
end
if again > 0 then
    holder = holder .. '.' .. again
end
for unit = 1, cost do
    redis.call('ZADD', key, expiry_us, holder .. ':' .. unit)
end
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', key, math.floor(tonumber(last[2]) / 1000) + 1)
return holder
