-- cellrate's fleet shares as a Redis server-side script (docs/design/share.md).
-- The one copy, lua/cellrate/redis_share.lua, beside redis_decide.lua and
-- shipped the same way: every face sends these exact bytes.
--
-- KEYS[1]: the fleet's hash. Field '<member>': 'seen_us demand grant' (the
-- server's clock, TIME, in whole microseconds; the member's demand as a
-- fraction of the fleet rate, -1 while unknown; the share granted, a
-- fraction of the fleet), then, after a grant that shrank, ' held until_us':
-- what the member held before, counted as its share until then (its reply
-- may take that long to reach it). Field QUIET: the instant until which no
-- grant grows (the records were found incomplete).
-- ARGV: member, demand (units asked per second, -1: unknown), held (the
-- fraction the member holds now, 0 for a new member), ttl_us, fleet rate
-- (units per second), hold_us (how long a shrunk grant counts at its old
-- value: the member's interval and timeout).
-- One heartbeat: drops the members silent for ttl, records the member, and
-- answers { share, members, target }, the share and the target (its max-min
-- fair split of the fleet by demand) as decimal strings of fractions.
-- The share never takes what the other members hold (the sum of the
-- recorded shares stays at most 1, but for FLOOR_DIVISOR's floors), and never
-- falls below the floor (never zero).

-- The protocol: what the faces must agree on, read by them from the lines
-- below, NAME = value, one a line up to the first blank line.
local QUIET = ':quiet'
-- The smallest share of a member among n: 1 / (FLOOR_DIVISOR * n).
local FLOOR_DIVISOR = 8
-- The heartbeats a member may miss before it drops out (ttl's default).
-- TTL_INTERVALS = 3
-- The longest a heartbeat's reply takes (timeout's default, seconds).
-- DEFAULT_TIMEOUT_S = 0.25
-- The words of the faces' refusals (after the parameter's name).
-- SECONDS_REFUSED = 'must be finite and > 0 (seconds)'
-- TTL_TOO_SHORT = 'must be longer than interval'
-- MEMBER_REFUSED = 'must be a non-empty string without a colon'
-- LOCAL_REFUSED = 'is not taken by a share store: its local limiter follows the share'
-- NAME_REQUIRED = 'is required: the fleet's name, the same on every member'

local key, member = KEYS[1], ARGV[1]
local demand_rate, held = tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl_us, fleet_rate, hold_us = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local demand = -1
if demand_rate >= 0 then
    demand = demand_rate / fleet_rate
end
if held < 0 then
    held = 0
elseif held > 1 then
    held = 1
end

-- The live members but this one: their demands and the sum of their shares.
local flat = redis.call('HGETALL', key)
local demands, others, known = { demand }, 0, false
local quiet_until = 0
for i = 1, #flat, 2 do
    local field = flat[i]
    if field == QUIET then
        quiet_until = tonumber(flat[i + 1])
    elseif field == member then
        known = true
    else
        local seen, d, g, before, till = string.match(flat[i + 1],
            '^(%S+) (%S+) (%S+) ?(%S*) ?(%S*)$')
        if tonumber(seen) < now_us - ttl_us then
            redis.call('HDEL', key, field)
        else
            demands[#demands + 1] = tonumber(d)
            g = tonumber(g)
            if till ~= '' and now_us < tonumber(till) then
                g = math.max(g, tonumber(before))
            end
            others = others + g
        end
    end
end
-- A member unknown here that holds a share: the records lost it (a restart, a
-- silence past ttl). Others may hold shares unknown here too: for ttl, while
-- each live member heartbeats, no grant grows.
if not known and held > 0 then
    quiet_until = now_us + ttl_us
    redis.call('HSET', key, QUIET, string.format('%.0f', quiet_until))
end

-- Max-min fairness (water-filling) of the whole fleet, 1, by demand (-1:
-- unknown, as much as it may): the level L with sum(min(d, L)) = 1; when the
-- demands sum to less, each gets its demand and an equal part of the rest.
local n = #demands
table.sort(demands, function(a, b)
    return (a < 0 and math.huge or a) < (b < 0 and math.huge or b)
end)
local left, level = 1, nil
for i = 1, n do
    local d = demands[i]
    local fair = left / (n - i + 1)
    if d < 0 or d > fair then
        level = fair
        break
    end
    left = left - d
end
local target
if level == nil then
    target = math.max(demand, 0) + left / n
elseif demand < 0 or demand > level then
    target = level
else
    target = demand
end

local share = math.min(target, 1 - others)
if now_us < quiet_until and share > held then
    share = held
end
local floor = 1 / (FLOOR_DIVISOR * n)
if share < floor then
    share = floor
end

local record = string.format('%.0f', now_us) .. ' ' .. string.format('%.17g', demand) .. ' ' ..
    string.format('%.17g', share)
if share < held then
    record = record .. ' ' .. string.format('%.17g', held) .. ' ' ..
        string.format('%.0f', now_us + hold_us)
end
redis.call('HSET', key, member, record)
redis.call('PEXPIRE', key, math.ceil(2 * ttl_us / 1000))
return { string.format('%.17g', share), n, string.format('%.17g', target) }
