-- cellrate's decision as a Redis server-side script (docs/design.md §11).
-- The one copy: the Python package ships it as package data, the Lua module
-- installs it beside cellrate.redis; both send these exact bytes.
--
-- KEYS: one key per limit (a single limit is a list of one; several limits
-- are decided as one, so they must share a Cluster slot: hash tags).
-- ARGV: mode (1 check, 0 peek, 2 allow: as check, answering only the
-- verdict), cost, now (decimal ns, or "" for the server's TIME), then per
-- key: algorithm, emission_ns, burst.
-- Returns { allowed (1/0), remaining, retry_after_ns ("-1": never),
--           reset_after_ns, index of the limit whose decision it is },
-- or in mode 2 the verdict alone (1/0).
--
-- Exactness: Redis's Lua numbers are doubles, and times since the epoch in
-- nanoseconds exceed 2^53. A time is kept as two numbers, whole seconds and
-- nanoseconds in [0, 1e9), each exact; a key's state is the core's state word
-- (its TAT in ns) as a decimal string. The limit's own quantities (emission_ns,
-- tolerance = emission_ns * burst, cost * emission_ns) are single numbers: the
-- stores refuse a tolerance of 9e15 ns (104 days) or more. Divisions go through math.fmod,
-- which is exact, so no rounding ever reaches a decision.

local E9 = 1000000000
local MAX_TOLERANCE = 9000000000000000   -- 9e15 ns (104 days): refused from here on
local HUGE = 9007199254740992             -- 2^53: above every tolerance
local MAX_S, MAX_NS = 9223372036, 854775807   -- INT64_MAX ns, where the core saturates

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1, exactly.
local function quotient(a, b)
    return (a - math.fmod(a, b)) / b
end

-- A non-negative integer below 2^53 as (seconds, nanoseconds).
local function split(x)
    local ns = math.fmod(x, E9)
    return (x - ns) / E9, ns
end

-- A decimal string of a non-negative int64 as (seconds, nanoseconds).
local function parse(text)
    local len = #text
    if len <= 9 then
        return 0, tonumber(text)
    end
    return tonumber(string.sub(text, 1, len - 9)), tonumber(string.sub(text, len - 8))
end

local function format(s, ns)
    if s == 0 then
        return string.format('%d', ns)
    end
    return string.format('%d%09d', s, ns)
end

local function add(as, ans, bs, bns)
    local s, ns = as + bs, ans + bns
    if ns >= E9 then
        return s + 1, ns - E9
    end
    return s, ns
end

local function sub(as, ans, bs, bns)
    local s, ns = as - bs, ans - bns
    if ns < 0 then
        return s - 1, ns + E9
    end
    return s, ns
end

local function less(as, ans, bs, bns)
    return as < bs or (as == bs and ans < bns)
end

-- A non-negative difference as one number, HUGE from MAX_TOLERANCE on.
local function number(s, ns)
    if s >= 9000000 then
        return HUGE
    end
    return s * E9 + ns
end

local commit = ARGV[1] ~= '0'
local cost = tonumber(ARGV[2])
local ts, tns
local server_time = ARGV[3] == ''
if server_time then
    local time = redis.call('TIME')
    ts, tns = tonumber(time[1]), tonumber(time[2]) * 1000
else
    ts, tns = parse(ARGV[3])
end

-- Decides for one limit; returns the decision and the TAT to store (or nil).
local function decide(key, algorithm, emission, burst)
    if algorithm ~= 'gcra' and algorithm ~= 'token_bucket' then
        return redis.error_reply('cellrate: unknown algorithm ' .. algorithm)
    end
    local tau = emission * burst
    if tau >= MAX_TOLERANCE then
        return redis.error_reply('cellrate: tolerance of 9e15 ns or more')
    end
    local taus, tauns = split(tau)
    local stored = redis.call('GET', key)
    local bs, bns = 0, 0
    if stored then
        bs, bns = parse(stored)
    end
    if less(bs, bns, ts, tns) then
        bs, bns = ts, tns
    end
    local leads, leadns = sub(bs, bns, ts, tns)
    local fits, allowed, retry = cost <= burst, cost == 0, '0'
    if fits and cost > 0 then
        local ns_, nns = add(bs, bns, split(cost * emission))
        if ns_ > MAX_S or (ns_ == MAX_S and nns > MAX_NS) then
            ns_, nns = MAX_S, MAX_NS
        end
        local as, ans = sub(ns_, nns, taus, tauns)
        if not less(ts, tns, as, ans) then
            local fs, fns = sub(ts, tns, as, ans)
            return { 1, quotient(number(fs, fns), emission), '0',
                     format(sub(ns_, nns, ts, tns)) }, format(ns_, nns)
        end
        retry = format(sub(as, ans, ts, tns))
    elseif not fits then
        retry = '-1'
    end
    -- a turn-away, a probe or an unfittable cost: the units that fit at base
    local room = tau - number(leads, leadns)
    local remaining = 0
    if room >= emission then
        remaining = quotient(room, emission)
    end
    return { allowed and 1 or 0, remaining, retry, format(leads, leadns) }, nil
end

local decisions, writes = {}, {}
local all_allowed = true
for i = 1, #KEYS do
    local base = 3 + (i - 1) * 3
    local decision, write = decide(KEYS[i], ARGV[base + 1], tonumber(ARGV[base + 2]),
                                   tonumber(ARGV[base + 3]))
    if decision.err then
        return decision
    end
    decision[5] = i
    decisions[i], writes[i] = decision, write
    all_allowed = all_allowed and decision[1] == 1
end

-- retry_after_ns as a sortable number: "-1" (never) above everything
local function retry_of(decision)
    if decision[3] == '-1' then
        return math.huge
    end
    return number(parse(decision[3]))
end

local tightest = decisions[1]
for i = 2, #decisions do
    local d = decisions[i]
    if all_allowed then
        if d[2] < tightest[2] then
            tightest = d
        end
    elseif retry_of(d) > retry_of(tightest) then
        tightest = d
    end
end
if commit and all_allowed then
    for i = 1, #KEYS do
        if writes[i] then
            if server_time then
                -- the key expires when its TAT passes: from then on it is the
                -- same as absent (milliseconds, rounded up)
                local s, ns = parse(decisions[i][4])
                local ms = math.max(1, s * 1000 + quotient(ns + 999999, 1000000))
                redis.call('SET', KEYS[i], writes[i], 'PX', ms)
            else
                -- an explicit now is not the server's clock: no expiry
                redis.call('SET', KEYS[i], writes[i])
            end
        end
    end
end
if ARGV[1] == '2' then
    return tightest[1]
end
return tightest
