-- cellrate's decisions as a Redis server-side script (docs/design.md §11).
-- The one copy, redis/decide.lua: the rock installs it beside cellrate.redis,
-- the Python package ships it as package data; both send these exact bytes.
--
-- KEYS: one key per limit (a single limit is a list of one; several limits
-- are decided as one, so they must share a Cluster slot: hash tags), then,
-- with on_wipe = 'refuse', the wipe marker of the first key's slot (below),
-- then under a penalty the key's strikes' key (in its slot).
-- ARGV: mode (1 check, 0 peek, 2 allow: as check, answering 1 for an
-- admission, 3 refund: one key, answering 1 or 0, below; 4 charge and 5 take:
-- one key, below), cost (take: the most units), then per key: algorithm, emission_ns, tolerance_ns, burst
-- (the core's cr_limit: for the window algorithms tolerance_ns is the window
-- and burst the rate; a calendar quota, 'calendar', sends in the place of
-- emission_ns and tolerance_ns its periods' bounds and its name, below),
-- then a charge's max_debt (units), then a class's
-- reserve, then a penalty's word, '<after>:<strike_ns>:<ban_ns>:<max_ban_ns>'
-- (modes 65 and 66: check and allow under a penalty), then now (decimal ns;
-- absent: the server's TIME). The faces build these words with the
-- core's cr_redis_request and read the reply with cr_redis_read_reply
-- (core/cellrate/redis.h).
-- Each key's value is the limit it was written under and its state word,
-- '<algorithm>:<tolerance_ns>:<burst> <state>': a call with another limit
-- under the same key (a live change: docs/design.md §11) carries the state
-- to the limit sent, as the core's cr_carry, and writes it with a check or an
-- allow, admitted or not. A bare state word (the layout before names) is read
-- under the limit sent. A held algorithm other than the one sent is an error
-- reply ('ERR ' .. ALGORITHM_REPLY ...).
-- Returns { allowed (1/0), remaining, retry_after_ns (-1: never),
--           reset_after_ns, index of the limit whose decision it is },
-- the times as integers, or as decimal strings from 9e15 ns on; in mode 2
-- an admission is answered 1 alone. A charge (the core's cr_charge) is that
-- check where the cost fits; else it commits the cost into debt, refused,
-- with the decision of one more unit on the state charged, and answers a
-- sixth field, clipped (1: the debt met its bound: the limit's max_debt
-- units beyond it, and at most MAX_DEBT_NS after now). A take
-- (cr_take) admits as many units as fit now, up to the cost, and answers
-- their count.
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
-- Speed: Redis runs this whole chunk on every call, and its Lua pays
-- dearly for every closure, table, string, string.format and tonumber (about
-- 1,000 to 4,000 instructions each, measured). The gcra path is written
-- inline in the main loop and makes no closure; one limit decided in mode 2
-- and admitted makes no table either. The rarer paths (an explicit now, the
-- window algorithms) use helpers made only when the call needs them.

-- The protocol: what this script and the stores (cellrate.redis in Python
-- and in Lua) agree on, NAME = value, one a line up to the first blank line:
-- "local" where this script uses the value (the core states the same in
-- core/cellrate/redis.h, CR_REDIS_*, and tests/vectors/redis.txt holds the
-- two to one another), "--" where only the stores read it, when they load. A
-- value is a number, a 'string' or words (a list).
-- The modes (ARGV[1]).
local PEEK = '0'
local CHECK = '1'
local ALLOW = '2'
local REFUND = '3'
local CHARGE = '4'
local TAKE = '5'
-- peek, check and allow of one key in a priority class: the class's reserve
-- (ns) follows the limit's words; the class decides as if the tolerance were
-- tolerance - reserve, and the reply is the plain mode's.
local PEEK_CLASS = '6'
local CHECK_CLASS = '7'
local ALLOW_CLASS = '8'
-- check and allow of one key under a penalty (CR_REDIS_PENALTY, 64, added to
-- the mode): the penalty's word ('<after>:<strike_ns>:<ban_ns>:<max_ban_ns>')
-- follows the limit's, and the key's penalty key is the last key
local CHECK_PENALTY = '65'
local ALLOW_PENALTY = '66'
-- A tolerance (or window) the script carries exactly: below 9e15 ns (104 days).
local MAX_TOLERANCE_NS = 9000000000000000
-- The debt bound: a charge commits at most the limit's max_debt units beyond
-- it (ARGV), in whole units; a gcra TAT also at most this far after now (the
-- core's ceiling, its horizon, is beyond what one double carries).
local MAX_DEBT_NS = 9000000000000000
-- (The stores' options, prefix, on_error and name among them, are the core's
-- table, cellrate/options.h, and so are the faces' refusals of a live change.)
-- A live change keeps the algorithm: the start of the error reply of a key
-- held under another one, and what the faces say of such a change.
local ALGORITHM_REPLY = 'cellrate: algorithm:'
local ALGORITHM_KEPT = 'a live change keeps the algorithm of a limit; give another algorithm another name'

local E9 = 1000000000
local NEVER = -1
local fmod, tonumber, substring, string_format = math.fmod, tonumber, string.sub, string.format
local find = string.find
-- A limit's words as numbers: a batch's decisions repeat them, and batch.lua
-- gives a reading that keeps each word's (a call alone reads each once).
local number_of = redis.number or tonumber

local mode = ARGV[1]
-- A penalty (docs/design/penalty.md): its strikes are read only when the
-- call refuses, below.
local penalized = mode == CHECK_PENALTY or mode == ALLOW_PENALTY
if penalized then
    mode = mode == CHECK_PENALTY and CHECK or ALLOW
end
-- The limits are ARGV's quads (after mode and cost; a charge's max_debt, a
-- penalty's words and now follow): one key each. A key after theirs is the
-- wipe marker, then a penalty's key.
local nargs = #ARGV - (mode == CHARGE and 3 or 2) - (penalized and 1 or 0)
local nkeys = (nargs - fmod(nargs, 4)) / 4
local marker = KEYS[nkeys + 1]
if penalized and #KEYS == nkeys + 1 then
    marker = nil -- the penalty's key, not a marker
end
local cost = number_of(ARGV[2])
local max_cost
if mode == TAKE then
    max_cost, cost = cost, 0 -- the units that fit first: a probe
end
local last = 2 + 4 * nkeys -- the last limit's last word
local max_debt
if mode == CHARGE then
    max_debt, last = tonumber(ARGV[last + 1]), last + 1
end
local reserve = 0 -- a class's share of the tolerance it may not spend (ns)
if mode == CHECK_CLASS or mode == ALLOW_CLASS or mode == PEEK_CLASS then
    if nkeys ~= 1 then
        return redis.error_reply('ERR cellrate: a priority class decides one limit: give one key')
    end
    reserve, last = tonumber(ARGV[last + 1]), last + 1
    if not reserve or reserve < 0 or reserve > tonumber(ARGV[5]) then
        return redis.error_reply('ERR cellrate: a class reserve from 0 to the tolerance')
    end
    mode = mode == CHECK_CLASS and CHECK or mode == ALLOW_CLASS and ALLOW or PEEK
end
local penalty_at -- a penalty's word
if penalized then
    if nkeys ~= 1 then
        return redis.error_reply('ERR cellrate: a penalty decides one limit: give one key')
    end
    penalty_at, last = last + 1, last + 1
end
local commit = mode ~= PEEK
local now = ARGV[last + 1]

-- Each key's value, read first: one written under another limit needs the
-- helpers. The limit's signature, '<algorithm>:<tolerance_ns>:<burst> ',
-- starts the value (one limit: locals; several: tables).
local stored1, signature1, matches1
local values, signatures, matches, seen
local missing -- a key absent: with a marker, Redis may have lost it
local wiped_s1, wiped_ns1, wiped -- a missing key's state read as fully used (below)
local calendars -- a calendar quota among the limits: its signature waits for the server's now
-- The helpers of the rarer paths (an explicit now, the window algorithms, a
-- live change), made only when this call needs them: making a closure costs
-- the gcra path.
local needs_helpers = now ~= nil or mode == REFUND
if (mode == CHARGE or mode == TAKE) and nkeys ~= 1 then
    return redis.error_reply('ERR cellrate: charge and take decide one limit: give one key')
end
for i = 1, nkeys do
    local base = 2 + (i - 1) * 4
    local algorithm = ARGV[base + 1]
    if algorithm ~= 'gcra' and algorithm ~= 'token_bucket' then
        needs_helpers = true
        calendars = calendars or algorithm == 'calendar'
    end
    local signature = algorithm .. ':' .. ARGV[base + 3] .. ':' .. ARGV[base + 4] .. ' '
    local stored = redis.call('GET', KEYS[i])
    missing = missing or not stored
    local match = stored and find(stored, signature, 1, true) == 1 -- (no string made)
    if stored and not match then
        needs_helpers = true
    end
    if i == 1 then
        stored1, signature1, matches1 = stored, signature, match
    else
        if i == 2 then
            values, signatures, matches, seen = { stored1 }, { signature1 }, { matches1 },
                { [KEYS[1]] = signature1 }
        end
        values[i], signatures[i], matches[i] = stored, signature, match
        -- a key named twice under two limits decides the second time on a value of the other
        if seen[KEYS[i]] and seen[KEYS[i]] ~= signature then
            needs_helpers = true
        end
        seen[KEYS[i]] = signature
    end
end
local helpers
if needs_helpers then
    helpers = (function()
        local H = {}

        -- A decimal string of a non-negative int64 as (seconds, nanoseconds).
        local function parse(text)
            local len = #text
            if len <= 9 then
                return 0, tonumber(text)
            end
            return tonumber(string.sub(text, 1, len - 9)), tonumber(string.sub(text, len - 8))
        end
        H.parse = parse

        -- (seconds, nanoseconds) >= 0 as a decimal string.
        local function format(s, ns)
            if s == 0 then
                return string.format('%d', ns)
            end
            return string.format('%d%09d', s, ns)
        end
        H.format = format

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

        -- A non-negative difference as one number, HUGE from MAX_TOLERANCE_NS on.
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

        -- fixed_window: the state is end + count, `end` the end of the key's
        -- window; the key's (end, count) at now, as cr_fixed_read.
        local function read_fixed(ss, sns, window, ts, tns)
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
            return es, ens, count
        end

        -- A decision on a window's (or a calendar period's) end and count.
        local function decide_count(es, ens, count, rate, ts, tns, cost)
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
            -- a charge may leave count above the rate: nothing remains
            return allowed and 1 or 0, count < rate and rate - count or 0, retry, reset, write
        end

        local function decide_fixed(ss, sns, window, rate, ts, tns, cost)
            local es, ens, count = read_fixed(ss, sns, window, ts, tns)
            return decide_count(es, ens, count, rate, ts, tns, cost)
        end

        -- cr_fixed_charge: the count passes the rate by max_debt, up to the
        -- window less one ns, the most end + count carries; a count already
        -- past it is kept. The state charged, and clipped.
        local function charge_count(es, ens, count, packed, rate, cost, debt)
            local ceiling = rate + (debt < packed and debt or packed)
            local fit = ceiling > count and ceiling - count or 0
            local clipped = cost > fit
            local s, ns = add(es, ens, split(count + (clipped and fit or cost)))
            return s, ns, clipped
        end

        local function charge_fixed(ss, sns, window, rate, ts, tns, cost, debt)
            local es, ens, count = read_fixed(ss, sns, window, ts, tns)
            -- >= 0: the rate is below the window
            return charge_count(es, ens, count, window - 1 - rate, rate, cost, debt)
        end

        -- cr_fixed_refund: the state to write, nil when nothing changes.
        local function refund_count(es, ens, count, cost)
            if count == 0 then
                return nil -- the units, if any, went with their window
            end
            return format(add(es, ens, split(cost < count and count - cost or 0)))
        end

        local function refund_fixed(ss, sns, _, window, rate, ts, tns, cost)
            local es, ens, count = read_fixed(ss, sns, window, ts, tns)
            return refund_count(es, ens, count, cost)
        end

        -- calendar (docs/design/calendar.md): a fixed window whose window is
        -- the calendar period holding the server's now, `window` a table
        -- (H.calendar): its start and end in whole seconds, every bound sent.
        -- The state is end + count, as the core's; a count reaches at most
        -- 2 * 2^40 (the core's CR_CALENDAR_COUNT_MAX), so a state further
        -- past the end is of a later period (the server's clock stepped
        -- back): the latest bound sent at or before it is its period's end,
        -- a count above 2^41 read as 2^41 (refused: the safe side).
        local CALENDAR_SPAN = 2199023255552 -- 2^41
        local function read_calendar(ss, sns, window)
            local es = window.end_s
            if less(ss, sns, es, 0) then
                return es, 0, 0
            end
            local count = number(sub(ss, sns, es, 0))
            if count > CALENDAR_SPAN then
                local bounds = window.bounds
                for j = 4, 1, -1 do
                    if not less(ss, sns, bounds[j], 0) then
                        es = bounds[j]
                        break
                    end
                end
                count = math.min(number(sub(ss, sns, es, 0)), CALENDAR_SPAN)
            end
            return es, 0, count
        end

        local function decide_calendar(ss, sns, window, rate, ts, tns, cost)
            local es, ens, count = read_calendar(ss, sns, window)
            return decide_count(es, ens, count, rate, ts, tns, cost)
        end

        local function charge_calendar(ss, sns, window, rate, _, _, cost, debt)
            local es, ens, count = read_calendar(ss, sns, window)
            return charge_count(es, ens, count, CALENDAR_SPAN - rate, rate, cost, debt)
        end

        local function refund_calendar(ss, sns, _, window, _, _, _, cost)
            local es, ens, count = read_calendar(ss, sns, window)
            return refund_count(es, ens, count, cost)
        end

        -- cr_calendar_follow with remaining 0: the period full.
        local function ban_calendar(ss, sns, window, rate)
            local es, ens, count = read_calendar(ss, sns, window)
            if rate <= count then
                return ss, sns
            end
            return add(es, ens, split(rate))
        end

        -- A calendar's period holding the server's now (ts), from its words:
        -- the bounds '<previous start>:<start>:<end>:<next end>' (whole
        -- seconds) the client computed around its own clock; nil when none
        -- holds it (the two clocks disagree by more than a period).
        function H.period(bounds_word, ts)
            local b1, b2, b3, b4 = string.match(bounds_word, '^(%d+):(%d+):(%d+):(%d+)$')
            if not b1 then
                return nil
            end
            local bounds = { tonumber(b1), tonumber(b2), tonumber(b3), tonumber(b4) }
            for k = 1, 3 do
                if bounds[k] <= ts and ts < bounds[k + 1] then
                    return { start_s = bounds[k], end_s = bounds[k + 1], bounds = bounds }
                end
            end
            return nil
        end

        -- The least e in [0, P] with prev * (P - e) <= budget * P (prev > 0, budget >= 0).
        local function sliding_earliest(window, prev, budget)
            if budget >= prev then
                return 0
            end
            return window - product_quotient(budget, window, prev)
        end

        -- sliding_window: the state is (k + 2) * P + prev * (rate + 1) + curr;
        -- the key's counts at now, as cr_sliding_read: the current window's
        -- start and base (k + 2) * P, the time elapsed in it, prev and curr.
        local function read_sliding(ss, sns, window, radix, ts, tns)
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
            return starts, startns, bs, bns, elapsed, prev, curr
        end

        local function decide_sliding(ss, sns, window, rate, ts, tns, cost)
            local radix = rate + 1
            local starts, startns, bs, bns, elapsed, prev, curr =
                read_sliding(ss, sns, window, radix, ts, tns)
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
            return allowed and 1 or 0, remaining, retry, reset, write
        end

        -- cr_sliding_charge: the current count is a digit of radix rate + 1,
        -- so it carries at most the rate (the window full). The state charged,
        -- and clipped.
        local function charge_sliding(ss, sns, window, rate, ts, tns, cost)
            local radix = rate + 1
            local _, _, bs, bns, _, prev, curr = read_sliding(ss, sns, window, radix, ts, tns)
            local clipped = cost > rate - curr
            local s, ns = add(bs, bns, split(prev * radix + (clipped and rate or curr + cost)))
            return s, ns, clipped
        end

        -- cr_sliding_refund: the state to write, nil when nothing changes.
        local function refund_sliding(ss, sns, _, window, rate, ts, tns, cost)
            local radix = rate + 1
            local _, _, bs, bns, _, prev, curr = read_sliding(ss, sns, window, radix, ts, tns)
            if curr > 0 then -- taken in this window
                curr = cost < curr and curr - cost or 0
            elseif prev > 0 then -- taken in the previous one: they weigh as prev
                prev = cost < prev and prev - cost or 0
            else
                return nil
            end
            return format(add(bs, bns, split(prev * radix + curr)))
        end

        -- cr_gcra_refund: the state to write, nil when nothing changes. The
        -- decrement cost * emission is exact below 2^53, and from there on
        -- beyond every lead a store allows (tolerance below 9e15 ns).
        local function refund_gcra(ss, sns, emission, _, _, ts, tns, cost)
            if not less(ts, tns, ss, sns) then
                return nil -- idle: nothing left to give back
            end
            local decrement = cost * emission
            if decrement >= HUGE then
                return format(ts, tns) -- beyond every lead: back to idle, never better
            end
            local ds, dns = split(decrement)
            local ls, lns = sub(ss, sns, ts, tns)
            if not less(ds, dns, ls, lns) then
                return format(ts, tns) -- back to idle, never better
            end
            return format(sub(ss, sns, ds, dns))
        end

        -- A live change (the core's cr_carry): the state under the limit sent
        -- of a key whose state under the held limit is (ss, sns), at now.

        -- (q, r) + rest, for r and rest below m: r stays below m, never summed
        -- past it, and the carry goes to q, a count as (seconds, nanoseconds).
        local function plus_rest(qs, qns, r, rest, m)
            if r >= m - rest then
                qs, qns = add(qs, qns, 0, 1)
                return qs, qns, r - (m - rest)
            end
            return qs, qns, r + rest
        end

        -- a * b = q * m + r exactly, q as (seconds, nanoseconds), for a, b and m
        -- below 2^53 and q below 2^62. A product below 2^53 is exact; a larger
        -- one is divided one bit of a at a time, keeping a's prefix * b = q * m
        -- + r with r below m, every step exact in doubles.
        local function product_divmod(a, b, m)
            local product = a * b
            if product < HUGE then
                local r = fmod(product, m)
                local qs, qns = split((product - r) / m)
                return qs, qns, r
            end
            local step_rest = fmod(b, m) -- b = step * m + step_rest
            local step_s, step_ns = split((b - step_rest) / m)
            local qs, qns, r = 0, 0, 0
            for bit = 52, 0, -1 do
                qs, qns = add(qs, qns, qs, qns)
                qs, qns, r = plus_rest(qs, qns, r, r, m)
                if fmod(math.floor(a / 2 ^ bit), 2) == 1 then
                    qs, qns = add(qs, qns, step_s, step_ns)
                    qs, qns, r = plus_rest(qs, qns, r, step_rest, m)
                end
            end
            return qs, qns, r
        end

        -- ceil(lead * to / from) ns as (seconds, nanoseconds), clipped at the
        -- horizon, 2^62 ns, for a lead (ls, lns) below 2^63 and to and from
        -- below 2^53. A lead below 9e15 ns is one number; a longer one (a
        -- clock stepped back by months) is divided in parts, lead * to =
        -- ls * to * 1e9 + lns * to, each exactly (ls * to = q1 * from + r1,
        -- then r1 * 1e9 and lns * to).
        local HORIZON_S, HORIZON_NS = 4611686018, 427387904
        local function scaled_ceil(ls, lns, to, from)
            local qs, qns, rest
            if ls < 9000000 then
                local lead = ls * E9 + lns
                if not product_le(lead, to, 2 ^ 62, from) then
                    return HORIZON_S, HORIZON_NS -- beyond it
                end
                qs, qns, rest = product_divmod(lead, to, from)
            else
                if not (product_le(ls, to, HORIZON_S + 1, from)
                        and product_le(lns, to, 2 ^ 62, from)) then
                    return HORIZON_S, HORIZON_NS -- beyond it
                end
                local q1s, q1ns, r1 = product_divmod(ls, to, from) -- q1 s: at most 2^62 ns + 1 s
                local q2s, q2ns, r2 = product_divmod(r1, E9, from)
                local q3s, q3ns, r3 = product_divmod(lns, to, from)
                qs, qns = add(q1s * E9 + q1ns, 0, q2s, q2ns)
                qs, qns = add(qs, qns, q3s, q3ns)
                qs, qns, rest = plus_rest(qs, qns, r2, r3, from)
            end
            if rest > 0 then
                qs, qns = add(qs, qns, 0, 1)
            end
            if less(HORIZON_S, HORIZON_NS, qs, qns) then
                return HORIZON_S, HORIZON_NS
            end
            return qs, qns
        end

        -- gcra: TAT' = now + ceil((TAT - now) * T_to / T_from); an idle key
        -- keeps its word.
        local function carry_gcra(ss, sns, from, to, ts, tns)
            if not less(ts, tns, ss, sns) then
                return ss, sns
            end
            local ls, lns = sub(ss, sns, ts, tns)
            return add(ts, tns, scaled_ceil(ls, lns, to, from))
        end

        -- The start of the window of `window` holding (s, ns).
        local function window_start(s, ns, window)
            return sub(s, ns, split(time_mod(s, ns, window)))
        end

        -- fixed_window: the count goes to the new window holding now (or the
        -- key's own later one), clipped at the new rate.
        local function carry_fixed(ss, sns, held_window, _, window, rate, ts, tns)
            local es, ens, count = read_fixed(ss, sns, held_window, ts, tns)
            if count == 0 then
                return 0, 0
            end
            local as, ans = sub(es, ens, split(held_window))
            if less(as, ans, ts, tns) then
                as, ans = ts, tns
            end
            as, ans = window_start(as, ans, window)
            as, ans = add(as, ans, split(window))
            return add(as, ans, split(math.min(count, rate)))
        end

        -- sliding_window: the counts go to the new windows; a previous count
        -- above the new rate keeps its excess weight, rounded up, in the
        -- current count for the rest of its window.
        local function carry_sliding(ss, sns, held_window, held_rate, window, rate, ts, tns)
            local starts, startns, _, _, _, prev, curr =
                read_sliding(ss, sns, held_window, held_rate + 1, ts, tns)
            if prev == 0 and curr == 0 then
                return 0, 0
            end
            if less(starts, startns, ts, tns) then
                starts, startns = ts, tns
            end
            starts, startns = window_start(starts, startns, window)
            curr = math.min(curr, rate)
            if prev > rate then
                local elapsed = 0
                if less(starts, startns, ts, tns) then
                    elapsed = number(sub(ts, tns, starts, startns))
                end
                local excess = product_quotient(prev - rate, window - elapsed, window)
                if not product_le(prev - rate, window - elapsed, excess, window) then
                    excess = excess + 1
                end
                curr, prev = math.min(curr + excess, rate), rate
            end
            local bs, bns = add(starts, startns, split(2 * window))
            return add(bs, bns, split(prev * (rate + 1) + curr))
        end

        -- calendar: a count goes to the period holding now (of another zone
        -- or period too: calendar_carry's rule), up to the amount, while the
        -- period it was counted in (its end, `held_end`, in the value) has
        -- not ended; a later period of the same calendar and amount is kept.
        local function carry_calendar(ss, sns, held_end, same, window, rate, ts, tns)
            if not less(ts, tns, held_end, 0) then
                return 0, 0 -- its period has passed: nothing counted now
            end
            if same then
                return ss, sns
            end
            local count = number(sub(ss, sns, held_end, 0))
            if count <= 0 then
                return 0, 0
            end
            return add(window.end_s, 0, split(math.min(count, rate)))
        end

        -- The state word, under the limit sent, of a value that does not start
        -- with its signature: nil and an error reply's text for a value that
        -- is not cellrate's or holds another algorithm.
        function H.carry(stored, algorithm, emission, window, rate, ts, tns)
            local space = string.find(stored, ' ', 1, true)
            if not space then
                -- the bare state word of the layout before names, whose keys
                -- were named by the limit's parameters: the ones sent
                if not string.find(stored, '^%d+$') then
                    return nil, 'ERR cellrate: the key holds no cellrate state'
                end
                return parse(stored)
            end
            local held, held_window, held_rate = string.match(stored, '^([%a_]+):(%d+):(%d+) %d+$')
            local name, held_end -- a calendar's: 'calendar:<name>:<amount>:<end> <state>'
            if not held then
                held, name, held_rate, held_end =
                    string.match(stored, '^(calendar):([^: ]+):(%d+):(%d+) %d+$')
            end
            if not held then
                return nil, 'ERR cellrate: the key holds no cellrate state'
            end
            if held ~= algorithm then
                return nil, 'ERR ' .. ALGORITHM_REPLY .. ' the keys of this name hold ' .. held
                    .. ', not ' .. algorithm .. '; ' .. ALGORITHM_KEPT
            end
            local ss, sns = parse(substring(stored, space + 1))
            if algorithm == 'calendar' then
                return carry_calendar(ss, sns, tonumber(held_end),
                    name == window.name and tonumber(held_rate) == rate, window, rate, ts, tns)
            end
            held_window, held_rate = tonumber(held_window), tonumber(held_rate)
            if algorithm == 'fixed_window' then
                return carry_fixed(ss, sns, held_window, held_rate, window, rate, ts, tns)
            elseif algorithm == 'sliding_window' then
                return carry_sliding(ss, sns, held_window, held_rate, window, rate, ts, tns)
            end
            return carry_gcra(ss, sns, held_window / held_rate, emission, ts, tns)
        end

        -- Until a state written under the limit sent stops mattering (the
        -- decisions' reset_after), as the expiry of a refund that carried.
        function H.reset_after(algorithm, ss, sns, window, rate, ts, tns)
            if algorithm == 'fixed_window' or algorithm == 'sliding_window' or algorithm == 'calendar' then
                return select(4, H[algorithm](ss, sns, window, rate, ts, tns, 0))
            end
            if less(ts, tns, ss, sns) then
                return format(sub(ss, sns, ts, tns))
            end
            return 0
        end

        -- An expiry in ms, reset_after (ns, or a decimal string) rounded up, at least 1.
        function H.expiry_ms(reset_after)
            local ms
            if type(reset_after) == 'string' then
                local s, ns = parse(reset_after)
                ms = s * 1000 + (ns + 999999 - fmod(ns + 999999, 1000000)) / 1000000
            else
                ms = (reset_after + 999999 - fmod(reset_after + 999999, 1000000)) / 1000000
            end
            return ms < 1 and 1 or ms
        end

        -- A penalty's ban of `length` ns written into a window's state (the
        -- core's cr_ban_core: cr_fixed_follow, cr_sliding_follow with
        -- remaining 0): every window up to the one holding the ban's last
        -- instant full. The state to write.
        local function ban_fixed(ss, sns, window, rate, ts, tns, length)
            local ls, lns = add(ts, tns, split(length - 1)) -- the ban's last instant
            local es, ens, count = read_fixed(ss, sns, window, ts, tns)
            if not less(ls, lns, es, ens) then
                local xs, xns = sub(ls, lns, split(time_mod(ls, lns, window)))
                xs, xns = add(xs, xns, split(window)) -- the end of the window holding it
                if less(xs, xns, es, ens) then
                    xs, xns = es, ens
                end
                local full = count > rate and count or rate -- a debt stays
                local fs, fns = add(xs, xns, split(full))
                if less(ss, sns, fs, fns) and (less(es, ens, xs, xns) or full > count) then
                    return fs, fns
                end
                return ss, sns
            end
            if rate <= count then
                return ss, sns
            end
            return add(es, ens, split(rate))
        end

        local function ban_sliding(ss, sns, window, rate, ts, tns, length)
            local radix = rate + 1
            local ls, lns = add(ts, tns, split(length - 1))
            local starts, startns, bs, bns, _, prev, curr = read_sliding(ss, sns, window, radix, ts, tns)
            local ws, wns = add(starts, startns, split(window))
            if not less(ls, lns, ws, wns) then
                local xs, xns = sub(ls, lns, split(time_mod(ls, lns, window)))
                if less(xs, xns, starts, startns) then
                    xs, xns = starts, startns
                end
                local fs, fns = add(xs, xns, split(2 * window))
                fs, fns = add(fs, fns, split(rate * radix + rate))
                if less(ss, sns, fs, fns) then
                    return fs, fns
                end
                return ss, sns
            end
            -- the ban ends in this window: prev decays until its last instant
            local elapsed = 0
            if less(starts, startns, ls, lns) then
                elapsed = number(sub(ls, lns, starts, startns))
            end
            local held = product_quotient(prev, window - elapsed, window)
            if not product_le(prev, window - elapsed, held, window) then
                held = held + 1
            end
            if rate - held <= curr then
                return ss, sns
            end
            return add(bs, bns, split(prev * radix + rate - held))
        end
        H.ban = { fixed_window = ban_fixed, sliding_window = ban_sliding, calendar = ban_calendar }

        H.fixed_window, H.sliding_window, H.calendar = decide_fixed, decide_sliding, decide_calendar
        H.charge = { fixed_window = charge_fixed, sliding_window = charge_sliding,
                     calendar = charge_calendar }
        H.refund = { fixed_window = refund_fixed, sliding_window = refund_sliding,
                     gcra = refund_gcra, token_bucket = refund_gcra, calendar = refund_calendar }
        return H
    end)()
end

local ts, tns = redis.ts, redis.tns -- a batch's one reading of TIME (batch.lua), else nil
if now ~= nil then
    ts, tns = helpers.parse(now)
elseif not ts then
    local time = redis.call('TIME')
    ts, tns = tonumber(time[1]), tonumber(time[2]) * 1000
end

-- A calendar quota: the period decided in is the one of those sent that
-- holds the server's now (windows[i], helpers.period), so every client counts
-- into one window per period on the server's clock whatever its own says,
-- while the two disagree by less than the shortest period (a day of 23
-- hours); else an error reply, never a decision in a period not sent. The
-- period's end is part of the value's signature, '<algorithm>:<name>:<amount>:<end> ',
-- so a state of another period, amount or calendar carries (helpers.carry).
local windows
if calendars then
    windows = {}
    for i = 1, nkeys do
        local base = 2 + (i - 1) * 4
        if ARGV[base + 1] == 'calendar' then
            local window = helpers.period(ARGV[base + 2], ts)
            if not window then
                return redis.error_reply('ERR cellrate: tz: the server\'s clock is outside the '
                    .. 'calendar periods the client sent (its clock and the server\'s disagree by '
                    .. 'more than a period)')
            end
            window.name = ARGV[base + 3]
            windows[i] = window
            local signature = 'calendar:' .. ARGV[base + 3] .. ':' .. ARGV[base + 4] .. ':'
                .. window.end_s .. ' '
            if i == 1 then
                signature1 = signature
                matches1 = stored1 and find(stored1, signature, 1, true) == 1
            else
                signatures[i] = signature
                matches[i] = values[i] and find(values[i], signature, 1, true) == 1
            end
        end
    end
end

-- A wiped Redis (on_wipe = 'refuse', the core's CR_REDIS_WIPE_MARKER): a key
-- missing while its marker is missing means Redis lost its state (a restart
-- without persistence, a failover to a replica that lagged, a flush). The
-- marker, which never expires, records the instant that was found (any call
-- but a peek writes it), and from then on every missing key of its slot reads
-- as fully used at that instant: a gcra (token bucket) TAT of the instant plus
-- the tolerance, a window counting its rate. So a wipe hands out no fresh
-- burst, and a key idle a whole period since reads as fresh again, as any.
-- The marker's instant is the server's clock: an explicit now (tests) skips it.
-- Such a state is kept as its two numbers (the first key's as locals, the
-- others' in wiped), decided on as a held value would be once parsed.
if marker and missing and mode ~= REFUND and not now then
    local found, ws, wns = redis.call('GET', marker), ts, tns
    if found then
        ws, wns = tonumber(substring(found, 1, -10)), tonumber(substring(found, -9))
    elseif commit then
        redis.call('SET', marker, string_format('%d%09d', ts, tns)) -- TIME: seconds > 0
    end
    for i = 1, nkeys do
        local value = stored1
        if i > 1 then
            value = values[i]
        end
        local base = 2 + (i - 1) * 4
        local algorithm, tolerance = ARGV[base + 1], number_of(ARGV[base + 3])
        local s, ns
        if value then
            -- held: Redis has it
        elseif algorithm == 'calendar' then
            -- a quota is not filled: its period is a month or a year of
            -- refusals for every key, new ones too (an empty Redis cannot
            -- tell never used from wiped); its counts rely on persistence
        elseif algorithm == 'gcra' or algorithm == 'token_bucket' then
            local add_ns = fmod(tolerance, E9)
            s, ns = ws + (tolerance - add_ns) / E9, wns + add_ns
            if ns >= E9 then
                s, ns = s + 1, ns - E9
            end
        elseif helpers and helpers.charge[algorithm] then
            local rate = number_of(ARGV[base + 4])
            s, ns = helpers.charge[algorithm](0, 0, tolerance, rate, ws, wns, rate, 0)
        end
        if s and i == 1 then
            wiped_s1, wiped_ns1 = s, ns
        elseif s then
            wiped = wiped or {}
            wiped[i] = { s, ns }
        end
    end
end

-- Mode 3, a refund (the core's cr_refund): gives back cost units of the one
-- key, never making it better than idle; the key keeps its expiry (the state
-- only shrinks, so the old one is late enough) unless it was carried from
-- another limit. Answers 1 when the value changed, else 0.
if mode == REFUND then
    local refund = helpers.refund[ARGV[3]]
    if not refund then
        return redis.error_reply('ERR cellrate: unknown algorithm ' .. ARGV[3])
    end
    local emission, window, rate = tonumber(ARGV[4]), windows and windows[1] or tonumber(ARGV[5]),
        tonumber(ARGV[6])
    if not windows and window >= MAX_TOLERANCE_NS then
        return redis.error_reply('ERR cellrate: tolerance or window of 9e15 ns or more')
    end
    local stored = stored1
    if not stored or cost == 0 then
        return 0 -- an absent key is idle: nothing to give back
    end
    local ss, sns, carried
    if matches1 then
        ss, sns = helpers.parse(substring(stored, #signature1 + 1))
    else
        ss, sns = helpers.carry(stored, ARGV[3], emission, window, rate, ts, tns)
        if not ss then
            return redis.error_reply(sns)
        end
        carried = true
    end
    local write = refund(ss, sns, emission, window, rate, ts, tns, cost)
    if write then
        ss, sns = helpers.parse(write)
    elseif not carried then
        return 0
    end
    write = signature1 .. helpers.format(ss, sns)
    if write == stored then
        return 0
    end
    if now then
        redis.call('SET', KEYS[1], write)
    elseif carried then
        redis.call('SET', KEYS[1], write, 'PX', helpers.expiry_ms(
            helpers.reset_after(ARGV[3], ss, sns, window, rate, ts, tns)))
    else
        redis.call('SET', KEYS[1], write, 'KEEPTTL')
    end
    return 1
end

-- Each limit decides on its key's state word (ss, sns), following
-- core/decide.h: allowed (1/0), remaining, retry_after, reset_after, and
-- the value to store (nil: nothing to write). Several limits: every key
-- is decided before any is written, and written only if all admit; a key
-- named twice decides the second time on the value the first would store
-- (pending). A state carried from another limit is written in a check or an
-- allow whatever the decision (carried), so each key is carried once.
local allowed, remaining, retry, reset, state, carried
local charged, clipped, taken -- a charge's state and its bound met; a take's count
local decisions, states, carries, pending
local all_allowed = true
for i = 1, nkeys do
    local key = KEYS[i]
    local base = 2 + (i - 1) * 4
    local algorithm, tolerance = ARGV[base + 1], windows and windows[i]
    if not tolerance then
        tolerance = number_of(ARGV[base + 3])
        if tolerance >= MAX_TOLERANCE_NS then
            return redis.error_reply('ERR cellrate: tolerance or window of 9e15 ns or more')
        end
    end
    local stored, signature, match = stored1, signature1, matches1
    local ss, sns = wiped_s1, wiped_ns1
    if i > 1 then
        stored, signature, match = values[i], signatures[i], matches[i]
        ss, sns = nil, nil
        if pending[key] then
            stored = pending[key]
            match = find(stored, signature, 1, true) == 1
        elseif wiped and wiped[i] then
            ss, sns = wiped[i][1], wiped[i][2]
        end
    end
    carried = nil
    if ss then
        -- a missing key read as fully used (a wiped Redis, above)
    elseif not match and not stored then
        ss, sns = 0, 0 -- absent: idle
    elseif match then -- helpers.parse, inline, after the signature
        local len, from = #stored, #signature + 1
        if len - from < 9 then
            ss, sns = 0, tonumber(substring(stored, from))
        else
            ss, sns = tonumber(substring(stored, from, len - 9)), tonumber(substring(stored, len - 8))
        end
    elseif stored then
        ss, sns = helpers.carry(stored, algorithm, tonumber(ARGV[base + 2]), tolerance,
                                tonumber(ARGV[base + 4]), ts, tns)
        if not ss then
            return redis.error_reply(sns)
        end
        carried = signature .. helpers.format(ss, sns)
    end
    -- A charge decides twice where the cost does not fit (the second time one
    -- unit, on the state charged), a take twice where a unit fits (first the
    -- units that fit, a probe; then those taken).
    for pass = 1, 2 do
        state = nil
        if algorithm == 'gcra' or algorithm == 'token_bucket' then
            -- The state is the TAT; tolerance = emission * burst, so a cost is
            -- unfittable exactly when cost * emission > tolerance (exact: tolerance
            -- is below 2^53). Worked relative to now: lead = max(TAT, now) - now.
            local emission = number_of(ARGV[base + 2])
            local need = cost * emission
            local tau = tolerance - reserve -- a class's tolerance (0: the plain one)
            local lead_s, lead_ns = ss - ts, sns - tns
            if lead_ns < 0 then
                lead_s, lead_ns = lead_s - 1, lead_ns + E9
            end
            if lead_s < 0 then
                lead_s, lead_ns = 0, 0 -- the TAT has passed: base = now
            end
            if lead_s >= 9000000 then
                -- 9e15 ns ahead and more (a clock that stepped back by months, a
                -- test's now): beyond every tolerance, so refused; exact times as
                -- decimal strings (helpers.format, inline: lead_s > 0)
                allowed, remaining, retry = cost == 0 and 1 or 0, 0, NEVER
                reset = string_format('%d%09d', lead_s, lead_ns)
                if cost == 0 then
                    retry = 0
                elseif need <= tau then -- lead - (tau - cost * T)
                    local gap = tau - need
                    local gap_ns = fmod(gap, E9)
                    local s, ns = lead_s - (gap - gap_ns) / E9, lead_ns - gap_ns
                    if ns < 0 then
                        s, ns = s - 1, ns + E9
                    end
                    retry = s < 9000000 and s * E9 + ns or string_format('%d%09d', s, ns)
                end
            else
                local lead = lead_s * E9 + lead_ns
                allowed, remaining, retry, reset = cost == 0 and 1 or 0, nil, 0, lead
                if need > tau then
                    retry = NEVER -- unfittable
                elseif cost > 0 then
                    local next_lead = lead + need
                    local allow_at = next_lead - tau
                    if allow_at <= 0 then
                        local add_ns = fmod(next_lead, E9)
                        local s, ns = ts + (next_lead - add_ns) / E9, tns + add_ns
                        if ns >= E9 then
                            s, ns = s + 1, ns - E9
                        end
                        -- signature .. helpers.format, inline
                        state = s > 0 and string_format('%s%d%09d', signature, s, ns)
                            or string_format('%s%d', signature, ns)
                        allowed, reset = 1, next_lead
                        remaining = (-allow_at - fmod(-allow_at, emission)) / emission
                    else
                        retry = allow_at
                    end
                end
                if not remaining then
                    -- a turn-away, a probe or an unfittable cost: the units that fit at base
                    local room = tau - lead
                    remaining = 0
                    if room >= emission then
                        remaining = (room - fmod(room, emission)) / emission
                    end
                end
            end
        else
            local decide_window = helpers[algorithm]
            if not decide_window then
                return redis.error_reply('ERR cellrate: unknown algorithm ' .. algorithm)
            end
            allowed, remaining, retry, reset, state =
                decide_window(ss, sns, tolerance, number_of(ARGV[base + 4]), ts, tns, cost)
            if state then
                state = signature .. state
            end
        end
        if mode == TAKE and pass == 1 then
            taken = remaining < max_cost and remaining or max_cost
            if taken == 0 then
                break
            end
            cost = taken
        elseif mode == CHARGE and pass == 1 and allowed == 0 then
            -- into debt (cr_charge_core): the state charged, clipped at the bound
            if algorithm == 'gcra' or algorithm == 'token_bucket' then
                -- max(TAT, now) + cost * T, at most now + tau + max_debt * T
                -- and now + MAX_DEBT_NS, in whole units; a TAT already beyond
                -- (a clock that stepped back) is kept
                local lead_s, lead_ns = ss - ts, sns - tns
                if lead_ns < 0 then
                    lead_s, lead_ns = lead_s - 1, lead_ns + E9
                end
                if lead_s < 0 then
                    lead_s, lead_ns = 0, 0
                end
                clipped = true
                if lead_s < 9000000 then
                    local lead, emission = lead_s * E9 + lead_ns, tonumber(ARGV[base + 2])
                    -- tau + max_debt * T, at most MAX_DEBT_NS: max_debt is
                    -- compared with the units under that (exact, below 2^53),
                    -- so no product past 2^53 is ever made
                    local spare = MAX_DEBT_NS - tolerance -- > 0: tolerance < MAX_TOLERANCE_NS
                    local depth = MAX_DEBT_NS
                    if max_debt <= (spare - fmod(spare, emission)) / emission then
                        depth = tolerance + max_debt * emission
                    end
                    local room = depth - lead
                    local fit = room > 0 and (room - fmod(room, emission)) / emission or 0
                    clipped = cost > fit
                    if fit > 0 or not clipped then
                        local next_lead = lead + (clipped and fit or cost) * emission
                        local add_ns = fmod(next_lead, E9)
                        ss, sns = ts + (next_lead - add_ns) / E9, tns + add_ns
                        if sns >= E9 then
                            ss, sns = ss + 1, sns - E9
                        end
                    end
                end
            else
                ss, sns, clipped = helpers.charge[algorithm](ss, sns, tolerance,
                    tonumber(ARGV[base + 4]), ts, tns, cost, max_debt)
            end
            charged = ss > 0 and string_format('%s%d%09d', signature, ss, sns)
                or string_format('%s%d', signature, sns)
            cost = 1
        else
            break
        end
    end
    if charged then
        allowed, state = 0, nil
    end
    all_allowed = all_allowed and allowed == 1
    if nkeys > 1 then
        if i == 1 then
            decisions, states, carries, pending = {}, {}, {}, {}
        end
        decisions[i], states[i], carries[i] = { allowed, remaining, retry, reset, i }, state, carried
        if state or carried then
            pending[key] = state or carried
        end
    end
end

-- A refusal under a penalty (the core's cr_penalty_refused, in (seconds, ns)):
-- outside a ban a strike, the strikes a GCRA of `after` per period; the
-- strike that leaves no room for another starts a ban, written into the
-- key's state as the core's cr_ban_core; a repeat offence (before the last
-- ban's end + max_ban) doubles it, up to max_ban. During a ban nothing is
-- counted. The reply's remaining is 0 and its retry_after and reset_after run
-- at least to the ban's end (cr_penalty_decision). The strikes' key,
-- '<strikes> <ban_end> <level>', expires when they stop mattering.
local ban_write, ban_ms
if penalized and allowed == 0 then
    local pkey = KEYS[#KEYS]
    local function time_of(text) -- a decimal string as (seconds, ns)
        local len = #text
        if len <= 9 then
            return 0, tonumber(text)
        end
        return tonumber(substring(text, 1, len - 9)), tonumber(substring(text, len - 8))
    end
    local function plus(s, ns, d) -- (s, ns) + d, d below 2^53
        local d_ns = fmod(d, E9)
        s, ns = s + (d - d_ns) / E9, ns + d_ns
        if ns >= E9 then
            return s + 1, ns - E9
        end
        return s, ns
    end
    local function text_of(s, ns)
        return s > 0 and string_format('%d%09d', s, ns) or string_format('%d', ns)
    end
    local function before(as, ans, bs, bns)
        return as < bs or (as == bs and ans < bns)
    end
    local function ms_of(s, ns) -- (s, ns) after now, in ms rounded up, at least 1
        s, ns = s - ts, ns - tns
        if ns < 0 then
            s, ns = s - 1, ns + E9
        end
        local ms = s * 1000 + (ns + 999999 - fmod(ns + 999999, 1000000)) / 1000000
        return ms < 1 and 1 or ms
    end
    local after, strike, ban, max_ban = string.match(ARGV[penalty_at], '^(%d+):(%d+):(%d+):(%d+)$')
    after, strike, ban, max_ban = tonumber(after), tonumber(strike), tonumber(ban), tonumber(max_ban)
    if not (after and strike and ban and max_ban) or strike * after >= MAX_TOLERANCE_NS
        or max_ban >= MAX_TOLERANCE_NS then
        return redis.error_reply('ERR cellrate: a penalty below 9e15 ns')
    end
    local ks, kns, es, ens, level = 0, 0, 0, 0, 0 -- strikes, ban_end, level
    local held = redis.call('GET', pkey)
    if held then
        local k, e, l = string.match(held, '^(%d+) (%d+) (%d+)$')
        if not k then
            return redis.error_reply('ERR cellrate: the key holds no cellrate strikes')
        end
        ks, kns = time_of(k)
        es, ens = time_of(e)
        level = tonumber(l)
    end
    if not before(ts, tns, es, ens) then
        local lead = 0 -- strikes - now, at least 0
        if before(ts, tns, ks, kns) then
            lead = ks - ts >= 9000000 and MAX_TOLERANCE_NS or (ks - ts) * E9 + (kns - tns)
        end
        local tau = strike * after
        if lead + strike <= tau - strike then
            ks, kns = plus(ts, tns, lead + strike) -- room for one more strike: no ban yet
        else
            local ends, endns = plus(es, ens, max_ban)
            local again = (es > 0 or ens > 0) and before(ts, tns, ends, endns)
            level = again and (level < 62 and level + 1 or 62) or 0
            local length = max_ban
            if level < 62 and ban <= math.floor(max_ban / 2 ^ level) then
                length = ban * 2 ^ level
            end
            ks, kns, es, ens = 0, 0, plus(ts, tns, length) -- the ban pays for the strikes
            -- the ban into the key's state
            local base = 2
            local algorithm, tolerance = ARGV[base + 1], windows and windows[1] or tonumber(ARGV[base + 3])
            local ss, sns = wiped_s1 or 0, wiped_ns1 or 0
            local value = carried or stored1
            if value then
                ss, sns = time_of(substring(value, #signature1 + 1))
            end
            local bs, bns
            if algorithm == 'gcra' or algorithm == 'token_bucket' then
                -- cr_gcra_follow with remaining 0: now + tau + (ban - T), never earlier
                local emission = tonumber(ARGV[base + 2])
                bs, bns = plus(ts, tns, tolerance)
                if length > emission then
                    bs, bns = plus(bs, bns, length - emission)
                end
                if before(bs, bns, ss, sns) then
                    bs, bns = ss, sns
                end
            else
                bs, bns = helpers.ban[algorithm](ss, sns, tolerance, tonumber(ARGV[base + 4]),
                    ts, tns, length)
            end
            ban_write = signature1 .. text_of(bs, bns)
            ban_ms = now == nil and (algorithm == 'gcra' or algorithm == 'token_bucket')
                and ms_of(bs, bns)
            if now == nil and not ban_ms then
                ban_ms = helpers.expiry_ms(helpers.reset_after(algorithm, bs, bns, tolerance,
                    tonumber(ARGV[base + 4]), ts, tns))
            end
        end
        local strikes_text = text_of(ks, kns) .. ' ' .. text_of(es, ens) .. ' ' .. level
        if now then
            redis.call('SET', pkey, strikes_text)
        else
            -- live while its strikes are ahead or until the ban's end + max_ban
            local xs, xns = ks, kns
            if es > 0 or ens > 0 then
                local ms, mns = plus(es, ens, max_ban)
                if before(xs, xns, ms, mns) then
                    xs, xns = ms, mns
                end
            end
            redis.call('SET', pkey, strikes_text, 'PX', ms_of(xs, xns))
        end
    end
    if before(ts, tns, es, ens) then
        -- banned: cr_penalty_decision (left below 9e15 ns but for a clock stepped
        -- back); a time is a number or (the windows', and from 9e15 ns) a decimal string
        local left = (es - ts) * E9 + (ens - tns)
        local function below(time)
            if type(time) == 'string' then
                return #time < 16 and tonumber(time) < left
            end
            return time < left
        end
        remaining = 0
        if retry ~= NEVER and below(retry) then
            retry = left
        end
        if below(reset) then
            reset = left
        end
    end
end

if commit then
    for i = 1, nkeys do
        local write, reset_after = state, reset
        if nkeys > 1 then
            write, reset_after, carried = states[i], decisions[i][4], carries[i]
        end
        if charged then
            write = charged
        elseif ban_write then
            write = ban_write
        elseif not all_allowed or not write then
            write = carried -- nil: nothing admitted for this limit, nothing carried
        end
        if not write then
            -- nothing to write
        elseif ban_ms then
            redis.call('SET', KEYS[i], write, 'PX', ban_ms)
        elseif now then
            -- an explicit now is not the server's clock: no expiry
            redis.call('SET', KEYS[i], write)
        else
            -- the key expires when its state stops mattering (reset_after, in
            -- ms rounded up): from then on it is the same as absent
            local ms
            if type(reset_after) == 'string' and helpers then
                ms = helpers.expiry_ms(reset_after)
            elseif type(reset_after) == 'string' then
                -- gcra from 9e15 ns on (a debt at its bound, 16 digits and more):
                -- helpers.expiry_ms, inline, as the gcra path makes no helpers
                local s, ns = tonumber(substring(reset_after, 1, -10)), tonumber(substring(reset_after, -9))
                ms = s * 1000 + (ns + 999999 - fmod(ns + 999999, 1000000)) / 1000000
            else
                ms = (reset_after + 999999 - fmod(reset_after + 999999, 1000000)) / 1000000
                if ms < 1 then
                    ms = 1
                end
            end
            redis.call('SET', KEYS[i], write, 'PX', ms)
        end
    end
end

if nkeys == 1 then
    if mode == ALLOW and allowed == 1 then
        return 1
    elseif mode == TAKE then
        return taken
    elseif mode == CHARGE then
        return { allowed, remaining, retry, reset, 1, clipped and 1 or 0 }
    end
    return { allowed, remaining, retry, reset, 1 }
end

-- Several limits: the tightest decision, chosen as the core's cr_check_all
-- chooses (docs/design.md §8), ties included: admitted, the fewest remaining,
-- the last limit on a tie (the core commits it first); refused, the longest
-- retry_after (never the longest of all), the last limit on a tie when only
-- it refused, else the first.
local function retry_of(decision)
    local retry_after = tonumber(decision[3])
    return retry_after == NEVER and math.huge or retry_after
end
local tightest = decisions[nkeys]
if all_allowed then
    for i = 1, nkeys - 1 do
        if decisions[i][2] < tightest[2] then
            tightest = decisions[i]
        end
    end
else
    local refused = true -- whether the last limit alone can have refused so far
    for i = 1, nkeys - 1 do
        if decisions[i][1] == 0 then
            refused = false
            break
        end
    end
    for i = 1, nkeys do
        local d = decisions[i]
        if d[1] == 0 and (not refused or retry_of(d) > retry_of(tightest)) then
            tightest, refused = d, true
        end
    end
end
if mode == ALLOW and tightest[1] == 1 then
    return 1
end
return tightest
