-- cellrate's decisions as a Redis server-side script (docs/design.md §11).
-- The one copy: the Python package ships it as package data, the Lua module
-- installs it beside cellrate.redis; both send these exact bytes.
--
-- KEYS: one key per limit (a single limit is a list of one; several limits
-- are decided as one, so they must share a Cluster slot: hash tags).
-- ARGV: mode (1 check, 0 peek, 2 allow: as check, answering only the
-- verdict), cost, now (decimal ns, or "" for the server's TIME), then per
-- key: algorithm, emission_ns, tolerance_ns, burst (the core's cr_limit:
-- for the window algorithms tolerance_ns is the window and burst the rate).
-- Returns { allowed (1/0), remaining, retry_after_ns (-1: never),
--           reset_after_ns, index of the limit whose decision it is },
-- the times as integers, or as decimal strings from 9e15 ns on; in mode 2
-- the verdict alone (1/0).
--
-- Exactness: Redis's Lua numbers are doubles, and times since the epoch in
-- nanoseconds exceed 2^53. A time is kept as two numbers, whole seconds and
-- nanoseconds in [0, 1e9), each exact; a key's state is the core's state word
-- (docs/design.md §7) as a decimal string. Everything else is one number below
-- 2^53: the stores refuse a tolerance (or window) of 9e15 ns, 104 days, or
-- more. Divisions go through math.fmod, which is exact, and the window
-- algorithms' products of a count and a time through an exact two-product, so
-- no rounding ever reaches a decision.
--
-- Speed: Redis runs this whole chunk on every call, so each `local function`
-- costs a closure per call. The gcra path uses three; the window algorithms'
-- helpers are made only when a window limit is decided.

local E9 = 1000000000
local MAX_TOLERANCE = 9000000000000000 -- 9e15 ns: refused from here on
local NEVER = -1
local fmod = math.fmod

-- A decimal string of a non-negative int64 as (seconds, nanoseconds).
local function parse(text)
    local len = #text
    if len <= 9 then
        return 0, tonumber(text)
    end
    return tonumber(string.sub(text, 1, len - 9)), tonumber(string.sub(text, len - 8))
end

-- (seconds, nanoseconds) >= 0 as a decimal string.
local function format(s, ns)
    if s == 0 then
        return string.format('%d', ns)
    end
    return string.format('%d%09d', s, ns)
end

local mode = ARGV[1]
local commit = mode ~= '0'
local cost = tonumber(ARGV[2])
local ts, tns
local server_time = ARGV[3] == ''
if server_time then
    local time = redis.call('TIME')
    ts, tns = tonumber(time[1]), tonumber(time[2]) * 1000
else
    ts, tns = parse(ARGV[3])
end

-- Each algorithm decides for one key from its state word (ss, sns) and
-- returns the decision and the state word to store (nil: nothing to write),
-- following core/decision.h.

-- gcra and token_bucket: the state is the TAT; tolerance = emission * burst.
-- Worked relative to now: lead = max(TAT, now) - now.
local function decide_gcra(ss, sns, emission, tolerance, burst)
    local lead_s, lead_ns = ss - ts, sns - tns
    if lead_ns < 0 then
        lead_s, lead_ns = lead_s - 1, lead_ns + E9
    end
    if lead_s < 0 then
        lead_s, lead_ns = 0, 0 -- the TAT has passed: base = now
    end
    if lead_s >= 9000000 then
        -- 9e15 ns ahead and more (a clock that stepped back by months, a test's
        -- now): beyond every tolerance, so refused; exact times as strings
        local retry = NEVER
        if cost == 0 then
            retry = 0
        elseif cost <= burst then -- lead - (tolerance - cost * T)
            local gap = tolerance - cost * emission
            local gap_ns = fmod(gap, E9)
            local s, ns = lead_s - (gap - gap_ns) / E9, lead_ns - gap_ns
            if ns < 0 then
                s, ns = s - 1, ns + E9
            end
            retry = format(s, ns)
        end
        return { cost == 0 and 1 or 0, 0, retry, format(lead_s, lead_ns) }, nil
    end
    local lead = lead_s * E9 + lead_ns
    local retry = 0
    if cost > burst then
        retry = NEVER -- unfittable: cost * T > tolerance
    elseif cost > 0 then
        local next_lead = lead + cost * emission
        local allow_at = next_lead - tolerance
        if allow_at <= 0 then
            local add_ns = fmod(next_lead, E9)
            local s, ns = ts + (next_lead - add_ns) / E9, tns + add_ns
            if ns >= E9 then
                s, ns = s + 1, ns - E9
            end
            return { 1, (-allow_at - fmod(-allow_at, emission)) / emission, 0, next_lead },
                format(s, ns)
        end
        retry = allow_at
    end
    -- a turn-away, a probe or an unfittable cost: the units that fit at base
    local room, remaining = tolerance - lead, 0
    if room >= emission then
        remaining = (room - fmod(room, emission)) / emission
    end
    return { cost == 0 and 1 or 0, remaining, retry, lead }, nil
end

-- fixed_window and sliding_window, made on first use.
local windows

local function make_windows()
    local HUGE = 9007199254740992 -- 2^53: above every window

    local function split(x)
        local ns = fmod(x, E9)
        return (x - ns) / E9, ns
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

    -- a * b as p + e exactly (Dekker): p the rounded product, e the rest.
    local SPLITTER = 134217729 -- 2^27 + 1
    local function two_product(a, b)
        local p = a * b
        local c = SPLITTER * a
        local ah = c - (c - a)
        local al = a - ah
        c = SPLITTER * b
        local bh = c - (c - b)
        local bl = b - bh
        return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
    end

    -- a * b <= c * d, exactly. The rounding is monotonic: when the rounded
    -- products differ, they order as the exact ones (or these are equal).
    local function product_le(a, b, c, d)
        local p1, e1 = two_product(a, b)
        local p2, e2 = two_product(c, d)
        if p1 ~= p2 then
            return p1 < p2
        end
        return e1 <= e2
    end

    -- floor(a * b / m) when it is below 2^53: a float estimate, made exact.
    local function product_quotient(a, b, m)
        local q = math.floor(a * b / m)
        while q > 0 and not product_le(q, m, a, b) do
            q = q - 1
        end
        while product_le(q + 1, m, a, b) do
            q = q + 1
        end
        return q
    end

    -- (a + b) mod m for 0 <= a, b < m < 2^53, with no sum reaching 2^53.
    local function add_mod(a, b, m)
        if a >= m - b then
            return a - (m - b)
        end
        return a + b
    end

    -- A time (s, ns) modulo m < 2^53: s * 1e9 as p + e, each reduced exactly.
    local function time_mod(s, ns, m)
        local p, e = two_product(fmod(s, m), E9)
        e = fmod(e, m)
        if e < 0 then
            e = e + m
        end
        return add_mod(add_mod(fmod(p, m), e, m), fmod(ns, m), m)
    end

    -- fixed_window: the state is end + count, `end` the end of the key's window.
    local function decide_fixed(ss, sns, window, rate)
        local es, ens = sub(ts, tns, split(time_mod(ts, tns, window)))
        es, ens = add(es, ens, split(window))
        local count = 0
        if not less(ss, sns, es, ens) then
            -- the current window, or a later one (the clock stepped back)
            if number(sub(ss, sns, es, ens)) >= window then
                es, ens = sub(ss, sns, split(time_mod(ss, sns, window)))
            end
            count = number(sub(ss, sns, es, ens))
        end
        local allowed = cost == 0 or cost <= rate - count
        local write = nil
        if allowed and cost > 0 then
            count = count + cost
            write = format(add(es, ens, split(count)))
        end
        local retry = 0
        if not allowed then
            retry = cost > rate and NEVER or format(sub(es, ens, ts, tns))
        end
        local reset = count > 0 and format(sub(es, ens, ts, tns)) or 0
        return { allowed and 1 or 0, rate - count, retry, reset }, write
    end

    -- The least e in [0, P] with prev * (P - e) <= budget * P (prev > 0, budget >= 0).
    local function sliding_earliest(window, prev, budget)
        if budget >= prev then
            return 0
        end
        return window - product_quotient(budget, window, prev)
    end

    -- sliding_window: the state is (k + 2) * P + prev * (rate + 1) + curr.
    local function decide_sliding(ss, sns, window, rate)
        local radix = rate + 1
        local elapsed = time_mod(ts, tns, window)
        local starts, startns = sub(ts, tns, split(elapsed))
        local bs, bns = add(starts, startns, split(2 * window))
        local prev, curr = 0, 0
        if not less(ss, sns, bs, bns) then
            -- the current window, or a later one (the clock stepped back)
            if number(sub(ss, sns, bs, bns)) >= window then
                bs, bns = sub(ss, sns, split(time_mod(ss, sns, window)))
                starts, startns = sub(bs, bns, split(2 * window))
                elapsed = 0 -- the previous window weighs fully: only stricter
            end
            local packed = number(sub(ss, sns, bs, bns))
            prev = (packed - fmod(packed, radix)) / radix
            curr = packed - prev * radix
        else
            local ps, pns = sub(bs, bns, split(window))
            if not less(ss, sns, ps, pns) then -- the previous window: its count is prev
                prev = fmod(number(sub(ss, sns, ps, pns)), radix)
            end
        end
        local allowed
        if cost == 0 then
            allowed = true
        elseif cost > rate - curr then
            allowed = false
        else
            allowed = prev == 0 or product_le(prev, window - elapsed, rate - curr - cost, window)
        end
        local write = nil
        if allowed and cost > 0 then
            curr = curr + cost
            write = format(add(bs, bns, split(prev * radix + curr)))
        end
        -- rate - curr - ceil(prev * (P - elapsed) / P), at least 0
        local held = product_quotient(prev, window - elapsed, window)
        if not product_le(prev, window - elapsed, held, window) then
            held = held + 1
        end
        local remaining = math.max(0, rate - curr - held)
        local retry = 0
        if not allowed then
            if cost > rate then
                retry = NEVER
            else
                local budget = rate - curr - cost
                local at_s, at_ns
                if budget >= 0 and prev > 0 and sliding_earliest(window, prev, budget) < window then
                    at_s, at_ns = add(starts, startns, split(sliding_earliest(window, prev, budget)))
                elseif curr <= rate - cost then
                    at_s, at_ns = add(starts, startns, split(window))
                else -- the window after next at the latest
                    at_s, at_ns = add(starts, startns, split(window))
                    at_s, at_ns = add(at_s, at_ns, split(sliding_earliest(window, curr, rate - cost)))
                end
                retry = format(sub(at_s, at_ns, ts, tns))
            end
        end
        local reset = 0
        if curr > 0 or prev > 0 then
            local rs, rns = add(starts, startns, split(curr > 0 and 2 * window or window))
            reset = format(sub(rs, rns, ts, tns))
        end
        return { allowed and 1 or 0, remaining, retry, reset }, write
    end

    return { fixed_window = decide_fixed, sliding_window = decide_sliding }
end

-- States admitted by earlier limits of this call, by key: a key named twice
-- decides the second time on what the first would store.
local pending = {}

-- Decides for one limit; returns the decision and the state to store (or nil).
local function decide(key, algorithm, emission, tolerance, burst)
    if tolerance >= MAX_TOLERANCE then
        return redis.error_reply('cellrate: tolerance or window of 9e15 ns or more')
    end
    local stored = pending[key] or redis.call('GET', key)
    local ss, sns = 0, 0
    if stored then
        ss, sns = parse(stored)
    end
    if algorithm == 'gcra' or algorithm == 'token_bucket' then
        return decide_gcra(ss, sns, emission, tolerance, burst)
    end
    windows = windows or make_windows()
    local decide_window = windows[algorithm]
    if not decide_window then
        return redis.error_reply('cellrate: unknown algorithm ' .. algorithm)
    end
    return decide_window(ss, sns, tolerance, burst)
end

local decisions, writes = {}, {}
local all_allowed = true
for i = 1, #KEYS do
    local base = 3 + (i - 1) * 4
    local decision, write = decide(KEYS[i], ARGV[base + 1], tonumber(ARGV[base + 2]),
                                   tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]))
    if decision.err then
        return decision
    end
    decision[5] = i
    decisions[i], writes[i] = decision, write
    if write then
        pending[KEYS[i]] = write
    end
    all_allowed = all_allowed and decision[1] == 1
end

-- Several limits: the tightest decision, chosen as the core's cr_check_all
-- chooses (docs/design.md §8), ties included: admitted, the fewest remaining,
-- the last limit on a tie (the core commits it first); refused, the longest
-- retry_after (never the longest of all), the last limit on a tie when only
-- it refused, else the first.
local tightest = decisions[1]
if #KEYS > 1 then
    local function retry_of(decision)
        local retry = tonumber(decision[3])
        return retry == NEVER and math.huge or retry
    end
    local n = #decisions
    tightest = decisions[n]
    if all_allowed then
        for i = 1, n - 1 do
            if decisions[i][2] < tightest[2] then
                tightest = decisions[i]
            end
        end
    else
        local refused = true -- whether the last limit alone can have refused so far
        for i = 1, n - 1 do
            if decisions[i][1] == 0 then
                refused = false
                break
            end
        end
        for i = 1, n do
            local d = decisions[i]
            if d[1] == 0 and (not refused or retry_of(d) > retry_of(tightest)) then
                tightest, refused = d, true
            end
        end
    end
end

if commit and all_allowed then
    for i = 1, #KEYS do
        if writes[i] then
            if server_time then
                -- the key expires when its state stops mattering (reset_after):
                -- from then on it is the same as absent (ms, rounded up)
                local reset, ms = decisions[i][4], 0
                if type(reset) == 'string' then
                    local s, ns = parse(reset)
                    ms = s * 1000 + (ns + 999999 - fmod(ns + 999999, 1000000)) / 1000000
                else
                    ms = (reset + 999999 - fmod(reset + 999999, 1000000)) / 1000000
                end
                redis.call('SET', KEYS[i], writes[i], 'PX', math.max(1, ms))
            else
                -- an explicit now is not the server's clock: no expiry
                redis.call('SET', KEYS[i], writes[i])
            end
        end
    end
end
if mode == '2' then
    return tightest[1]
end
return tightest
