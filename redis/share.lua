-- cellrate's fleet shares as a Redis server-side script (docs/design/share.md).
-- The one copy, redis/share.lua, beside decide.lua and shipped the same way:
-- every face sends these exact bytes.
--
-- KEYS[1]: the fleet's hash. Field FLEET: 'ttl_us interval_us', the fleet's
-- own, fixed by its first heartbeat (until the hash expires, 2 ttl after the
-- last heartbeat). Field '<member>': 'seen_us demand grant' (the server's
-- clock, TIME, in whole microseconds; the member's demand as a fraction of
-- the fleet rate, in [0, 1], -1 while unknown; the share granted, a fraction
-- of the fleet), then, after a grant that shrank, ' held until_us': what the
-- member held before, counted as its share until then (its reply may take
-- that long to reach it). Field QUIET: the instant until which no grant grows
-- (the records were found incomplete).
-- ARGV: member, demand (units asked per second, -1: unknown), held (the
-- fraction the member holds now, 0 for a new member), ttl and interval (the
-- member's, in seconds, which must be the fleet's, compared in whole
-- microseconds), fleet rate (units per second), timeout (seconds: the longest
-- the member's heartbeat takes).
-- One heartbeat: drops the members silent for the fleet's ttl, records the
-- member, and answers { share, members, target }, the share and the target
-- (its max-min fair split of the fleet by demand) as decimal strings of
-- fractions. A member whose ttl or interval is not the fleet's is refused
-- (an error reply, REFUSED and the words naming the parameter; nothing
-- written).
-- The share never takes what the other members hold (the sum of the
-- recorded shares stays at most 1, but for FLOOR_DIVISOR's floors), and never
-- falls below the floor (never zero). Nothing the caller sends
-- widens what it is given: staleness is the fleet's ttl on this clock, a
-- demand counts at most the whole fleet, a holding at most what the records
-- granted the member.

-- The protocol: what the faces must agree on, read by them from the lines
-- below, NAME = value, one a line up to the first blank line.
local FLEET, QUIET = ':fleet', ':quiet'
-- The smallest share of a member among n: 1 / (FLOOR_DIVISOR * n).
local FLOOR_DIVISOR = 8
-- (The members' options, ttl's default of 3 intervals and timeout's among
-- them, are the core's table, cellrate/options.h.) The words of the refusals
-- (after the parameter's name) that this script says too, as the core's
-- statuses E_TTL_SHORT and E_MEMBER do (tests/python/test_share.py holds them
-- to each other).
local TTL_TOO_SHORT = 'must be longer than interval'
local MEMBER_REFUSED = 'must be a non-empty string without a colon'
local FLEET_FIXED = 'must be that of the fleet'
-- A refusal's error reply: 'ERR ' .. REFUSED .. ' <param> <words>'.
local REFUSED = 'cellrate: refused:'

local function micros(seconds)
    return seconds and math.floor(seconds * 1e6 + 0.5)
end
local key, member = KEYS[1], ARGV[1]
local demand_rate, held = tonumber(ARGV[2]), tonumber(ARGV[3])
local ttl_us, interval_us = micros(tonumber(ARGV[4])), micros(tonumber(ARGV[5]))
local fleet_rate, timeout_us = tonumber(ARGV[6]), micros(tonumber(ARGV[7]))
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- Refusals first: nothing is written for a heartbeat refused.
local function refused(words)
    return redis.error_reply('ERR ' .. REFUSED .. ' ' .. words)
end
if member == nil or member == '' or string.find(member, ':', 1, true) then
    return refused('member ' .. MEMBER_REFUSED)
end
if not (demand_rate and held and fleet_rate and timeout_us) then
    return redis.error_reply('ERR cellrate: a heartbeat takes numbers')
end
if not (interval_us and interval_us >= 1 and interval_us < 1e15) then
    return refused('interval must be from a microsecond to 1e9 s')
end
if not (ttl_us and ttl_us > interval_us) then
    return refused('ttl ' .. TTL_TOO_SHORT)
elseif ttl_us >= 1e15 then
    return refused('ttl must be less than 1e9 s')
end
local fleet = redis.call('HGET', key, FLEET)
if fleet then
    local fleet_ttl, fleet_interval = string.match(fleet, '^(%d+) (%d+)$')
    for _, param in ipairs({ { 'interval', tonumber(fleet_interval), interval_us },
                             { 'ttl', tonumber(fleet_ttl), ttl_us } }) do
        if param[2] ~= param[3] then
            return refused(string.format('%s %s (%.6g s, fixed when it was created), not %.6g s',
                param[1], FLEET_FIXED, param[2] / 1e6, param[3] / 1e6))
        end
    end
else
    redis.call('HSET', key, FLEET, string.format('%.0f %.0f', ttl_us, interval_us))
end

-- What the member asks, as a fraction of the fleet: at most all of it (a
-- larger demand splits as the whole fleet does); unknown (-1, as much as it
-- may) for a negative demand or none. What it holds: a fraction.
local demand = -1
if demand_rate >= 0 then
    demand = demand_rate / fleet_rate
    if demand ~= demand or demand < 0 then -- not a number (nor a rate)
        demand = -1
    elseif demand > 1 then
        demand = 1
    end
end
if held ~= held or held < 0 then
    held = 0
elseif held > 1 then
    held = 1
end
-- A shrunk grant counts at its old value for the member's interval and
-- timeout, never longer than ttl (a member silent that long drops out).
local hold_us = interval_us
if timeout_us > 0 then
    hold_us = math.min(interval_us + timeout_us, ttl_us)
end

local function parse(record)
    local seen, d, g, before, till = string.match(record, '^(%S+) (%S+) (%S+) ?(%S*) ?(%S*)$')
    return tonumber(seen), tonumber(d), tonumber(g), tonumber(before), tonumber(till)
end

-- The live members but this one: their demands and the sum of their shares.
local flat = redis.call('HGETALL', key)
local demands, others, known = { demand }, 0, false
local quiet_until = 0
local granted, granted_before, granted_till = 0, nil, nil
for i = 1, #flat, 2 do
    local field = flat[i]
    if field == QUIET then
        quiet_until = tonumber(flat[i + 1])
    elseif field == member then
        known = true
        local _
        _, _, granted, granted_before, granted_till = parse(flat[i + 1])
    elseif field ~= FLEET then
        local seen, d, g, before, till = parse(flat[i + 1])
        if seen < now_us - ttl_us then
            redis.call('HDEL', key, field)
        else
            demands[#demands + 1] = d
            if till and now_us < till then
                g = math.max(g, before)
            end
            others = others + g
        end
    end
end
-- What a known member holds is at most what the records granted it: its
-- grant, or a grant it held before one that shrank, until that one's instant.
local older = granted_till ~= nil and now_us < granted_till and granted_before > granted
if known and held > granted then
    held = older and math.min(held, granted_before) or granted
end
-- A member unknown here that holds a share where the fleet's record was
-- missing: the records were lost (a restart, an expiry). Others may hold
-- shares unknown here too: for ttl, while each live member heartbeats and
-- says what it holds, no grant grows. Outside such a quiet a member unknown
-- to whole records joins, whatever it says it holds (as one silent past ttl).
if not known and held > 0 then
    if not fleet then
        quiet_until = now_us + ttl_us
        redis.call('HSET', key, QUIET, string.format('%.0f', quiet_until))
    elseif now_us >= quiet_until then
        held = 0
    end
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
    -- the instant of a grant held before is never pushed back: a reply lost
    -- again leaves the member cut off (docs/design/share.md)
    local till = now_us + hold_us
    if older and held > granted then
        till = granted_till
    end
    record = record .. ' ' .. string.format('%.17g', held) .. ' ' .. string.format('%.0f', till)
end
redis.call('HSET', key, member, record)
redis.call('PEXPIRE', key, math.ceil(2 * ttl_us / 1000))
return { string.format('%.17g', share), n, string.format('%.17g', target) }
