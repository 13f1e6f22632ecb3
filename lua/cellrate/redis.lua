-- cellrate.redis: one limit across hosts, its decisions kept in Redis
-- (docs/design.md §11). The same server-side script as the Python store
-- (redis/decide.lua in the repository, read where it is: below), sent to any
-- client object with evalsha, eval and script methods: lua-resty-redis in
-- OpenResty, redis-lua elsewhere.
--
--   local limiter = require("cellrate.redis").limiter(client, "10/s", { burst = 20 })
--   local allowed, remaining, retry_after, reset_after = limiter:check(key, cost)
--
-- Returns what the in-process keyed limiter returns. While Redis cannot
-- decide (unreachable, or a reply in M.UNAVAILABLE_REPLIES), opts.on_error
-- decides: "allow" (the default), "deny", or "raise" (nil, the client's error
-- and the code "unavailable", as the in-process module reports runtime
-- failures). Any other error reply (WRONGTYPE, a script error) is a mistake:
-- nil, the message and "unavailable", whatever on_error says.
--
-- A limit's keys are named by opts.name (default: its parameters), and each
-- value records the limit it was written under, so limiter:reconfigure and a
-- process started with another limit under the same name carry what each key
-- used, as the in-process store does (each key on its first check after the
-- change).
local cellrate = require("cellrate")

local unpack = table.unpack or unpack
local ngx_null = ngx and ngx.null

local M = { _VERSION = cellrate._VERSION }

-- The server scripts live once, in redis/ at the top of the repository; they
-- are read from this module's own place: cellrate/redis/<name>.lua beside it
-- where the rock installed them, else redis/<name>.lua of the checkout whose
-- lua/ holds it.
local here = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"

local function read_script(name)
    local tried = {}
    for _, dir in ipairs({ here .. "redis/", here .. "../../redis/" }) do
        local path = dir .. name .. ".lua"
        local file = io.open(path, "rb")
        if file then
            local text = file:read("*a")
            file:close()
            return text
        end
        tried[#tried + 1] = path
    end
    error("cellrate.redis: cannot find the script " .. name .. ".lua (tried "
          .. table.concat(tried, ", ") .. ")", 2)
end

-- The scripts, byte for byte as the Python package ships them: the rate
-- limits' and the concurrency limits'.
M.script = read_script("decide")
M.hold_script = read_script("hold")
-- The batch script (check_many): batch.lua with its line '--@decide.lua'
-- replaced by decide.lua's bytes, as the Python package sends it.
do
    local wrapper = read_script("batch")
    local at, past = wrapper:find("--@decide.lua\n", 1, true)
    M.batch_script = wrapper:sub(1, at - 1) .. M.script .. wrapper:sub(past + 1)
end

-- The settings of the script's protocol paragraph ("-- The protocol:" up to
-- the first blank line): NAME -> its value's text, a 'string' unquoted. The
-- Python face reads the same lines.
local function read_protocol(script)
    local start = assert(script:find("\n%-%- The protocol:"))
    local settings = {}
    for line in script:sub(start + 1, script:find("\n\n", start, true)):gmatch("[^\n]+") do
        local name, value = line:match("^local ([A-Z][A-Z_]*) = (.*)$")
        if not name then
            name, value = line:match("^%-%- ([A-Z][A-Z_]*) = (.*)$")
        end
        if name then
            settings[name] = value:match("^'(.*)'$") or value
        end
    end
    return settings
end

local hold_protocol = read_protocol(M.hold_script)

-- The protocol's rules are the core's (core/cellrate/redis.h): a request's
-- words, a reply's reading, what a failure means, on_error's answers, the
-- probe's back-off, a key's name. This module does the client's calls and
-- the back-off gate, and passes their values to the core and back.
local core = cellrate._redis_protocol()
local request_words, read_reply = cellrate._redis_request, cellrate._redis_reply
local classify, unavailable_answer = cellrate._redis_classify, cellrate._redis_unavailable

-- A tolerance (burst * emission interval) the script carries exactly: below this.
M.MAX_TOLERANCE_NS = core.MAX_TOLERANCE_NS

-- The first words of the Redis error replies that mean "Redis cannot decide
-- now": answered by on_error like an unreachable server.
M.UNAVAILABLE_REPLIES = core.UNAVAILABLE_REPLIES

-- While Redis cannot decide, a probe tries it after a back-off that doubles
-- from the first up to the largest (seconds; cellrate._redis_backoff).
M.FIRST_BACKOFF_S = core.FIRST_BACKOFF_S
M.MAX_BACKOFF_S = core.MAX_BACKOFF_S
-- The script's modes, as the core's request builder takes them.
local PEEK, CHECK, ALLOW, REFUND = core.PEEK, core.CHECK, core.ALLOW, core.REFUND
local CHARGE, TAKE = core.CHARGE, core.TAKE
-- peek, check and allow in a priority class: the class's name ends the request.
local PEEK_CLASS, CHECK_CLASS, ALLOW_CLASS = core.PEEK_CLASS, core.CHECK_CLASS, core.ALLOW_CLASS
-- A penalty's flag: or'ed into a decision's mode, the penalty ends the request (the
-- core sends it with a check or an allow of one key).
local PENALTY = core.PENALTY
-- How far after now a charge can leave a gcra key's TAT (ns): beyond it, clipped.
M.MAX_DEBT_NS = core.MAX_DEBT_NS

local Limiter = {}
Limiter.__index = Limiter

-- The core's own argument error, raised again at the caller's position.
local function without_position(err)
    return (tostring(err):gsub("^[^\n]-:%d+: ", "", 1))
end

-- The words after EVALSHA and the SHA of a request (numkeys first), built
-- by the core from (limit, prefix, name, key) groups, each key, cost and now
-- checked there; a mistake raised at the caller of the public function.
local function request(mode, cost, now, ...)
    local ok, words = pcall(request_words, mode, cost, now, ...)
    if not ok then
        error(without_position(words), 3)
    end
    return words
end

local function check_client(client)
    local ctype = type(client)
    if (ctype ~= "table" and ctype ~= "userdata") or type(client.evalsha) ~= "function"
        or type(client.eval) ~= "function" or type(client.script) ~= "function" then
        error("client must be a Redis client object with evalsha, eval and script methods "
              .. "(lua-resty-redis, redis-lua)", 3)
    end
end

-- A whole number (checked by the core) in decimal digits: a 5.4 integer as
-- it is (past 2^53 a double would round it), a double without its ".0".
local function decimal(number)
    if math.type and math.type(number) == "integer" then
        return string.format("%d", number)
    end
    return string.format("%.0f", number)
end

-- The core parses, defaults and validates a limit (max_debt too; with
-- max_cost, as in process: a burst, or a window's rate, that could never fit
-- it is refused, checked on a limiter made for that alone), and refuses one
-- the script cannot carry exactly. Raises at the caller of the public function.
local function limit_of(rate, opts, algorithm, max_cost, max_debt, priorities, tz)
    local made, limit = pcall(cellrate.limit_spec, rate, { period = opts.period,
                                                          burst = opts.burst,
                                                          algorithm = algorithm,
                                                          max_debt = max_debt,
                                                          priorities = priorities,
                                                          tz = tz })
    if not made then
        error(without_position(limit), 3)
    end
    if max_cost ~= nil then
        local fits, err = pcall(cellrate.limiter, rate, { period = opts.period,
                                                         burst = opts.burst,
                                                         algorithm = algorithm,
                                                         max_cost = max_cost,
                                                         tz = tz })
        if not fits then
            error(without_position(err), 3)
        end
    end
    local carried, err = pcall(cellrate._redis_check_limit, limit)
    if not carried then
        error(without_position(err), 3)
    end
    return limit
end

-- The options of a store's constructor judged by the core's table
-- (cellrate/options.h: "RedisLimiter", "RedisConcurrency", "ShareLimiter",
-- "KeyedShareLimiter"): every option this face takes, normalised (absent ones
-- at their default, or nil). An unknown name or a refused value raises in the
-- core's words, at the caller of the public function.
local function store_options(constructor, opts)
    local ok, options = pcall(cellrate._check_options, constructor, opts)
    if not ok then
        error(without_position(options), 3)
    end
    return options
end

-- on_error = "fallback"'s local limiter, from opts.fallback: a share of the
-- Redis limit (a number, the core's derivation; nil: the whole limit), a rate
-- or a cellrate.limit_spec, or a cellrate.keyed limiter of the caller's (one in
-- a shared region decides for the host: every nginx worker of it).
-- A fallback limit's options for cellrate.keyed and keyed:reconfigure.
local function local_options(local_limit)
    return { period = local_limit.period, algorithm = local_limit.algorithm,
             burst = cellrate._algorithm_takes_burst(local_limit.algorithm) and local_limit.burst
                 or nil }
end

local function fallback_store(self, given)
    local limit, store = self.limit, nil
    local local_limit
    if limit.algorithm == "calendar" then
        cellrate._redis_fallback_limit(limit, 1) -- the core's refusal, naming on_error
    end
    if type(given) == "userdata" and type(given.check) == "function" then
        store = given
        local info = given:info()
        local_limit = cellrate.limit_spec(info.rate, {
            period = info.period, algorithm = info.algorithm,
            burst = cellrate._algorithm_takes_burst(info.algorithm) and info.burst or nil })
    elseif type(given) == "string" then
        local_limit = cellrate.limit_spec(given, { algorithm = limit.algorithm })
    elseif type(given) == "userdata" and pcall(cellrate._redis_signature, given) then
        local_limit = given
    else -- a share (nil: 1), judged by the core, followed by reconfigure (follow)
        self.fallback_share = given == nil and 1 or given
        local_limit = cellrate._redis_fallback_limit(limit, self.fallback_share)
    end
    self.fallback_limit = local_limit
    self.fallback = store or cellrate.keyed(local_limit.rate, local_options(local_limit))
end

-- reconfigure: a fallback that is a share of the Redis limit (a number, or
-- none given) follows the new `limit` (the core's derivation), its keys
-- carrying what they used (keyed:reconfigure); a fallback given as a limit stays.
local function follow(self, limit)
    if self.fallback_share == nil then
        return
    end
    local local_limit = cellrate._redis_fallback_limit(limit, self.fallback_share)
    self.fallback:reconfigure(local_limit.rate, local_options(local_limit))
    self.fallback_limit = local_limit
end

-- limiter(client, rate, opts): opts as cellrate.limit_spec's (period, burst,
-- algorithm, max_debt) plus max_cost, name (the keys' name: default, the
-- limit's parameters), prefix ("cellrate:"), on_error, on_wipe ("refuse":
-- a key Redis lost, found by the script, reads as fully used for one period;
-- "allow": a fresh burst) and penalty ({ after = "5/minute", ban = 10,
-- max_ban = 60 }: a key refused `after` times is banned; its strikes live in a
-- second key beside its state, read by the script only when it refuses).
-- algorithm = "calendar" with tz (an IANA zone; nil: UTC): a quota per day,
-- week, month or year of the zone, decided in the period holding the server's
-- now (docs/calendar.md).
function M.limiter(client, rate, opts)
    check_client(client)
    -- the limit first, as cellrate.limit_spec judges it; then the options
    local given = type(opts) == "table" and opts or {}
    local limit = limit_of(rate, given, given.algorithm, given.max_cost, given.max_debt,
                           given.priorities, given.tz)
    opts = store_options("RedisLimiter", opts)
    local prefix, on_error = opts.prefix, opts.on_error
    local ok, err = pcall(cellrate._redis_fallback_check, on_error, given.fallback ~= nil)
    if not ok then
        error(without_position(err), 2)
    end
    local name = opts.name or cellrate._redis_signature(limit)
    local penalty
    if given.penalty ~= nil then
        local judged, box = pcall(cellrate._redis_penalty, given.penalty)
        if not judged then
            error(without_position(box), 2)
        end
        penalty = box
    end
    local self = setmetatable({
        client = client,
        script = M.script,
        limit = limit,
        burst = limit.burst,
        on_error = on_error,
        -- on_wipe = "refuse": the flag or'ed into every decision's mode (the request
        -- carries the wipe marker: the script reads a key Redis lost as fully used)
        on_wipe = opts.on_wipe,
        wipe = opts.on_wipe == "refuse" and core.WIPE_MARKER or 0,
        name = name,
        named = opts.name ~= nil,
        prefix = prefix,
        algorithm = limit.algorithm,
        max_cost = opts.max_cost,
        max_debt = opts.max_debt,
        priorities = given.priorities, -- kept by reconfigure
        tz = given.tz, -- a calendar quota's zone, kept by reconfigure unless given
        penalty = penalty, -- the core's (cellrate._redis_penalty), or nil
        -- the plans (docs/design/plans.md): { name = the limit sent }, "default" (the
        -- limit) among them, the core's table; nil without plans
        plans = nil,
        gate = nil, -- while Redis is down: a limiter letting one probe through per back-off
        backoff = 0,
        -- on_error = "fallback": the local keyed limiter, its limit, and the Redis keys
        -- it decided since Redis last answered for them (and their count)
        fallback = nil,
        fallback_limit = nil,
        fallback_share = nil, -- a share of the limit: the fallback follows reconfigure
        back_at = nil, back_left = nil, -- the region's back mark as the outage began
        held = {},
        nheld = 0,
    }, Limiter)
    if given.plans ~= nil then
        local made, plans = pcall(cellrate._redis_plans, limit, given.plans, self.named,
                                  opts.max_cost, opts.max_debt)
        if not made then
            error(without_position(plans), 2)
        end
        self.plans = plans
    end
    if on_error == "fallback" then
        local made, why = pcall(fallback_store, self, given.fallback)
        if not made then
            error(without_position(why), 2)
        end
    end
    return self
end

local function log(message)
    if ngx and ngx.log then
        ngx.log(ngx.WARN, message)
    end
end

-- A client's answer, or nil and its message: redis-lua raises on an error
-- reply, lua-resty-redis answers it with false and its text.
local function call(client, method, ...)
    local ok, result, err = pcall(client[method], client, ...)
    if not ok then
        return nil, tostring(result)
    end
    if result == nil or result == false or result == ngx_null then
        return nil, err or "no reply"
    end
    return result
end

-- The first word of the error reply in a client's message (lua-resty-redis:
-- the reply itself; redis-lua: "file:line: redis error: " and the reply), nil
-- for a failure that is no reply (a timeout, a closed or refused connection).
local function reply_word(err)
    local text = err:gsub("^[^\n]-:%d+: ", "", 1):gsub("^redis error: ", "", 1)
    return text:match("^(%u+) ")
end
M._reply_word = reply_word -- for the tests

-- What a failure means (the core's classification of its first word and
-- text): "cannot_decide", "mistake", "wrong_algorithm" (and its words),
-- "cross_slot" or "no_script".
local function failure(err)
    return classify(reply_word(err), err)
end

-- The script's reply to `words` (numkeys, KEYS, ARGV). After NOSCRIPT (a
-- restart, SCRIPT FLUSH, a failover) EVAL sends the script with the call, so
-- no flush can fail it again.
local shas = {} -- script -> its SHA, once loaded
local function send(client, script, words)
    if not shas[script] then
        local sha, err = call(client, "script", "load", script)
        if not sha then
            return nil, err
        end
        shas[script] = sha
    end
    local reply, err = call(client, "evalsha", shas[script], unpack(words))
    if not reply and err and failure(err) == "no_script" then
        reply, err = call(client, "eval", script, unpack(words))
    end
    return reply, err
end

-- A batch's words, sent with the batch script.
local function send_batch(client, words)
    return send(client, M.batch_script, words)
end

-- The same, for KEYS and ARGV apart (the concurrency and share scripts).
local function run(client, script, keys, args)
    local words = { #keys, unpack(keys) }
    for i = 1, #args do
        words[#words + 1] = args[i]
    end
    return send(client, script, words)
end

-- on_error's answer while Redis cannot decide (the core's: an invented
-- refusal lasts until the next probe, never less than the first back-off),
-- for a request of `mode` and `cost`: a decision's values, or a take's count.
-- (the fallback limiter has no classes: a class's decision is its plain one there)
local LOCAL_METHODS = { [PEEK] = "peek", [CHECK] = "check", [ALLOW] = "allow",
                        [CHARGE] = "charge", [TAKE] = "take", [PEEK_CLASS] = "peek",
                        [CHECK_CLASS] = "check", [ALLOW_CLASS] = "allow" }

-- on_error = "fallback": the decision of each limiter's local limiter for its
-- Redis key (several: as one, cellrate.check_all), each key then held until
-- Redis takes its use.
local function locally(mode, cost, words, now, stores)
    local n = #stores -- (a wipe marker may follow the keys)
    if n == 1 then
        local store = stores[1]
        local key = words[2]
        if mode ~= PEEK and mode ~= PEEK_CLASS and not store.held[key] then
            store.held[key], store.nheld = true, store.nheld + 1
        end
        return store.fallback[LOCAL_METHODS[mode]](store.fallback, key, cost, now)
    end
    local items = {}
    for i = 1, n do
        local store, key = stores[i], words[1 + i]
        items[i] = { store.fallback, key }
        if not store.held[key] then
            store.held[key], store.nheld = true, store.nheld + 1
        end
    end
    return cellrate.check_all(items, cost, now)
end

local function fallback(self, err, mode, cost, words, now, stores)
    if self.on_error == "raise" then
        return nil, err, "unavailable"
    end
    if self.on_error == "fallback" then
        return locally(mode, cost, words, now, stores or { self })
    end
    local _, _, probe_in = self.gate:peek(1)
    return unavailable_answer(mode, self.limit, self.on_error == "allow", cost, probe_in)
end

-- on_error = "fallback": the mark of Redis found back in the fallback's store
-- (a region: every process's), its key core.BACK_KEY read at instant 0 (a
-- function of what was written alone): two numbers that change each time a
-- process going back charges it.
local BACK_KEY = core.BACK_KEY
local function back_mark(self)
    local _, remaining, _, reset_after = self.fallback:peek(BACK_KEY, 0, 0)
    return reset_after, remaining
end

-- While the gate holds this limiter back: true (once per change) when
-- another process of the fallback's region found Redis back since, so that
-- every process goes back at once rather than each at its own probe.
local function back_changed(self)
    if not self.fallback then
        return false
    end
    local at, left = back_mark(self)
    return at ~= self.back_at or left ~= self.back_left, at, left
end

local function found_back(self)
    local changed, at, left = back_changed(self)
    if changed then
        -- the gate opens for every call (each coroutine of this process), not
        -- one try: the others would decide locally on what the first process
        -- back gave back to the region (went_back) while the try is in flight
        self.back_at, self.back_left = at, left
        self.gate, self.error = nil, nil
        log("cellrate.redis: Redis decides again (found by another process)")
    end
    return changed
end

-- Redis answered a call of this limiter: it decides again (with a fallback,
-- the region learns it: found_back).
local function decides(self)
    if self.gate then
        log("cellrate.redis: Redis decides again")
        self.gate, self.error = nil, nil
        if self.fallback then
            self.fallback:charge(BACK_KEY, 1)
        end
    end
end

-- A call of this limiter failed with `err`: nil, its message, true when Redis
-- cannot decide now (the gate then holds it back for a back-off), else false,
-- its kind and a wrong algorithm's words.
local function failed(self, err)
    local kind, mistake = failure(err)
    if kind ~= "cannot_decide" then
        return nil, "Redis refused the decision: " .. err, false, kind, mistake
    end
    self.backoff = cellrate._redis_backoff(self.gate and self.backoff or 0)
    if not self.gate then
        log("cellrate.redis: Redis cannot decide (" .. err .. "); answering on_error="
            .. self.on_error .. " until it decides again")
        if self.fallback then -- the mark as this outage began (found_back)
            self.back_at, self.back_left = back_mark(self)
        end
    end
    self.gate = cellrate.limiter(1, { period = self.backoff, burst = 1 })
    self.gate:allow() -- the next probe after one back-off
    self.error = err
    return nil, err, true
end

-- The script's reply to `words`, or nil and the message of a failure, with
-- true when it means Redis cannot decide now (on_error answers), else its
-- kind and a wrong algorithm's words.
local function reply_of(self, words)
    if self.gate and not self.gate:allow() and not found_back(self) then
        return nil, self.error, true
    end
    -- the client of this call, even if another coroutine sets another one
    -- while this one waits for Redis
    local reply, err = send(self.client, self.script, words)
    if reply ~= nil then
        decides(self)
        return reply
    end
    return failed(self, err or "no reply")
end

-- A key held under another algorithm (kind "wrong_algorithm", in the
-- script's words): the argument mistake it is, raised naming algorithm at
-- the caller of the public function (`level`: 3 from its own body, 4
-- through decide).
local function raise_mistake(kind, words, level)
    if kind == "wrong_algorithm" then
        error(words, level)
    end
end

-- Keys in several Redis Cluster hash slots (a CROSSSLOT reply): the
-- argument mistake it is, in the core's words, naming each key and its slot
-- (asked of the node, which knows the rule; -1, "?", where it cannot say),
-- raised at the caller of the public function (`level` as raise_mistake's).
local KEYSLOT = "return redis.call('CLUSTER', 'KEYSLOT', ARGV[1])"
local function raise_slots_differ(client, words, level, nlimits)
    local keys, slots = {}, {}
    for i = 2, 1 + nlimits do -- the limits' keys (a wipe marker follows them)
        keys[#keys + 1] = words[i]
        slots[#slots + 1] = tonumber(call(client, "eval", KEYSLOT, 0, words[i])) or -1
    end
    error(cellrate._redis_slots_message(keys, slots), level)
end

-- The decision of a request of `mode` for `limits` (one, or check_all's):
-- the script's reply read by the core, or on_error's answer.
-- `back`: a key decided locally going back to Redis (going_back's request).
-- Redis took the `owed` units the local state held for `redis_key`: the key is
-- no longer held, and the local state gives them back (a refund), so that
-- another process of a region going back with the key sends only what it
-- admitted since, not the same units again (what the others admit until they
-- read the mark, one call each, goes back with them).
local function went_back(self, redis_key, owed, now)
    if self.held[redis_key] then
        self.held[redis_key], self.nheld = nil, self.nheld - 1
    end
    if owed > 0 then
        self.fallback:refund(redis_key, owed, now)
    end
end

local function decide(self, mode, cost, words, now, level, back, ...)
    local sent = back and back.words or words
    local reply, err, unavailable, kind, mistake = reply_of(self, sent)
    if reply == nil then
        if unavailable then
            return fallback(self, err, mode, cost, words, now, back and back.stores)
        end
        raise_mistake(kind, mistake, level)
        if kind == "cross_slot" then
            raise_slots_differ(self.client, words, level, select("#", ...))
        end
        return nil, err, "unavailable"
    end
    if back and back.mode then
        if back.settled then
            went_back(self, words[2], back.owed, now)
        end
        mode = back.mode
    end
    local allowed, remaining, retry_after, reset_after, clipped = read_reply(mode, reply, ...)
    if allowed == nil then
        return nil, "Redis refused the decision: " .. remaining, "unavailable"
    end
    return allowed, remaining, retry_after, reset_after, clipped
end

-- (decide's results are returned from locals, not by a tail call: the
-- errors it raises name the caller's line at one level in every method)
-- A key this limiter decided locally during an outage, now that Redis answers
-- (no gate): the core's request for going back (a check, allow or charge goes
-- as a charge of what the local state still holds, plus the cost), or nil
-- (while the gate holds Redis back, decide answers locally as before).
local function going_back(self, mode, key, cost, now, limit, words)
    if self.nheld == 0 or not self.held[words[2]] then
        return nil
    end
    local _, held = self.fallback:peek(words[2], 0, now)
    local sent, sent_cost, settled =
        cellrate._redis_going_back(mode, cost, self.fallback_limit, held)
    if sent ~= mode or sent_cost ~= cost then
        words = request(sent + self.wipe, sent_cost, now, limit, self.prefix, self.name, key)
    end
    -- the units alone: what a take would settle first (the core's)
    local _, owed = cellrate._redis_going_back(TAKE, 0, self.fallback_limit, held)
    return { words = words, mode = sent, settled = settled, owed = owed }
end

-- A take, a refund (`mode`) or a decision that cannot carry a held key's
-- units (several limits as one, a batch's: as a take) settles the key first
-- (its Redis key `redis_key`): the charge of the units its local state still
-- holds (the core's), sent alone. true once Redis took it (or the key was not
-- held), else reply_of's failure (nil, its message, unavailable, kind, words).
local function settle_held(self, mode, key, redis_key, now, limit)
    if self.nheld == 0 or not self.held[redis_key] then
        return true
    end
    local _, held = self.fallback:peek(redis_key, 0, now)
    local sent, owed = cellrate._redis_going_back(mode, 0, self.fallback_limit, held)
    if owed > 0 then
        local reply, err, unavailable, kind, mistake = reply_of(self,
            request(sent + self.wipe, owed, now, limit, self.prefix, self.name, key))
        if reply == nil then
            return nil, err, unavailable, kind, mistake
        end
    end
    went_back(self, redis_key, owed, now)
    return true
end

-- settle_held for each of a decision's limiters, keys and limits (its
-- Redis keys after the first word of `words`).
local function settle_each(stores, keys, limits, words, now)
    for i, store in ipairs(stores) do
        local settled, err, unavailable, kind, mistake =
            settle_held(store, TAKE, keys[i], words[1 + i], now, limits[i])
        if not settled then
            return nil, err, unavailable, kind, mistake
        end
    end
    return true
end

-- The words of a check or an allow (a class's: `priority` not nil), with the
-- penalty if any; a mistake raised at the caller of the public method.
local function decision_words(self, mode, cost, now, limit, key, priority)
    local ok, words
    if self.penalty == nil and priority == nil then
        ok, words = pcall(request_words, mode + self.wipe, cost, now, limit, self.prefix,
                          self.name, key)
    elseif self.penalty == nil then
        ok, words = pcall(request_words, mode + self.wipe, cost, now, limit, self.prefix,
                          self.name, key, priority)
    elseif priority == nil then
        ok, words = pcall(request_words, mode + self.wipe + PENALTY, cost, now, limit,
                          self.prefix, self.name, key, self.penalty)
    else
        ok, words = pcall(request_words, mode + self.wipe + PENALTY, cost, now, limit,
                          self.prefix, self.name, key, priority, self.penalty)
    end
    if not ok then
        error(without_position(words), 3)
    end
    return words
end

-- The limit a decision under `plan` sends (nil: the limit): a name of
-- opts.plans ("default" among them), else the core's error naming plan.
local function plan_limit(self, plan)
    local plans = self.plans or { default = self.limit }
    local limit = type(plan) == "string" and rawget(plans, plan)
    if limit then
        return limit
    end
    local found, err = pcall(cellrate._redis_plan, plans, plan)
    if not found then
        error(without_position(err), 3)
    end
    return err
end

-- (each method builds its request itself: request raises at its caller's line)
-- `priority`: the class decided in (a name of opts.priorities; nil: none); the
-- script decides with the class's reserve. `plan`: the plan of key (a name of
-- opts.plans; nil: "default"); a key last decided under another carries what
-- it used, in the script.
function Limiter:check(key, cost, now, priority, plan)
    local limit = plan == nil and self.limit or plan_limit(self, plan)
    local mode = priority == nil and CHECK or CHECK_CLASS
    local words = decision_words(self, mode, cost, now, limit, key, priority)
    local allowed, remaining, retry_after, reset_after =
        decide(self, mode, cost, words, now, 4,
               going_back(self, mode, key, cost, now, limit, words), limit)
    return allowed, remaining, retry_after, reset_after
end

function Limiter:allow(key, cost, now, priority, plan)
    local limit = plan == nil and self.limit or plan_limit(self, plan)
    local mode = priority == nil and ALLOW or ALLOW_CLASS
    local words = decision_words(self, mode, cost, now, limit, key, priority)
    local allowed, err, code =
        decide(self, mode, cost, words, now, 4,
               going_back(self, mode, key, cost, now, limit, words), limit)
    if allowed == nil then
        return nil, err, code
    end
    return allowed
end

function Limiter:peek(key, cost, now, priority, plan)
    local limit = plan == nil and self.limit or plan_limit(self, plan)
    local mode = priority == nil and PEEK or PEEK_CLASS
    local words = priority == nil
        and request(PEEK + self.wipe, cost, now, limit, self.prefix, self.name, key)
        or request(PEEK_CLASS + self.wipe, cost, now, limit, self.prefix, self.name, key, priority)
    local allowed, remaining, retry_after, reset_after =
        decide(self, mode, cost, words, now, 4,
               going_back(self, mode, key, cost, now, limit, words), limit)
    return allowed, remaining, retry_after, reset_after
end

-- Commits cost units of key whatever its state (docs/cost.md): where they
-- fit, this is check; else the key goes into debt, refused, with the
-- retry_after of one more unit. check's four values, then clipped (the debt
-- met its bound: the limit's max_debt units beyond it, and M.MAX_DEBT_NS
-- after now; a window's packed ceiling). Where Redis cannot decide, on_error
-- answers and the charge is lost. `plan`: the plan of key, as check's.
function Limiter:charge(key, cost, now, plan)
    local limit = plan == nil and self.limit or plan_limit(self, plan)
    local words = request(CHARGE + self.wipe, cost, now, limit, self.prefix, self.name, key)
    local allowed, remaining, retry_after, reset_after, clipped =
        decide(self, CHARGE, cost, words, now, 4,
               going_back(self, CHARGE, key, cost, now, limit, words), limit)
    return allowed, remaining, retry_after, reset_after, clipped
end

-- Admits as many units of key as fit now, up to max_cost, in one script call
-- (atomic): their count (0: none fits). Where Redis cannot decide, on_error
-- answers: allow max_cost, deny 0, raise nil, the error and "unavailable".
function Limiter:take(key, max_cost, now)
    local limit = self.limit
    local words = request(TAKE + self.wipe, max_cost, now, limit, self.prefix, self.name, key)
    local reply, err, unavailable, kind, mistake = settle_held(self, TAKE, key, words[2], now,
                                                               limit)
    if reply then
        reply, err, unavailable, kind, mistake = reply_of(self, words)
    end
    if reply == nil then
        if unavailable then
            return fallback(self, err, TAKE, max_cost, words, now)
        end
        raise_mistake(kind, mistake, 3)
        return nil, err, "unavailable"
    end
    local taken, message = read_reply(TAKE, reply, limit)
    if taken == nil then
        return nil, "Redis refused the decision: " .. message, "unavailable"
    end
    return taken
end

-- Gives back cost units of key taken earlier (a call that timed out after
-- Redis admitted it; an estimate settled lower), exactly as the core's
-- refund: never better than idle. true, or nil, the error and "unavailable"
-- when Redis cannot answer, whatever on_error says (a refund is no decision).
-- `plan`: the plan of key, as check's.
function Limiter:refund(key, cost, now, plan)
    local limit = plan == nil and self.limit or plan_limit(self, plan)
    local words = request(REFUND, cost, now, limit, self.prefix, self.name, key)
    local reply, err = settle_held(self, REFUND, key, words[2], now, limit)
    if reply then
        reply, err = send(self.client, M.script, words)
    end
    if reply == nil then
        err = err or "no reply"
        local kind, mistake = failure(err)
        raise_mistake(kind, mistake, 3)
        return nil, err, "unavailable"
    end
    return true
end

-- A plan's limit as opts.plans gives one: { rate, period = , burst = }.
local function plan_spec(limit)
    return { limit.rate, period = limit.period,
             burst = cellrate._algorithm_takes_burst(limit.algorithm) and limit.burst or nil }
end

-- Changes the limit this store sends, live (opts: period, burst, max_debt;
-- algorithm only the limit's own): the next check (or allow) of each key
-- carries what it used to the new limit, in the script, at that decision's
-- instant. A max_debt given before stays unless given again. A limit without
-- a name cannot change (its keys are named by its parameters); an invalid
-- limit raises and changes nothing. opts.plan: the plan that changes (nil:
-- "default"); keys on other plans are untouched. A calendar quota keeps its
-- zone unless opts.tz is given (another zone or period carries each key's
-- count to the new period holding now).
function Limiter:reconfigure(rate, opts)
    local given = type(opts) == "table" and opts or {}
    local ok, err = pcall(cellrate._redis_check_change, self.named, self.algorithm, nil)
    if ok and given.plan ~= nil then
        ok, err = pcall(cellrate._redis_plan, self.plans or { default = self.limit }, given.plan)
    end
    local tz = given.tz
    if tz == nil then
        tz = self.tz
    end
    if ok and given.algorithm ~= nil then
        -- the core's checks first
        limit_of(rate, given, given.algorithm, nil, nil, nil,
                 given.algorithm == "calendar" and tz or nil)
        ok, err = pcall(cellrate._redis_check_change, true, self.algorithm, given.algorithm)
    end
    if not ok then
        error(without_position(err), 2)
    end
    local max_debt = given.max_debt
    if max_debt == nil then
        max_debt = self.max_debt
    end
    -- the limit first, as cellrate.limit_spec judges it; then the options
    local limit = limit_of(rate, given, self.algorithm, self.max_cost, max_debt,
                           self.priorities, tz)
    store_options("reconfigure", opts)
    if self.plans ~= nil then
        local others, default = {}, self.limit
        for name, plan in pairs(self.plans) do
            if name ~= "default" then
                others[name] = plan_spec(plan)
            end
        end
        if given.plan == nil or given.plan == "default" then
            default = limit
        else
            others[given.plan] = plan_spec(limit)
        end
        local made, plans = pcall(cellrate._redis_plans, default, others, true, self.max_cost,
                                  max_debt)
        if not made then
            error(without_position(plans), 2)
        end
        self.plans, limit = plans, default
    end
    follow(self, limit)
    self.limit, self.burst, self.max_debt, self.tz = limit, limit.burst, max_debt, tz
end

-- The Redis key holding key's state: prefix, the name, ':', then the key.
function Limiter:redis_key(key)
    local ok, redis_key = pcall(cellrate._redis_key, self.prefix, self.name, key)
    if not ok then
        error(without_position(redis_key), 2)
    end
    return redis_key
end

-- The Redis key holding key's strikes under a penalty (in its Cluster slot).
function Limiter:penalty_key(key)
    local ok, penalty_key = pcall(cellrate._redis_penalty_key, self.prefix, self.name, key)
    if not ok then
        error(without_position(penalty_key), 2)
    end
    return penalty_key
end

-- Forgets key (back to a full burst; out of the penalty box); nil and the
-- error when Redis cannot answer.
function Limiter:reset(key)
    local ok, redis_key = pcall(cellrate._redis_key, self.prefix, self.name, key)
    if not ok then
        error(without_position(redis_key), 2)
    end
    local deleted, err
    if self.penalty ~= nil then
        deleted, err = call(self.client, "del", redis_key,
                            cellrate._redis_penalty_key(self.prefix, self.name, key))
    else
        deleted, err = call(self.client, "del", redis_key)
    end
    if deleted == nil then
        return nil, err
    end
    return true
end

-- Several Redis limits decided as one script call: items = { {limiter, key}, ... }
-- (or {limiter, key, plan}: the key's plan, a name of the limiter's plans),
-- every limiter on the same client (in a Cluster the keys must share a slot:
-- hash tags). Admitted only if every limit admits; a refusal takes nothing
-- from any. Returns the tightest decision; on_error is the first limiter's.
function M.check_all(items, cost, now)
    local clients = {}
    if type(items) == "table" then
        for i, item in ipairs(items) do
            local pair = type(item) == "table" and getmetatable(item[1]) == Limiter
            clients[i] = pair and item[1].client
        end
    end
    local ok, err = pcall(cellrate._redis_check_items, clients, #clients)
    if not ok then
        error(without_position(err), 2)
    end
    local first, groups, limits = items[1][1], {}, {}
    for _, item in ipairs(items) do
        local limiter = item[1]
        -- read once: a decision never mixes two limits
        local limit = item[3] == nil and limiter.limit or plan_limit(limiter, item[3])
        limits[#limits + 1] = limit
        local at = #groups
        groups[at + 1], groups[at + 2], groups[at + 3], groups[at + 4] =
            limit, limiter.prefix, limiter.name, item[2]
    end
    local stores, keys = {}, {}
    for i, item in ipairs(items) do
        stores[i], keys[i] = item[1], item[2]
    end
    local words = request(CHECK + first.wipe, cost, now, unpack(groups))
    local settled, why, unavailable, kind, mistake = settle_each(stores, keys, limits, words, now)
    if not settled then
        if unavailable then
            return fallback(first, why, CHECK, cost, words, now, stores)
        end
        raise_mistake(kind, mistake, 3)
        return nil, why, "unavailable"
    end
    local allowed, remaining, retry_after, reset_after =
        decide(first, CHECK, cost, words, now, 4, { stores = stores }, unpack(limits))
    return allowed, remaining, retry_after, reset_after
end

-- Several decisions in one script call (redis/batch.lua; the words are the
-- core's cr_redis_batch): items = { { limiter, key [, cost [, plan]] }, ... }, an
-- item { { { limiter, key [, plan] }, ... }, cost } deciding several limits as one (as
-- check_all), every limiter on one client (in a Cluster every key in one
-- slot: hash tags). Returns a list holding, per item in order, a table of
-- what the call alone returns (allowed, remaining, retry_after, reset_after;
-- or nil, message, "unavailable": read it with unpack(answer, 1, 4)), each
-- exactly the call alone's answer: the script decides them in order, so a key
-- named twice decides the second time on what the first committed. An empty
-- list answers {} without a call; more than BATCH_MAX decisions go as several
-- calls, in order. A key held under another algorithm raises (naming
-- algorithm) after every decision was made.
M.BATCH_MAX = core.BATCH_MAX
local batch_words, batch_reply = cellrate._redis_batch, cellrate._redis_batch_reply

local function many_decisions(items, now)
    if type(items) ~= "table" then
        error(core.BATCH_ITEM, 3)
    end
    local decisions, client = {}, nil
    for i, item in ipairs(items) do
        if type(item) ~= "table" then
            error(core.BATCH_ITEM, 3)
        end
        local pairs_, cost
        if type(item[1]) == "table" and getmetatable(item[1]) ~= Limiter then
            pairs_, cost = item[1], item[2]
        else
            pairs_, cost = { { item[1], item[2], item[4] } }, item[3]
        end
        -- each decision's pairs, and every pair of the batch, on one client: the core's rule
        local clients = { client }
        for j, pair in ipairs(pairs_) do
            local limiter = type(pair) == "table" and pair[1]
            clients[j + 1] = getmetatable(limiter) == Limiter and limiter.client
        end
        local checked, err = pcall(cellrate._redis_check_items,
                                   { unpack(clients, 2, #pairs_ + 1) }, #pairs_)
        if checked and client ~= nil then
            checked, err = pcall(cellrate._redis_check_items, clients, #pairs_ + 1)
        end
        if not checked then
            error(without_position(err), 3)
        end
        client = client or clients[2]
        local groups, limits, stores, keys = {}, {}, {}, {}
        for j, pair in ipairs(pairs_) do
            local limiter = pair[1]
            -- read once: a decision never mixes two limits
            local limit = pair[3] == nil and limiter.limit or plan_limit(limiter, pair[3])
            stores[j], limits[j], keys[j] = limiter, limit, pair[2]
            local at = #groups
            groups[at + 1], groups[at + 2], groups[at + 3], groups[at + 4] =
                limit, limiter.prefix, limiter.name, pair[2]
        end
        local penalty = #stores == 1 and stores[1].penalty or nil
        local sent = CHECK + stores[1].wipe -- the first limiter's on_wipe, as check_all
        if penalty ~= nil then -- one key: with its store's penalty
            sent, groups[5] = sent + PENALTY, penalty
        end
        local ok, words = pcall(request_words, sent, cost, now, unpack(groups))
        if not ok then
            error(without_position(words), 3)
        end
        decisions[i] = { stores = stores, limits = limits, keys = keys, cost = cost,
                         words = words, call = { sent, cost, unpack(groups) } }
    end
    return decisions, client
end

-- A decision's answer from its element of the batch's reply (or the batch's
-- failure `err`, `unavailable` when Redis cannot decide): what the call alone
-- returns, as a table; a wrong algorithm's words in decision.mistake.
local function settle(decision, now, element, err)
    local store = decision.stores[1]
    if element ~= nil and type(element) == "table" and #element == 1 then
        err = tostring(element[1]) -- its error reply's words alone
    elseif element ~= nil then
        local allowed, remaining, retry_after, reset_after =
            read_reply(CHECK, element, unpack(decision.limits))
        if allowed == nil then
            return { nil, "Redis refused the decision: " .. remaining, "unavailable" }
        end
        return { allowed, remaining, retry_after, reset_after }
    end
    local _, message, unavailable, kind, mistake = failed(store, err)
    if unavailable then
        return { fallback(store, message, CHECK, decision.cost, decision.words, now,
                          decision.stores) }
    end
    if kind == "wrong_algorithm" then
        decision.mistake = mistake
    end
    return { nil, message, "unavailable" }
end

function M.check_many(items, now)
    local decisions, client = many_decisions(items, now)
    local answers, sent = {}, {}
    for i, decision in ipairs(decisions) do
        local store = decision.stores[1]
        -- keys decided locally during an outage: settled first (settle_each)
        local settled, err, unavailable, kind, mistake =
            settle_each(decision.stores, decision.keys, decision.limits, decision.words, now)
        if not settled then
            answers[i] = unavailable and { fallback(store, err, CHECK, decision.cost,
                                                    decision.words, now, decision.stores) }
                or { nil, err, "unavailable" }
            decision.mistake = kind == "wrong_algorithm" and mistake or nil
        elseif store.gate and not store.gate:allow() and not found_back(store) then -- on_error
            answers[i] = { fallback(store, store.error, CHECK, decision.cost, decision.words,
                                    now, decision.stores) }
        else
            sent[#sent + 1] = i
        end
    end
    for from = 1, #sent, M.BATCH_MAX do
        local chunk, calls = {}, {}
        for k = from, math.min(from + M.BATCH_MAX - 1, #sent) do
            chunk[#chunk + 1] = sent[k]
            calls[#calls + 1] = decisions[sent[k]].call
        end
        local ok, words = pcall(batch_words, now, calls)
        if not ok then
            error(without_position(words), 2)
        end
        local reply, err = send_batch(client, words)
        err = err or "no reply"
        if reply ~= nil then
            local fits, why = batch_reply(#chunk, reply)
            if not fits then
                local whole = "Redis refused the decision: " .. why
                for _, i in ipairs(chunk) do
                    answers[i] = { nil, whole, "unavailable" }
                end
            else
                for k, i in ipairs(chunk) do
                    decides(decisions[i].stores[1])
                    answers[i] = settle(decisions[i], now, reply[k])
                end
            end
        elseif failure(err) == "cross_slot" then -- a plain client on a Cluster node
            raise_slots_differ(client, words, 3)
        else
            for _, i in ipairs(chunk) do
                answers[i] = settle(decisions[i], now, nil, err)
            end
        end
    end
    for _, decision in ipairs(decisions) do
        if decision.mistake then
            error(decision.mistake, 2)
        end
    end
    return answers
end

-- The client for the calls that follow. In OpenResty a connection belongs to
-- one request: make the limiter once per worker (its back-off state lives
-- there) and hand it each request's connection before deciding.
function Limiter:set_client(client)
    check_client(client)
    self.client = client
end

-- The limit's fields (those of cellrate.limit_spec), its name, max_cost, on_error
-- and on_wipe.
function Limiter:info()
    local limit = self.limit
    return { rate = limit.rate, period = limit.period, burst = limit.burst,
             algorithm = limit.algorithm, window = limit.window,
             emission_ns = limit.emission_ns, tolerance_ns = limit.tolerance_ns,
             max_debt = limit.max_debt, max_cost = self.max_cost, name = self.name,
             on_error = self.on_error, on_wipe = self.on_wipe }
end

-- What cellrate.nginx asks of a limiter before it connects for a request:
-- whether the next decision asks Redis (false while a back-off holds Redis
-- back after a failure and no process of the fallback's region found it back
-- since: on_error answers without the client), and the limit a
-- decision under `plan` is described with (the plan's, the core's error naming
-- plan for an unknown name).
function Limiter:_asks_redis()
    local gate = self.gate
    return gate == nil or (gate:peek(1)) or (back_changed(self))
end

function Limiter:_plan_limit(plan)
    return plan == nil and self.limit or plan_limit(self, plan)
end

-- Concurrency limits (redis/hold.lua): a key's units in a sorted set scored
-- by the instant their lease ends, on the server's clock; one round trip per
-- acquire and per release, on_error as for rate limits.
local H_COUNT, H_ACQUIRE, H_RELEASE = hold_protocol.COUNT, hold_protocol.ACQUIRE,
    hold_protocol.RELEASE
-- The core's words for a release of something no concurrency limit gave out.
local SLOT_REFUSED = (function()
    local probe = cellrate.concurrency(1)
    local _, err = pcall(probe.release, probe, false)
    return without_position(err)
end)()

local Concurrency = {}
Concurrency.__index = Concurrency
local Slot = {} -- the metatable of the slots this store gives out

-- The core's checks of a concurrency limit and of a holding's key and cost.
-- Raises at the caller of the public function.
local function check_hold(limit, key, cost)
    local ok, err = pcall(cellrate._check_hold, limit, key, cost, nil)
    if not ok then
        error(without_position(err), 3)
    end
end

-- concurrency(client, limit, opts): at most limit units held at once per
-- key, across every process and host naming the limit. opts.lease (seconds,
-- required) gives back the units of a holder that never releases; name
-- (default "concurrency:<limit>"), prefix and on_error as for limiter.
function M.concurrency(client, limit, opts)
    check_client(client)
    opts = store_options("RedisConcurrency", opts)
    local prefix, on_error = opts.prefix, opts.on_error
    check_hold(limit, nil, 1) -- the limit; the table judged the lease (lease_ns)
    local lease_ns = opts.lease_ns
    local name = opts.name or (hold_protocol.DEFAULT_NAME .. ":" .. decimal(limit))
    return setmetatable({
        client = client,
        script = M.hold_script,
        limit = limit,
        lease = tonumber(lease_ns) / 1e9,
        limit_word = decimal(limit),
        lease_word = lease_ns,
        name = name,
        on_error = on_error,
        prefix = prefix,
        gate = nil, -- while Redis is down, as a limiter's
        backoff = 0,
    }, Concurrency)
end

-- The sorted set of key (nil: the limit's one key, prefix and name alone).
local function hold_key(self, key)
    return cellrate._redis_key(self.prefix, self.name, key)
end

-- c:acquire(key, cost): a slot holding cost (default 1) units of key, or
-- nil and "rejected". While Redis cannot decide, on_error answers: "allow" a
-- slot that holds nothing, "deny" nil and "rejected", "raise" nil, the error
-- and "unavailable".
function Concurrency:acquire(key, cost)
    check_hold(self.limit, key, cost)
    local redis_key, units = hold_key(self, key), decimal(cost == nil and 1 or cost)
    local reply, err, unavailable, kind, mistake =
        reply_of(self, { 1, redis_key, H_ACQUIRE, self.limit_word, units, self.lease_word })
    if reply == nil then
        if not unavailable or self.on_error == "raise" then
            raise_mistake(kind, mistake, 3)
            return nil, err, "unavailable"
        end
        if self.on_error == "allow" then
            return setmetatable({ owner = self }, Slot)
        end
        return nil, "rejected"
    end
    if type(reply) ~= "string" then
        return nil, "rejected"
    end
    return setmetatable({ owner = self, key = redis_key, holder = reply, cost = units }, Slot)
end

-- c:release(slot): true when its units came back; false when they had
-- already (released before, reclaimed by the lease, a slot of another limit)
-- or Redis cannot answer and on_error is not "raise" (the lease gives them
-- back; "raise": nil, the error and "unavailable").
function Concurrency:release(slot)
    if getmetatable(slot) ~= Slot then
        error(SLOT_REFUSED, 2)
    end
    local holder = slot.holder
    if slot.owner ~= self or holder == nil then
        return false
    end
    slot.holder = nil
    local reply, err, unavailable = reply_of(self, { 1, slot.key, H_RELEASE, holder, slot.cost })
    if reply == nil then
        if unavailable and self.on_error ~= "raise" then
            return false
        end
        return nil, err, "unavailable"
    end
    return tonumber(reply) > 0
end

-- c:in_flight(key): the units of key held now (their lease not ended), or
-- nil, the error and "unavailable" when Redis cannot answer.
function Concurrency:in_flight(key)
    check_hold(self.limit, key, 1)
    local reply, err = run(self.client, self.script, { hold_key(self, key) }, { H_COUNT })
    if reply == nil then
        return nil, err or "no reply", "unavailable"
    end
    return tonumber(reply)
end

-- The client for the calls that follow, as limiter:set_client.
Concurrency.set_client = Limiter.set_client

-- The limit, its lease (seconds), name and on_error.
function Concurrency:info()
    return { limit = self.limit, lease = self.lease, name = self.name, on_error = self.on_error }
end

M.Concurrency = Concurrency
M.Limiter = Limiter
-- What the share store (cellrate.share) takes from this one: reading a script
-- and its protocol, the check of a client, the options' judge, the log and
-- the one way a script is run. Argument checks raise at the caller of the
-- public function that calls them.
M._internal = {
    read_script = read_script, read_protocol = read_protocol, check_client = check_client,
    store_options = store_options, log = log, run = run,
}
return M
