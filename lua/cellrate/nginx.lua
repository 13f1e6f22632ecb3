--[[
cellrate in nginx's access phase (OpenResty, or nginx with its lua module):

    access_by_lua_block {
        require("cellrate.nginx").limit(per_ip)   -- keyed by the client's address
    }

decides, and answers a refusal with 429 and the RateLimit header fields and
Retry-After (the core's formatter: the same bytes as the Python face's
Decision.headers()); admissions carry the fields with admitted_headers. The
limits come from `cellrate` (a shared region makes one limit for every
worker). docs/design.md §12.
]]
local cellrate = require "cellrate"

local ngx = ngx
local ngx_var = ngx.var
local ngx_header = ngx.header
local ngx_exit = ngx.exit
local ngx_log = ngx.log
local ngx_print = ngx.print
local ngx_sleep = ngx.sleep
local ngx_WARN = ngx.WARN
local error, getmetatable, ipairs, pcall, select, setmetatable, tostring, type =
    error, getmetatable, ipairs, pcall, select, setmetatable, tostring, type
local check_all = cellrate.check_all
local check_priority_items = cellrate._check_priority_items
local check_plan_items = cellrate._check_plan_items
local byte, sub = string.byte, string.sub
local header_fields = cellrate.header_fields
-- The web rules (the core's, cellrate/web.h; docs/design/http.md): the
-- fields a dry run leaves out, the settlement of a count (the status of a
-- refusal and the prefix lengths of the default key are options: the core's
-- table judges them, check_options below).
local settle_count = cellrate.settle
local DRY_RUN_REMOVED = cellrate.dry_run_removed()

-- A decision and its fields through LuaJIT's FFI (cellrate.ffi: an FFI call
-- is compiled into the trace, a Lua C function ends it; the same core calls
-- and answers as the methods). nginx's lua module runs LuaJIT only, and
-- requires lua-resty-core, which is built on the FFI.
local fast = require "cellrate.ffi"
local keyed_check_headers, limiter_check_headers = fast.keyed, fast.limiter
local keyed_check, limiter_check = fast.keyed_check, fast.limiter_check
local address_key = fast.address_key

local _M = { _VERSION = cellrate._VERSION }

-- The two types' metatables, to tell a limiter from a keyed one per request
-- without a call into C.
local LIMITER_MT = getmetatable(cellrate.limiter(1))
local KEYED_PROBE = cellrate.keyed(1, { capacity = 1 })
local KEYED_MT = getmetatable(KEYED_PROBE)

local NO_OPTIONS = {}

-- A Redis limit (cellrate.redis's limiter): told by its metatable, once that
-- module is loaded (by whoever made the limiter); nil before, when no limit
-- can be one.
local function redis_mt()
    local redis = package.loaded["cellrate.redis"]
    return redis and redis.Limiter
end

-- Where a Redis limit is taken is the core's rule (cr_redis_nginx_items):
-- alone, with the option client; a limit kept here takes no client. Raised
-- at `level` (error's, counted from here) in the core's words.
local redis_nginx_items = cellrate._redis_nginx_items
local function check_redis_items(count, redis, client, level)
    local ok, err = pcall(redis_nginx_items, count, redis, client)
    if not ok then
        error("cellrate.nginx: " .. tostring(err), level)
    end
end

-- A client whose every call fails with `err`: what the limiter is handed when
-- the client function gives none (nil and the connect's error), so that the
-- limiter answers by on_error (or its fallback) as for any failed call.
local function unreachable(err)
    local function fail()
        return nil, err
    end
    return { evalsha = fail, eval = fail, script = fail }
end

--[[
with_client(limiter, client_of, level, fn, ...): fn(...) with this request's
Redis client handed to `limiter` (cellrate.redis). client_of() (opts.client)
is called only when the decision asks Redis: while a back-off holds Redis back
after a failure, on_error answers without a connection (no connect per
request through an outage; the probe connects). After fn, the client goes
back to nginx's pool (set_keepalive(): lua_socket_keepalive_timeout and
lua_socket_pool_size) when Redis answered, else it is closed (a reply late
after a timeout must not meet the next request). What fn raises is raised
again at `level`, after the client is closed.
]]
local function with_client(limiter, client_of, level, fn, ...)
    local client
    if limiter:_asks_redis() then
        local err
        client, err = client_of()
        if not client then
            limiter:set_client(unreachable(tostring(err or "the client function gave no client")))
        elseif not pcall(limiter.set_client, limiter, client) then
            error("cellrate.nginx: option client: the function returned a " .. type(client)
                  .. ", not a Redis client (lua-resty-redis's, or one with its calls)", level)
        end
    end
    local ok, a, b, c, d, e = pcall(fn, ...)
    if client then
        if ok and a ~= nil and limiter:_asks_redis() then
            client:set_keepalive()
        else
            client:close()
        end
    end
    if not ok then
        error("cellrate.nginx: " .. tostring(a), level)
    end
    return a, b, c, d, e
end

-- Why the core refuses a value, in the core's words (nil: it takes it): the
-- method called on a throwaway store under pcall (a C function called from
-- pcall carries no position in its message).
local function refused(probe, method, ...)
    local ok, err = pcall(method, probe, ...)
    return not ok and tostring(err) or nil
end

-- Options tables already checked (a table made once is checked once), and
-- the last one seen: comparing with it is cheaper than the lookup.
local checked = setmetatable({}, { __mode = "k" })
local last_checked

-- The options, judged by the core's table (cellrate/options.h, the web
-- policy's row: the Python face's Policy takes the same rules and words): an
-- unknown name, a mistyped or refused value raises at `level` (error's,
-- counted from here: 3 by default, limit()'s caller). The request path reads
-- the table as given.
local check_table = cellrate._check_options
local function check_options(opts, level)
    local ok, err = pcall(check_table, "Policy", opts)
    if not ok then
        error("cellrate.nginx: " .. tostring(err), level or 3)
    end
    checked[opts] = true
end

-- The client's address as a key (the core's, as cellrate.web.Policy's):
-- IPv4 by its first ipv4_prefix bits (default 32: "192.0.2.1"), IPv4-mapped
-- IPv6 as its IPv4 address, other IPv6 by its first ipv6_prefix bits
-- (default 64, the network a host is given: "2001:db8:1:2::/64"); "unknown"
-- for a client without an IP address (over a unix socket nginx gives
-- "unix:"): one key for every such client. nil where nginx gives none.
-- With the default prefixes, the keys of the addresses seen lately are kept
-- (as the Python policy keeps them): a known address costs a table lookup,
-- a fresh one a call into the core. Two generations of at most
-- KEY_CACHE_SIZE addresses each: when the recent one is full it becomes the
-- older one, and the older one is dropped.
local KEY_CACHE_SIZE = 4096
local recent_keys, older_keys, recent_count = {}, {}, 0

local function default_key(addr)
    local key = older_keys[addr] or address_key(addr)
    recent_count = recent_count + 1
    if recent_count > KEY_CACHE_SIZE then
        older_keys, recent_keys, recent_count = recent_keys, {}, 1
    end
    recent_keys[addr] = key
    return key
end

local function client_address(opts)
    local addr = ngx_var.binary_remote_addr
    if addr == nil then
        return nil
    end
    local ipv4, ipv6 = opts.ipv4_prefix, opts.ipv6_prefix
    if ipv4 == nil and ipv6 == nil then
        return recent_keys[addr] or default_key(addr)
    end
    return address_key(addr, ipv4, ipv6)
end

-- The request's key: opts.key as given (a string), what the function opts.key
-- returns, or the client's address. A key that is not a string is the
-- caller's mistake, raised at `level` (error's, counted from here).
local function request_key(opts, level)
    local key = opts.key
    if key == nil then
        key = client_address(opts)
        if key == nil then
            error("cellrate.nginx: the request has no client address (binary_remote_addr):"
                  .. " give the key option", level)
        end
    elseif type(key) == "function" then
        key = key()
        if type(key) ~= "string" then
            error("cellrate.nginx: option key: the function returned a " .. type(key) .. ": "
                  .. refused(KEYED_PROBE, KEYED_PROBE.peek, key), level)
        end
    end
    return key
end

-- Several limits: the items of cellrate.check_all, made once per list and
-- reused (a keyed limit's pair gets this request's key just before the call:
-- nothing yields in between, so requests cannot mix their keys).
local prepared = setmetatable({}, { __mode = "k" })

-- A list that is not one of limits is the caller's mistake, raised at `level`
-- (error's, counted from here).
local function items_of(limits, level)
    local items = prepared[limits]
    if items == nil then
        if limits[1] == nil then
            error("cellrate.nginx: limits must not be an empty list", level)
        end
        items = {}
        local redis = redis_mt()
        for i, limit in ipairs(limits) do
            local mt = getmetatable(limit)
            if mt == redis and mt ~= nil then
                check_redis_items(#limits, true, true, level + 1)
            end
            if mt ~= KEYED_MT and mt ~= LIMITER_MT then
                error("cellrate.nginx: limits[" .. i .. "] must be a cellrate limiter or keyed"
                      .. " limiter, got " .. type(limit), level)
            end
            items[i] = mt == KEYED_MT and { limit, false } or limit
        end
        prepared[limits] = items
    end
    return items
end

-- The nginx variable of each "$name" option value seen: its name.
local variable_names = {}

-- The name this request gives for opts[option] (plan, priority): a string
-- starting with "$" names an nginx variable ("$plan": ngx.var.plan, e.g. set
-- by a map on a credential nginx checked), another string is the name itself,
-- a function returns it (it may read ngx.var). An absent or empty value is
-- none (nil): the plan "default", no class. A function's answer that is
-- neither nil nor a string is the caller's mistake, raised at `level`
-- (error's, counted from here) in the core's words.
local function request_name(opts, option, level)
    local given = opts[option]
    local name
    if type(given) == "function" then
        name = given()
        if name ~= nil and type(name) ~= "string" then
            local priority, plan
            if option == "plan" then plan = name else priority = name end
            error("cellrate.nginx: option " .. option .. ": the function returned a " .. type(name)
                  .. ": " .. refused(KEYED_PROBE, KEYED_PROBE.peek, "k", 0, nil, priority, plan),
                  level)
        end
    elseif byte(given, 1) == 36 then -- "$"
        local variable = variable_names[given]
        if variable == nil then
            variable = sub(given, 2)
            variable_names[given] = variable
        end
        name = ngx_var[variable]
    else
        return given
    end
    if name == "" then
        return nil
    end
    return name
end

-- Every limit of `list` has keys.
local function all_keyed(list)
    for _, limit in ipairs(list) do
        if getmetatable(limit) ~= KEYED_MT then
            return false
        end
    end
    return true
end

-- Why `limits` other than one keyed limit take no class `priority` or plan
-- `plan` (either nil: none asked), in the core's words; nil: they do. Where a
-- class or a plan is taken is the core's rule: several limits decided as one
-- take neither, and a plan is a keyed limit's.
local function named_refused(limits, priority, plan)
    local list = getmetatable(limits) == LIMITER_MT and { limits } or limits
    local count = type(list) == "table" and #list or 0
    local ok, err = true, nil
    if priority ~= nil then
        ok, err = pcall(check_priority_items, count)
    end
    if ok and plan ~= nil then
        ok, err = pcall(check_plan_items, count, type(list) == "table" and all_keyed(list), true)
    end
    return not ok and tostring(err) or nil
end

-- One decision in the class `priority` and under the plan `plan` (either nil:
-- none): the methods (the FFI path takes neither).
local function decide_named(limits, opts, cost, priority, plan)
    local mt = getmetatable(limits)
    local allowed, remaining, retry_after, reset_after
    if mt == KEYED_MT then
        allowed, remaining, retry_after, reset_after =
            limits:check(request_key(opts, 4), cost, nil, priority, plan)
    elseif mt == LIMITER_MT and plan == nil then
        allowed, remaining, retry_after, reset_after = limits:check(cost, nil, priority)
    else
        error("cellrate.nginx: " .. (named_refused(limits, priority, plan) or "limits must be a"
              .. " cellrate limiter or a keyed limiter, got " .. type(limits)), 3)
    end
    return allowed, remaining, retry_after, reset_after, limits
end

-- The limits each options table's plan given as it is (a name: neither
-- "$variable" nor a function) was found a plan of: judged at the first limit()
-- of the pair, before any key or decision, naming plan in the core's words
-- (the options' check judged it a policy name).
local literal_plan_limits = setmetatable({}, { __mode = "k" })

local function check_literal_plan(limits, opts, level)
    local plan = opts.plan
    if type(plan) ~= "string" or byte(plan, 1) == 36 or literal_plan_limits[opts] == limits then
        return
    end
    local err
    local mt, redis = getmetatable(limits), redis_mt()
    if mt == KEYED_MT then
        err = refused(limits, limits.peek, "", 0, nil, nil, plan) -- peek writes nothing
    elseif redis ~= nil and mt == redis then
        err = refused(limits, limits._plan_limit, plan) -- no round trip
    else
        err = named_refused(limits, nil, plan)
    end
    if err ~= nil then
        error("cellrate.nginx: " .. err, level)
    end
    literal_plan_limits[opts] = limits
end

-- One decision: allowed, remaining, retry_after, reset_after, and the limit
-- the fields describe (for several limits: the one check_all says decided),
-- in the class `priority` and under the plan `plan` (nil: none).
-- Called by limit(): a mistake is raised at level 3, limit()'s caller.
local function decide(limits, opts, cost, priority, plan)
    if opts.client ~= nil and getmetatable(limits) == nil and type(limits) == "table" then
        items_of(limits, 4) -- a Redis limit in the list: decided alone
    end
    if opts.client ~= nil then
        check_redis_items(1, false, true, 4)
    end
    if priority ~= nil or plan ~= nil then
        return decide_named(limits, opts, cost, priority, plan)
    end
    local mt = getmetatable(limits)
    if mt == KEYED_MT then
        local allowed, remaining, retry_after, reset_after =
            keyed_check(limits, request_key(opts, 4), cost, nil, 3)
        return allowed, remaining, retry_after, reset_after, limits
    elseif mt == LIMITER_MT then
        local allowed, remaining, retry_after, reset_after =
            limiter_check(limits, cost, nil, 3)
        return allowed, remaining, retry_after, reset_after, limits
    elseif type(limits) == "table" then
        local items = items_of(limits, 4)
        local key
        for _, item in ipairs(items) do
            if type(item) == "table" then
                key = key or request_key(opts, 4)
                item[2] = key
            end
        end
        local allowed, remaining, retry_after, reset_after, index =
            check_all(items, cost)
        return allowed, remaining, retry_after, reset_after, limits[index]
    end
    error("cellrate.nginx: limits must be a cellrate limiter, a keyed limiter or a list of"
          .. " them, got "
          .. type(limits), 3)
end

-- One decision of a Redis limit (cellrate.redis) in the class `priority` and
-- under the plan `plan` (either nil: none), the limiter's check on this
-- request's client: a Redis outage is answered by the limiter's on_error
-- (its fallback) as anywhere else. Called by limit(): a mistake is raised at
-- level 3, limit()'s caller.
local function decide_redis(limiter, opts, cost, priority, plan)
    local client_of = opts.client
    if client_of == nil then
        check_redis_items(1, true, false, 4)
    end
    local key = request_key(opts, 4)
    local allowed, remaining, retry_after, reset_after =
        with_client(limiter, client_of, 4, limiter.check, limiter, key, cost, nil, priority, plan)
    return allowed, remaining, retry_after, reset_after, limiter
end

-- With opts.wait: the core's wait plan (docs/design/waiting.md), its sleeps
-- slept on ngx.sleep (the worker serves others meanwhile): the units are
-- admitted at a step's real instant, as lim:wait and Python's wait() admit
-- them; nil when the plan gives up (not within opts.wait s, or never).
-- Under the plan `key_plan` (nil: "default").
-- Called by limit(): a mistake is raised at level 3, limit()'s caller.
local function wait_for(limits, opts, cost, max_wait, key_plan)
    local mt = getmetatable(limits)
    local plan, key
    if mt == KEYED_MT then
        key = request_key(opts, 4)
        plan = limits:_wait_plan(key, cost, max_wait, nil, key_plan)
    elseif mt == LIMITER_MT and key_plan == nil then
        plan = limits:_wait_plan(cost, max_wait)
    elseif mt == LIMITER_MT then
        local _, err = pcall(check_plan_items, 1, false, true)
        error("cellrate.nginx: " .. tostring(err), 3)
    else
        error("cellrate.nginx: option wait: limits must be one cellrate limiter or keyed"
              .. " limiter", 3)
    end
    local action, seconds = plan:step()
    while action == "sleep" do
        ngx_sleep(seconds)
        action, seconds = plan:step()
    end
    if action ~= "go" then
        return nil
    end
    -- The fields as they stand once the wait is over: a probe commits nothing.
    local _, remaining, _, reset_after
    if key ~= nil then
        _, remaining, _, reset_after = limits:peek(key, 0, nil, nil, key_plan)
    else
        _, remaining, _, reset_after = limits:peek(0)
    end
    return true, remaining, 0, reset_after, limits
end

-- The fields of cellrate.header_fields (two to six name, value pairs) set on
-- the response: no table and no loop per request.
local function set_fields(name1, value1, name2, value2, name3, value3, name4, value4,
                          name5, value5, name6, value6)
    ngx_header[name1] = value1
    ngx_header[name2] = value2
    if name3 ~= nil then
        ngx_header[name3] = value3
    end
    if name4 ~= nil then
        ngx_header[name4] = value4
    end
    if name5 ~= nil then
        ngx_header[name5] = value5
    end
    if name6 ~= nil then
        ngx_header[name6] = value6
    end
end

-- Ends the request with the refusal of `opts`: its status (429) and, when
-- given, its body.
local function refuse(opts)
    local status = opts.status or 429
    local body = opts.body
    if body ~= nil then
        ngx.status = status
        ngx_header["Content-Type"] = opts.content_type or "text/plain; charset=utf-8"
        ngx_header["Content-Length"] = #body
        ngx_print(body)
    end
    return ngx_exit(status)
end

--[[
limit(limits, opts): decides for this request and answers a refusal.

limits: a cellrate.limiter, a cellrate.keyed, a cellrate.redis limiter (with
  the option client), or a list of limiters and keyed limiters decided as
  one (cellrate.check_all: admitted only if every limit admits, a refusal
  spends nothing; each keyed limit takes the request's key; the fields are
  those of the limit that decided).
opts (optional; a table made once and reused is cheapest: it is checked once,
and an unknown option or a value of the wrong type is an error naming it):
  key      the key of a keyed limiter: a string, or a function returning one;
           default the client's address (ngx.var.binary_remote_addr), IPv6
           by its /64 and IPv4-mapped IPv6 as IPv4
  ipv4_prefix, ipv6_prefix  the prefix lengths of that default key (32, 64)
  cost     units this request spends (default 1)
  status   status of a refusal, 400-599 (default 429)
  body     body of a refusal (default: nginx's own page for the status, which
           error_page can replace); content_type (default "text/plain;
           charset=utf-8", the Python middleware's)
  name     the policy name in the header fields (nil: the core's default name)
  legacy_headers    also X-RateLimit-Limit, -Remaining, -Reset
  admitted_headers  the fields on admitted responses too (default false: a
           refusal carries them, an admission none, as the Python middleware)
  dry_run  refuse nothing: log what would be refused, set its fields but
           Retry-After (the Python middleware's dry run)
  wait     seconds a request may be held (ngx.sleep, never blocking the
           worker) until the core's wait plan admits it, as lim:wait would;
           beyond that, refused (one limit, not a list)
  priority the class this request is decided in, a name of the limit's
           priorities (cellrate.limiter(rate, { priorities = {...} })), "$var"
           (the nginx variable var holds the name), or a function returning
           one, e.g. reading ngx.var:
           function() return ngx.var.http_x_priority or "normal" end
           (an absent or empty name: no class; one limit, not a list; not
           with wait)
  plan     the plan this request's key is decided under, a name of the keyed
           limit's plans (cellrate.keyed(rate, { plans = {...} })), "$var"
           (e.g. "$plan", from a map on a credential nginx checked, or a
           header an auth subrequest set: never one the client sends), or a
           function returning one; an absent or empty name: "default". Read
           once per request: the decision, the header fields (their policy
           name is the plan's, with its numbers) and charge() go under it.
           An unknown name is an error naming plan (a 500): never another
           limit. A name given as it is must be a policy name (the options'
           check) and one of the limit's plans (the first limit() with those
           limits, before any decision). (One keyed limit, not a list.)
  client   for a Redis limit (a cellrate.redis limiter, decided alone): a
           function giving this request's Redis client, connected
           (lua-resty-redis's), or nil and a message when it cannot connect
           (on_error answers); called only when the decision asks Redis, the
           client put back with set_keepalive() once Redis answered, else
           closed. Required for a Redis limit, refused for another.

Returns allowed, remaining, retry_after, reset_after when the request goes
on (allowed is false only in a dry run); a refusal ends the request. A
mistake in limits, opts or a key is raised at the caller's position.
]]
-- The request goes on with the decision, or is refused; the fields given
-- (cellrate.header_fields' pairs) are set on a refusal, and on an admission
-- with opts.admitted_headers. Not a vararg function: LuaJIT compiles no
-- trace through one's return here.
-- The plan and the class of this request, once: ngx.ctx keeps them for
-- charge() and a dry run's count (false: none).
local PLAN = "cellrate.plan"
local PRIORITY = "cellrate.priority"

local function answer(opts, decider, allowed, remaining, retry_after, reset_after,
                      name1, value1, name2, value2, name3, value3, name4, value4,
                      name5, value5, name6, value6)
    if allowed == nil then -- a shared region's lock held past its bound
        -- (Level 2: limit() returns answer(...), a tail call, so limit()'s
        -- caller is next.)
        error("cellrate: " .. tostring(remaining), 2)
    end
    if allowed then
        if name1 ~= nil and opts.admitted_headers then
            set_fields(name1, value1, name2, value2, name3, value3, name4, value4, name5,
                       value5, name6, value6)
        end
        return allowed, remaining, retry_after, reset_after
    end
    set_fields(name1, value1, name2, value2, name3, value3, name4, value4, name5, value5,
               name6, value6)
    if opts.dry_run then
        -- A dry run admits: the fields say where the quota stands, but not
        -- those the core leaves out (Retry-After, which would tell a client
        -- of a 200 to back off; docs/contract.md).
        for i = 1, #DRY_RUN_REMOVED do
            ngx_header[DRY_RUN_REMOVED[i]] = nil
        end
        -- counted in the limiter (its region: every worker's) as would_refuse,
        -- under the request's plan and in its class
        if decider._would_refuse then -- (a Redis limit counts nothing here)
            decider:_would_refuse(opts.cost or 1, opts.plan ~= nil and ngx.ctx[PLAN] or nil,
                                  opts.priority ~= nil and ngx.ctx[PRIORITY] or nil)
        end
        ngx_log(ngx_WARN, "cellrate dry run: would refuse ", tostring(decider),
                ", retry after ", retry_after, " s")
        return allowed, remaining, retry_after, reset_after
    end
    return refuse(opts)
end

-- `opts` (nil: none), checked once per table: a mistake is raised at the
-- position of whoever called limit() or hold().
local function checked_options(opts)
    opts = opts or NO_OPTIONS
    if opts ~= last_checked then
        if checked[opts] == nil then
            check_options(opts, 4)
        end
        last_checked = opts
    end
    return opts
end

function _M.limit(limits, opts)
    opts = checked_options(opts)
    local cost = opts.cost or 1
    local max_wait = opts.wait
    if max_wait == nil and opts.priority == nil and opts.plan == nil and opts.client == nil then
        -- The common case: one limit, its decision and the fields wanted
        -- (a refusal's; every decision's with admitted_headers) in one call.
        local every = opts.admitted_headers == true
        local mt = getmetatable(limits)
        if mt == KEYED_MT then
            return answer(opts, limits, keyed_check_headers(limits, request_key(opts, 3), cost,
                                                            nil, opts.name, opts.legacy_headers,
                                                            every, 2))
        elseif mt == LIMITER_MT then
            return answer(opts, limits, limiter_check_headers(limits, cost, nil, opts.name,
                                                              opts.legacy_headers, every, 2))
        end
    end
    local allowed, remaining, retry_after, reset_after, decider
    if max_wait ~= nil and opts.priority ~= nil then
        error("cellrate.nginx: option priority: a request held for its units (wait) takes no"
              .. " class", 2)
    end
    local priority = opts.priority ~= nil and request_name(opts, "priority", 3) or nil
    if opts.priority ~= nil then
        ngx.ctx[PRIORITY] = priority or false
    end
    local plan
    if opts.plan ~= nil then
        check_literal_plan(limits, opts, 3)
        plan = request_name(opts, "plan", 3)
        ngx.ctx[PLAN] = plan or false
    end
    local redis = redis_mt()
    if max_wait ~= nil then
        allowed, remaining, retry_after, reset_after, decider =
            wait_for(limits, opts, cost, max_wait, plan)
    elseif redis ~= nil and getmetatable(limits) == redis then
        allowed, remaining, retry_after, reset_after, decider =
            decide_redis(limits, opts, cost, priority, plan)
    end
    if allowed == nil and decider == nil then
        allowed, remaining, retry_after, reset_after, decider =
            decide(limits, opts, cost, priority, plan)
    end
    if allowed == nil then
        return answer(opts, decider, allowed, remaining)
    end
    if allowed and not opts.admitted_headers then
        return allowed, remaining, retry_after, reset_after
    end
    -- the plan that decided names the policy, with its numbers (a Redis limit:
    -- described by its plan's limit)
    local described, described_plan = decider, plan
    if redis ~= nil and getmetatable(decider) == redis then
        described, described_plan = decider:_plan_limit(plan), nil
    end
    return answer(opts, decider, allowed, remaining, retry_after, reset_after,
                  header_fields(described, allowed, remaining, retry_after, reset_after,
                                plan or opts.name, opts.legacy_headers, described_plan))
end

-- The nginx variable charge() reads for each options table checked.
local charge_variables = setmetatable({}, { __mode = "k" })

--[[
limits(rate, opts): the keyed limits of a rate string, "100/minute" or
"100/day;10/hour;1000000/month", a list for limit()'s `limits` (decided as
one). A part per month or year is a calendar quota (docs/calendar.md), and
with opts.tz (an IANA zone, "Europe/Berlin"; default UTC) a part per day or
week too; the other parts are rates. opts: the options of cellrate.keyed
(capacity, shared, burst, max_debt, ...) for every part, tz for the calendar
quotas (an error naming tz when there is none), burst for the rates; with
shared = path, the first part's region is at path, the next ones' at
path#1, path#2, ... (as cellrate.web.Policy names them). Make them once, at
init (init_by_lua*, or a module's top level), not per request.
]]
function _M.limits(rate, opts)
    opts = opts or NO_OPTIONS
    local parts = cellrate.parse_rates(rate, opts.tz ~= nil)
    local calendars = 0
    for _, part in ipairs(parts) do
        calendars = calendars + (part.calendar and 1 or 0)
    end
    cellrate._check_zoned(opts.tz ~= nil, calendars)
    local made = {}
    for i, part in ipairs(parts) do
        local options = {}
        for name, value in pairs(opts) do
            options[name] = value
        end
        if part.calendar then
            options.algorithm, options.burst = "calendar", nil
        else
            options.tz = nil
        end
        if opts.shared ~= nil and i > 1 then
            options.shared = opts.shared .. "#" .. (i - 1)
        end
        made[i] = cellrate.keyed(part.text, options)
    end
    return made
end

local function charge_variable(opts)
    local variable = charge_variables[opts]
    if variable ~= nil then
        return variable
    end
    check_options(opts, 4) -- limit()'s options and words: one table serves both
    if (opts.header == nil) == (opts.variable == nil) then
        error("cellrate.nginx: charge reads the cost from one place: give the option header"
              .. " (a response header's name) or variable (an nginx variable's), not both", 3)
    end
    variable = opts.variable or ("sent_http_" .. opts.header:lower():gsub("-", "_"))
    charge_variables[opts] = variable
    return variable
end

--[[
charge(limits, opts): in the log phase, settles what the request really cost,
known once the response has gone (a count the upstream reports in a header,
the bytes sent):

    log_by_lua_block {
        require("cellrate.nginx").charge(per_key, { key = ..., header = "X-Usage-Tokens" })
    }

limits: as for limit(). opts: limit()'s (the same table serves both), so the
  same key is settled and cost is what limit() charged (default 1); and the
  place of the real cost, one of
  header    a response header's name (read as $sent_http_<name>)
  variable  an nginx variable's name ("bytes_sent", "body_bytes_sent",
            "upstream_http_x_usage", ...)
The difference from cost is charged (lim:charge: the key may go into debt,
up to the limit's max_debt, refused until it drains) or given back
(lim:refund). A count above a limit's max_cost (its option) is settled as
max_cost there; what was clipped (at max_cost or at the debt bound) is
logged at WARN: one bad figure costs a key a bounded refusal. The core's
settlement, as cellrate.web.Policy's charge= (docs/design/http.md). A Redis
limit settles from a timer (ngx.timer.at(0): the log phase has no sockets),
on a client from opts.client; one nginx cannot schedule is logged, lost.
Returns
the difference, or nil when the place holds nothing or no count (decimal
digits, whitespace around them allowed): nothing is settled then, and a
value that is no count is logged with the core's words.
]]
-- Each limit's max_cost (false: none), read once: a store keeps it.
local max_costs = setmetatable({}, { __mode = "k" })

-- Settles the count `value` on one limit that `cost` charged at the door
-- (the core's settlement: at most the limit's max_cost); logs what was
-- clipped.
local function settle(limit, key, cost, value, plan)
    local most = max_costs[limit]
    if most == nil then
        most = limit:info().max_cost or false
        max_costs[limit] = most
    end
    local total, units, clipped = settle_count(cost, value, most or nil)
    if clipped then
        ngx_log(ngx_WARN, "cellrate: charge: ", value, " units, above max_cost ", most,
                ": settled as ", total)
    end
    if units < 0 then
        if key then limit:refund(key, -units, nil, plan) else limit:refund(-units) end
    elseif units > 0 then
        local debt
        if key then
            debt = select(5, limit:charge(key, units, nil, plan))
        else
            debt = select(5, limit:charge(units))
        end
        if debt then
            ngx_log(ngx_WARN, "cellrate: charge: ", value, " units met the debt bound",
                    key and " (key " .. tostring(key) .. ")" or "", ": committed up to it")
        end
    end
end

-- settle() of a Redis limit, in a timer: nginx's log phase has no sockets.
-- With the request's client function (it must not read ngx.var: a timer has
-- no request); what settle() raises lands in the error log.
local function settle_on_redis(premature, limit, client_of, key, cost, value, plan)
    if not premature then
        with_client(limit, client_of, 2, settle, limit, key, cost, value, plan)
    end
end

function _M.charge(limits, opts)
    opts = opts or NO_OPTIONS
    local value = ngx_var[charge_variable(opts)]
    if value == nil or value == "" then
        return nil -- nothing reported
    end
    local cost = opts.cost or 1
    local total, units = settle_count(cost, value, nil)
    if total == nil then
        ngx_log(ngx_WARN, "cellrate: ", units, ", got ", value)
        return nil
    end
    if units == 0 then
        return 0
    end
    local list = getmetatable(limits) and { limits } or limits
    if type(list) ~= "table" or list[1] == nil then
        error("cellrate.nginx: limits must be a cellrate limiter, a keyed limiter or a list of"
              .. " them, got " .. type(limits), 2)
    end
    local key, plan
    if opts.plan ~= nil then -- the plan limit() decided under (else the request's now)
        plan = ngx.ctx[PLAN]
        if plan == nil then
            plan = request_name(opts, "plan", 3)
        end
        plan = plan or nil
    end
    local redis = redis_mt()
    for i, limit in ipairs(list) do
        local mt = getmetatable(limit)
        if mt == KEYED_MT then
            key = key or request_key(opts, 3)
            settle(limit, key, cost, value, plan)
        elseif mt == LIMITER_MT then
            settle(limit, nil, cost, value)
        elseif mt == redis and mt ~= nil then
            check_redis_items(#list, true, opts.client ~= nil, 3)
            key = key or request_key(opts, 3)
            local ok, err = ngx.timer.at(0, settle_on_redis, limit, opts.client, key, cost, value,
                                         plan)
            if not ok then
                ngx_log(ngx_WARN, "cellrate: charge: ", value, " units not settled (key ",
                        tostring(key), "): ", err)
            end
        else
            error("cellrate.nginx: limits[" .. i .. "] must be a cellrate limiter or keyed"
                  .. " limiter, got " .. type(limit), 2)
        end
    end
    return units
end

-- Concurrency (docs/design.md §15): hold(concurrency, opts) in the access
-- phase takes one unit (opts.cost) of the request's key (opts.key, default
-- the client's address; none for a limit without capacity) and keeps the
-- slot in ngx.ctx; leave() in the log phase gives back every slot the request
-- holds. The log phase runs for every request, also one whose client went
-- away; a worker that dies holding slots leaves them to be reclaimed (the
-- region records the worker). A refusal ends the request with opts.status
-- (429) and opts.body, without Retry-After (no field counts work in flight).
-- The request's holdings in ngx.ctx: HELD the concurrency limit and SLOT its
-- slot (one holding, the common case), or HELD a list of limit, slot, ...
local HELD, SLOT = "cellrate.held", "cellrate.slot"
-- Whether a concurrency limit has keys, asked once of each (info() makes a table).
local keyed_limits = setmetatable({}, { __mode = "k" })

function _M.hold(concurrency, opts)
    opts = checked_options(opts)
    local keyed = keyed_limits[concurrency]
    if keyed == nil then
        keyed = concurrency:info().capacity ~= nil
        keyed_limits[concurrency] = keyed
    end
    local key = keyed and request_key(opts, 3) or nil
    local slot, err = concurrency:acquire(key, opts.cost or 1)
    if slot then
        local ctx = ngx.ctx
        local held = ctx[HELD]
        if held == nil then
            ctx[HELD], ctx[SLOT] = concurrency, slot
            return true
        end
        if type(held) ~= "table" then
            held = { held, ctx[SLOT] }
            ctx[HELD], ctx[SLOT] = held, nil
        end
        held[#held + 1] = concurrency
        held[#held + 1] = slot
        return true
    end
    if err ~= "rejected" then -- a shared region's lock held past its bound
        error("cellrate: " .. tostring(err), 2)
    end
    if opts.dry_run then
        ngx_log(ngx_WARN, "cellrate dry run: would refuse ", tostring(concurrency),
                ": ", concurrency:info().limit, " in flight")
        return false
    end
    return refuse(opts)
end

function _M.leave()
    local ctx = ngx.ctx
    local held = ctx[HELD]
    if held == nil then
        return
    end
    ctx[HELD] = nil
    if type(held) ~= "table" then
        local slot = ctx[SLOT]
        ctx[SLOT] = nil
        held:release(slot)
        return
    end
    for i = 1, #held, 2 do
        held[i]:release(held[i + 1])
    end
end

--[[
Prometheus metrics (docs/operations.md#prometheus). register(name, limit)
names a limit, a keyed limit or a concurrency limit in a shared region, in
init_by_lua (the master: every worker inherits it); metrics(), in a
content_by_lua location, answers the Prometheus text of every registered
limit, read from its region: every worker reads the same counters, so any
worker's answer is the host's total. A limit of one worker's own (no shared=)
counts that worker alone, which no scrape could sum: register() refuses it.
The metrics are the core's list, as cellrate.prometheus's (Python).
]]
local registered = {} -- { name =, limit =, concurrency = } in registration order
local registered_names = {}

local CONCURRENCY_MT = getmetatable(cellrate.concurrency(1))

-- The metrics, their names, help texts and labels: the core's one list
-- (docs/design.md §17), which cellrate.prometheus and cellrate.otel read too.
local METRICS = cellrate.metrics()

function _M.register(name, limit)
    if type(name) ~= "string" or name == "" then
        error("name must be a non-empty string (the limit label), got " .. type(name), 2)
    end
    local mt = getmetatable(limit)
    if mt ~= LIMITER_MT and mt ~= KEYED_MT and mt ~= CONCURRENCY_MT then
        error("limit must be a cellrate limiter, keyed limiter or concurrency limit, got "
              .. type(limit), 2)
    end
    if registered_names[name] then
        error("name: '" .. name .. "' is already registered; give each limit its own name", 2)
    end
    if not limit:info().shared then
        error("limit: '" .. name .. "' is not in a shared region, so each worker counts its own"
              .. " decisions and no scrape can sum them; give it shared = path", 2)
    end
    registered_names[name] = true
    registered[#registered + 1] = { name = name, limit = limit, concurrency = mt == CONCURRENCY_MT }
end

-- A label value as the text format writes it: \, \" and \n escaped.
local function label_value(text)
    return (text:gsub("[\\\"\n]", { ["\\"] = "\\\\", ["\""] = "\\\"", ["\n"] = "\\n" }))
end

-- The samples of `metric` from one row of counters (stats(), or a row of
-- stats_by()), under `labels` (the text of those before the metric's own).
local function samples_text(out, metric, labels, counts)
    local label = metric.label
    for _, sample in ipairs(metric.samples) do
        local count = counts[sample.field]
        if count ~= nil then -- a peak that is not tracked: no sample
            local own = label and ('%s%s="%s"'):format(labels ~= "" and "," or "",
                                                       label.name, sample.value) or ""
            out[#out + 1] = ("%s{%s%s} %s\n"):format(metric.prometheus_name, labels, own,
                                                     ("%.0f"):format(count))
        end
    end
end

local function family_text(out, metric, stats, stats_by)
    local concurrency = metric.stats == "concurrency"
    local by = metric.by
    local head = #out
    for i, entry in ipairs(registered) do
        if entry.concurrency == concurrency then
            -- the labels the helper has a value for: the registered name alone
            local values, known = { limit = entry.name }, {}
            for _, common in ipairs(metric.labels) do
                if values[common.name] ~= nil then
                    known[#known + 1] = ('%s="%s"'):format(common.name,
                                                           label_value(values[common.name]))
                end
            end
            local labels = table.concat(known, ",")
            if by == nil then
                samples_text(out, metric, labels, stats[i])
            else -- a series for each plan or class: stats_by()'s rows under the label's name
                for _, row in ipairs(stats_by[i][by.name]) do
                    samples_text(out, metric, ('%s%s%s="%s"'):format(labels,
                                 labels ~= "" and "," or "", by.name, label_value(row.name)), row)
                end
            end
        end
    end
    if #out > head then
        table.insert(out, head + 1, ("# HELP %s %s\n# TYPE %s %s\n"):format(
            metric.prometheus_name, metric.help, metric.prometheus_name, metric.type))
    end
end

-- The Prometheus text of every registered limit (the body metrics() sends).
function _M.metrics_text()
    local stats, stats_by = {}, {}
    for i, entry in ipairs(registered) do
        stats[i] = entry.limit:stats()
        stats_by[i] = not entry.concurrency and entry.limit:stats_by() or nil
    end
    local out = {}
    for _, metric in ipairs(METRICS) do
        family_text(out, metric, stats, stats_by)
    end
    return table.concat(out)
end

function _M.metrics()
    local body = _M.metrics_text()
    ngx_header["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
    ngx_print(body)
    return ngx_exit(ngx.HTTP_OK)
end

return _M
