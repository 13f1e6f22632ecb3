--[[
check and check_headers through LuaJIT's FFI: the same answers as the
methods

    keyed:check_headers(key, cost, now, name, legacy)
    lim:check_headers(cost, now, name, legacy)
    keyed:check(key, cost, now)
    lim:check(cost, now)

(allowed, remaining, retry_after, reset_after, then, for check_headers, the
header fields as name, value pairs), as

    local fast = require "cellrate.ffi"      -- LuaJIT only
    fast.keyed(keyed, key, cost, now, name, legacy, every, level)
    fast.limiter(lim, cost, now, name, legacy, every, level)
    fast.keyed_check(keyed, key, cost, now, level)
    fast.limiter_check(lim, cost, now, level)

and the key of a client's address given as bytes (nginx's
$binary_remote_addr), as cellrate.binary_address_key gives it:

    fast.address_key(bytes, ipv4_prefix, ipv6_prefix, level)

every and level are optional. level: where a mistake is raised, as error()'s
level counted from the caller (1, the default: the caller's line; a helper
passes 2 for its own caller's).

A Lua C function ends a LuaJIT trace; an FFI call is compiled into it. In
nginx's access phase that is most of what a decision costs beside the core's
work (docs/design.md §12), so cellrate.nginx calls these under LuaJIT. The C
side is the module's own (bindings/lua/ffi.c, ffi_check_headers: the same
conversions and core calls as check_headers), reached through a table of
pointers the module gives as cellrate._ffi_api, not through exported
symbols. Anything the fast path does not take (another type of argument, a
closed store, a mistake) goes to the method, which answers or raises exactly
as it always does; nothing is decided twice.
]]
local ffi = require "ffi"
local cellrate = require "cellrate"

local error, getmetatable, tonumber, type = error, getmetatable, tonumber, type
local ffi_string = ffi.string

-- The layout of the module's table that the declarations below mirror
-- (FFI_API_LAYOUT in bindings/lua/ffi.c): its number leads the table in
-- every layout, so it is read before anything else is trusted.
local LAYOUT = 2

-- Mirrors of cr_decision, cr_header and cr_headers (core/cellrate/decision.h
-- and http.h; the sizes are checked against the module's below) and of the
-- module's table.
if not pcall(ffi.typeof, "cellrate_ffi_layout") then
    ffi.cdef [[
        typedef struct {
            int layout;
        } cellrate_ffi_layout;

        typedef struct {
            bool allowed;
            int64_t limit;
            int64_t remaining;
            int64_t retry_after_ns;
            int64_t reset_after_ns;
            bool clipped;
        } cellrate_decision;
        typedef struct {
            const char *name;
            char value[192];
            size_t value_len;
        } cellrate_header;
        typedef struct {
            int count;
            cellrate_header field[6];
        } cellrate_headers;
        typedef struct {
            int layout;
            int (*check)(void *payload, const char *key, size_t key_len, double cost,
                         bool has_now, double now, cellrate_decision *decision);
            int (*check_headers)(void *payload, const char *key, size_t key_len, double cost,
                                 bool has_now, double now, const char *name, size_t name_len,
                                 bool legacy, bool every, cellrate_decision *decision,
                                 cellrate_headers *fields);
            double (*ns_to_seconds)(int64_t ns);
            const char *(*strerror)(int status);
            const char *(*status_name)(int status);
            size_t decision_size;
            size_t headers_size;
            int closed;
            size_t (*address_key)(const char *bytes, size_t len, bool has_ipv4, double ipv4,
                                  bool has_ipv6, double ipv6, char *out);
            size_t address_key_max;
        } cellrate_ffi_api;
    ]]
end

local layout = ffi.cast("const cellrate_ffi_layout *", cellrate._ffi_api).layout
if layout ~= LAYOUT then
    error(("cellrate.ffi: the module's table has layout %d, this file declares layout %d;"
        .. " install cellrate.ffi and the cellrate module of one version"):format(layout, LAYOUT))
end
local api = ffi.cast("const cellrate_ffi_api *", cellrate._ffi_api)
if api.decision_size ~= ffi.sizeof("cellrate_decision")
    or api.headers_size ~= ffi.sizeof("cellrate_headers") then
    error("cellrate.ffi: the declarations of cr_decision and cr_headers do not match the module's")
end
local check = api.check
local check_headers = api.check_headers
local ns_to_seconds = api.ns_to_seconds
local address_key = api.address_key

local LIMITER_MT = getmetatable(cellrate.limiter(1))
local KEYED_MT = getmetatable(cellrate.keyed(1, { capacity = 1 }))

-- One decision and its fields at a time: nothing yields between the call and
-- the reading of these.
local decision = ffi.new("cellrate_decision")
local fields = ffi.new("cellrate_headers")
local key_buffer = ffi.new("char[?]", api.address_key_max)

local function field(i)
    local f = fields.field[i]
    return ffi_string(f.name), ffi_string(f.value, f.value_len)
end

-- The decision, as check() returns it.
local function decided()
    return decision.allowed, tonumber(decision.remaining),
        ns_to_seconds(decision.retry_after_ns), ns_to_seconds(decision.reset_after_ns)
end

-- The decision and the fields, as check_headers() returns them (the
-- decision alone when no field was asked for).
local function answer()
    local allowed, remaining, retry_after, reset_after = decided()
    local count = fields.count
    if count == 0 then
        return allowed, remaining, retry_after, reset_after
    end
    local name1, value1 = field(0)
    local name2, value2 = field(1)
    if count == 2 then
        return allowed, remaining, retry_after, reset_after, name1, value1, name2, value2
    end
    local name3, value3 = field(2)
    if count == 3 then
        return allowed, remaining, retry_after, reset_after, name1, value1, name2, value2,
            name3, value3
    end
    local name4, value4 = field(3)
    local name5, value5 = field(4)
    if count == 5 then
        return allowed, remaining, retry_after, reset_after, name1, value1, name2, value2,
            name3, value3, name4, value4, name5, value5
    end
    local name6, value6 = field(5)
    return allowed, remaining, retry_after, reset_after, name1, value1, name2, value2,
        name3, value3, name4, value4, name5, value5, name6, value6
end

-- The public functions below reach handover() and failure() by tail calls,
-- and these reach raised() by one: so in each of them the public function's
-- caller is level 2, and `level` (counted from that caller) is error's
-- level + 1.

-- The method's answer; its mistake raised at `level` (error's).
local function raised(level, ok, ...)
    if not ok then
        error(..., level)
    end
    return ...
end

-- The method, which answers or raises as it always does. Without a level it
-- is tail-called: a mistake it raises names the line of its caller, which is
-- the public function's. With one, it is called from pcall (a C function
-- called from pcall puts no position in its message) and its mistake raised
-- again at that level.
local function handover(level, method, ...)
    if level == nil then
        return method(...)
    end
    return raised(level + 1, pcall(method, ...))
end

-- A status other than CR_OK: a region's lock as the method returns it; a
-- bad name (checked before deciding) raised as the method raises it;
-- anything else (nothing decided) handed to the method.
local function failure(status, level, method, ...)
    if status ~= api.closed then
        local code = ffi_string(api.status_name(status))
        if code == "E_SHARED_LOCK" then
            return nil, ffi_string(api.strerror(status)), code
        elseif code == "E_HEADER_NAME" or code == "E_HEADER_VALUE" then
            error(ffi_string(api.strerror(status)), (level or 1) + 1)
        end
    end
    return handover(level, method, ...)
end

-- Whether the fast path takes these arguments (the method checks the rest).
local function plain(cost, now, name)
    return type(cost) == "number" and (now == nil or type(now) == "number")
        and (name == nil or type(name) == "string")
end

local _M = {}

-- every: false for the fields of a refusal only (an admission returns its
-- decision alone; a name is then checked only by the refusal it would
-- format, which spent nothing); otherwise every decision's, as the methods.
-- The methods, where the fast path hands over, give the fields of every
-- decision.
function _M.keyed(keyed, key, cost, now, name, legacy, every, level)
    if getmetatable(keyed) ~= KEYED_MT or type(key) ~= "string" or not plain(cost, now, name) then
        return handover(level, keyed.check_headers, keyed, key, cost, now, name, legacy)
    end
    local status = check_headers(keyed, key, #key, cost, now ~= nil, now or 0, name,
                                 name and #name or 0, not not legacy, every ~= false, decision,
                                 fields)
    if status ~= 0 then
        return failure(status, level, keyed.check_headers, keyed, key, cost, now, name,
                       legacy)
    end
    return answer()
end

function _M.limiter(lim, cost, now, name, legacy, every, level)
    if getmetatable(lim) ~= LIMITER_MT or not plain(cost, now, name) then
        return handover(level, lim.check_headers, lim, cost, now, name, legacy)
    end
    local status = check_headers(lim, nil, 0, cost, now ~= nil, now or 0, name,
                                 name and #name or 0, not not legacy, every ~= false, decision,
                                 fields)
    if status ~= 0 then
        return failure(status, level, lim.check_headers, lim, cost, now, name, legacy)
    end
    return answer()
end

function _M.keyed_check(keyed, key, cost, now, level)
    if getmetatable(keyed) ~= KEYED_MT or type(key) ~= "string" or not plain(cost, now) then
        return handover(level, keyed.check, keyed, key, cost, now)
    end
    local status = check(keyed, key, #key, cost, now ~= nil, now or 0, decision)
    if status ~= 0 then
        return failure(status, level, keyed.check, keyed, key, cost, now)
    end
    return decided()
end

function _M.limiter_check(lim, cost, now, level)
    if getmetatable(lim) ~= LIMITER_MT or not plain(cost, now) then
        return handover(level, lim.check, lim, cost, now)
    end
    local status = check(lim, nil, 0, cost, now ~= nil, now or 0, decision)
    if status ~= 0 then
        return failure(status, level, lim.check, lim, cost, now)
    end
    return decided()
end

-- The key of an address as 4 or 16 bytes (anything else: "unknown"); the
-- prefixes nil (the defaults) or numbers the core takes. Anything else goes
-- to cellrate.binary_address_key, which raises the core's words.
function _M.address_key(bytes, ipv4_prefix, ipv6_prefix, level)
    if type(bytes) == "string" and (ipv4_prefix == nil or type(ipv4_prefix) == "number")
        and (ipv6_prefix == nil or type(ipv6_prefix) == "number") then
        local len = address_key(bytes, #bytes, ipv4_prefix ~= nil, ipv4_prefix or 0,
                                ipv6_prefix ~= nil, ipv6_prefix or 0, key_buffer)
        if len ~= 0 then
            return ffi_string(key_buffer, len)
        end
    end
    return handover(level, cellrate.binary_address_key, bytes, ipv4_prefix, ipv6_prefix)
end

return _M
