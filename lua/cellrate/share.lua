-- cellrate.share: one fleet limit decided locally, each member under its share
-- of it (docs/design/share.md). The same heartbeat script as the Python face
-- (redis/share.lua in the repository, found as cellrate.redis finds its
-- own), sent through any client with evalsha, eval and script methods, as
-- cellrate.redis.
--
--   local share = require("cellrate.share")
--   local lim = share.limiter(client, "1000/s", { burst = 100, name = "api" })
--   local ok = lim:allow(cost)           -- the local limiter's decision
--   lim:heartbeat(now)                   -- every interval, from the caller (a timer)
--
-- The caller drives the heartbeats: every opts.interval seconds (default 1),
-- from a timer (in OpenResty, ngx.timer.every in one worker per host, with
-- opts.shared the host's region so that the share applies to every worker).
-- heartbeat(now, asked): now in seconds on any clock (only differences are
-- used; default: one interval since the last heartbeat), asked the units
-- asked since the last heartbeat (default: the local limiter's counters,
-- units_admitted + units_refused - units_refunded: on a shared region,
-- every process's).
-- Returns true, or nil, the error and "unavailable" when Redis did not
-- answer: the share stays, never more; or nil, the refusal and "refused"
-- when the fleet's interval or ttl (fixed by its first heartbeat) is not the
-- member's: it then holds nothing. The client may be nil until
-- set_client (OpenResty's init_by_lua, where no socket can be made).
local cellrate = require("cellrate")
local store = require("cellrate.redis")

local internal = store._internal
local M = { _VERSION = cellrate._VERSION }

-- The heartbeat's script, byte for byte as the Python package ships it.
M.script = internal.read_script("share")
local protocol = internal.read_protocol(M.script)
-- The smallest share among n members is 1 / (FLOOR_DIVISOR * n): the core's,
-- which the script's pins.
M.FLOOR_DIVISOR = cellrate._SHARE_FLOOR_DIVISOR
-- ttl's default in intervals, and timeout's (seconds): the core's options table's.
M.TTL_INTERVALS = math.floor(cellrate._check_options("ShareLimiter",
                                                     { name = "-", interval = 1 }).ttl)
M.DEFAULT_TIMEOUT_S = cellrate._check_options("ShareLimiter", { name = "-" }).timeout

local Share = {}
Share.__index = Share

-- The share's own options; every other is the local limiter's (clock, shared,
-- shared_mode, max_debt, capacity), judged with them by the core's options
-- table and passed on as given.
local OWN = { name = true, period = true, burst = true, interval = true, ttl = true,
              member = true, prefix = true, timeout = true }

local function without_position(err)
    return (tostring(err):gsub("^[^\n]-:%d+: ", "", 1))
end

-- Called by a public function as its tail call, so that argument errors raised
-- at level 2 here (3 in the helpers of cellrate.redis) are the caller's.
local function new(keyed, client, rate, opts)
    if client ~= nil then
        internal.check_client(client)
    end
    -- the core's table judges every option (cellrate/options.h): the fleet's, the
    -- heartbeats', and the local limiter's own (max_cost, algorithm and on_change
    -- refused: the local limiter follows the share)
    local given = type(opts) == "table" and opts or {}
    opts = internal.store_options(keyed and "KeyedShareLimiter" or "ShareLimiter", opts)
    local prefix, interval, ttl, timeout = opts.prefix, opts.interval, opts.ttl, opts.timeout
    local member = opts.member
    if member == nil then
        -- the instant and this table's address (pass opts.member, the host's
        -- name, where members start together)
        member = ("lua-%d-%s"):format(os.time(), tostring({}):match("(%x+)$"))
    end
    local ok, fleet = pcall(cellrate.limit_spec, rate, { period = opts.period, burst = opts.burst })
    if not ok then
        error(without_position(fleet), 2)
    end
    local self = setmetatable({
        client = client, name = opts.name, member = member, interval = interval, ttl = ttl,
        timeout = timeout,
        fleet = fleet, key = prefix .. "share:" .. opts.name,
        share = cellrate._SHARE_COLD_START, target = cellrate._SHARE_COLD_START, members = 0,
        joined = false, down = false, last = nil, keyed = keyed,
    }, Share)
    local local_opts = {}
    for option, value in pairs(given) do
        if not OWN[option] then
            local_opts[option] = value
        end
    end
    local local_rate
    local_rate, local_opts.period, local_opts.burst = cellrate._share_limit(fleet, self.share)
    local made, lim, err, code = pcall(keyed and cellrate.keyed or cellrate.limiter, local_rate,
                                       local_opts)
    if not made then
        error(without_position(lim), 2)
    elseif lim == nil then
        return nil, err, code -- the region (shared) could not be opened
    end
    self.local_limiter = lim
    local _
    _, self.counted = cellrate._share_asked(lim:stats(), 0)
    return self
end

-- limiter(client, rate, opts): the fleet's limit (opts.period, opts.burst as
-- cellrate.limit_spec's) and opts.name (required), interval, ttl, member,
-- prefix, timeout (the longest a heartbeat's reply takes: give the client no
-- longer one; default 0.25 s); the local limiter's clock, shared and
-- shared_mode. algorithm, max_cost and on_change are refused (the local limit
-- follows the share), as is an option no limiter takes. A region that cannot
-- be opened: nil, the core's words and its code, as cellrate.limiter.
function M.limiter(client, rate, opts)
    return new(false, client, rate, opts)
end

-- keyed(client, rate, opts): as limiter, with every key's limit scaled by the
-- share in a local keyed limiter (opts.capacity as cellrate.keyed's).
function M.keyed(client, rate, opts)
    return new(true, client, rate, opts)
end

-- Does what the core says a member does after `outcome`: runs the local
-- limiter at its share (every time it says so: a limit changed by hand is
-- undone; a change to its own limit changes nothing); true when the share
-- shrank below `held` and the heartbeat that says it was applied is due.
local function step(self, outcome, held, answered)
    local share, apply, confirm = cellrate._share_after(outcome, self.share, self.joined,
                                                        held or 0, answered or 0)
    if apply then
        local local_rate, period, burst = cellrate._share_limit(self.fleet, share)
        self.local_limiter:reconfigure(local_rate, { period = period, burst = burst })
    end
    self.share = share
    return confirm
end

-- One heartbeat (above). The share answered is applied to the local limiter
-- with reconfigure, every time (a limit changed by hand is undone): what was
-- used carries. The first answer is applied whatever the share this object
-- knew: the local limiter may run at one it never knew (a region that
-- another process, as a killed worker, reconfigured). A heartbeat the script
-- refuses (a ttl or interval that is not the fleet's) returns nil, the
-- refusal naming the parameter and "refused", and the member holds nothing.
function Share:heartbeat(now, asked)
    local counted_asked
    counted_asked, self.counted = cellrate._share_asked(self.local_limiter:stats(), self.counted)
    local elapsed = (now and self.last) and now - self.last or self.interval
    self.last = now
    local demand, held, fleet_rate = cellrate._share_report(
        self.fleet, asked or counted_asked, elapsed, self.joined, self.share, self.joined)
    local reply, err, args
    if self.client == nil then
        err = "no client: set_client first"
    else
        args = { self.member, demand, held, self.ttl, self.interval, fleet_rate, self.timeout }
        for i = 2, #args do
            args[i] = ("%.17g"):format(args[i])
        end
        reply, err = internal.run(self.client, M.script, { self.key }, args)
    end
    local refused = not reply and err and err:find(protocol.REFUSED, 1, true)
    if refused then
        step(self, "refused") -- a member refused holds nothing
        local refusal = err:sub(refused + #protocol.REFUSED):match("^%s*(.-)%s*$")
        internal.log("cellrate.share " .. self.name .. ": refused: " .. refusal)
        return nil, refusal, "refused"
    end
    local share, members, target
    if reply or not err then
        share, members, target = cellrate._share_reply(reply)
        if share == nil then -- not the script's reply: none
            err = members
        end
    end
    if share == nil then
        step(self, "unavailable") -- never more than the last share
        if not self.down then
            self.down = true
            internal.log("cellrate.share " .. self.name .. ": Redis does not answer the "
                         .. "heartbeat (" .. err .. "); keeping the share " .. self.share)
        end
        return nil, err, "unavailable"
    end
    if self.down then
        self.down = false
        internal.log("cellrate.share " .. self.name .. ": Redis answers again; rejoined")
    end
    self.members, self.target = members, target
    local confirm = step(self, "answered", held, share)
    self.joined = true
    if confirm then
        -- applied: said at once, so that its old share counts no more and the
        -- others grow at their next heartbeat, not one later (a failure here
        -- only leaves the old share counted for interval + timeout)
        args[3] = ("%.17g"):format(self.share)
        reply = internal.run(self.client, M.script, { self.key }, args)
        share, members, target = cellrate._share_reply(reply)
        if share ~= nil then
            self.members, self.target = members, target
            step(self, "confirmed", self.share, share)
        end
    end
    return true
end

-- The client for the heartbeats that follow (OpenResty: a connection per timer run).
function Share:set_client(client)
    internal.check_client(client)
    self.client = client
end

-- Leaves the fleet: the others grow at their next heartbeat (else after ttl).
-- The local limiter then runs at the core's slowest rate, burst 1: what this
-- member held is the others' now.
function Share:leave()
    if self.client then
        pcall(self.client.hdel, self.client, self.key, self.member)
    end
    step(self, "left")
end

-- The share, the target, the members and this member's local limit.
function Share:info()
    local local_rate, period, burst = cellrate._share_limit(self.fleet, self.share)
    return { share = self.share, target = self.target, members = self.members,
             rate = local_rate, burst = burst, period = period,
             name = self.name, member = self.member }
end

-- The decisions: the local limiter's (its counters are the demand; peek
-- counts nothing). A keyed share takes the key first.
for _, method in ipairs({ "allow", "check", "charge", "take" }) do
    Share[method] = function(self, ...)
        local lim = self.local_limiter
        return lim[method](lim, ...)
    end
end

function Share:peek(...)
    return self.local_limiter:peek(...)
end

function Share:reset(...)
    return self.local_limiter:reset(...)
end

M.Share = Share
return M
