-- Lua-level scenarios of `make bench`, for Lua 5.4 and LuaJIT alike:
-- cellrate's lim:allow() (also with clock = "monotonic") and keyed:allow(key)
-- (100k keys) against a trivial C function, the same plus the clock read
-- cellrate makes (its floor), and a plain-Lua GCRA.
--
--   LUA_CPATH="<dir of cellrate.so>/?.so;<dir of the baseline module>/?.so" \
--     lua5.4 bench.lua [reps] [label]
--
-- The scenarios run round-robin (one run of each per round, one untimed
-- warm-up round first) and each reports the median of `reps` runs, as one
-- JSON object per line on stdout.

local cellrate = require "cellrate"
local baseline = require "cellrate_bench_baseline"
local gcra = dofile((arg[0]:match("^(.*)/") or ".") .. "/plain_gcra.lua")

local reps = tonumber(arg[1]) or 5
local label = arg[2] or (jit and "luajit" or "lua5.4")
local clock_ns = baseline.clock_ns
local noop = baseline.noop

local KEYS = 100000
local DRAWS = 1000000
-- Allow path of one key: 1e8 per second with a burst of 1e9, so no call of a
-- run can be turned away. Keyed: one per hour with a burst of 1e6, so every
-- call is admitted and every key stays tracked.
local ALLOW_RATE, ALLOW_BURST = 1e8, 1000000000
local KEYED_BURST = 1000000
local SINGLE_OPS = 2000000

-- splitmix64 would need 64-bit integers that LuaJIT lacks; a 31-bit LCG
-- (Park-Miller) in doubles is exact on both and is all a draw order needs.
local function draws(keys, count, seed)
  local state, out = seed, {}
  for i = 1, count do
    state = (state * 48271) % 2147483647
    out[i] = keys[state % #keys + 1]
  end
  return out
end

local keys = {}
for i = 0, KEYS - 1 do keys[i + 1] = "user:" .. i end
local picks = draws(keys, DRAWS, 42)

-- Loops, one per call shape, so that no wrapper call is timed.
local loops = {}
function loops.empty(_, n) for _ = 1, n do end end
function loops.call(f, n) for _ = 1, n do f() end end
function loops.method_allow(obj, n) for _ = 1, n do obj:allow() end end
function loops.method_clock(obj, n) for _ = 1, n do obj:fast_clock_ns() end end
function loops.method_allow_key(obj, n)
  local p = picks
  for i = 1, n do obj:allow(p[i]) end
end

local lim = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST })
local lim_ordered = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST, clock = "monotonic" })
local keyed = cellrate.keyed(1, { period = 3600, burst = KEYED_BURST, capacity = KEYS })
local plain = gcra.limiter(ALLOW_RATE, 1, ALLOW_BURST, clock_ns)
local plain_keyed = gcra.keyed(1, 3600, KEYED_BURST, clock_ns)
for _, k in ipairs(keys) do
  keyed:allow(k)
  plain_keyed:allow(k)
end

local function every_call_admitted(obj, keyed_calls)
  for i = 1, 200 do
    local ok = keyed_calls and obj:allow(picks[i]) or (not keyed_calls and obj:allow())
    if not ok then return false end
  end
  return true
end

local prefix = "lua." .. label .. "."
local scenarios = {
  { id = "floor.empty_loop", loop = loops.empty, target = nil, ops = SINGLE_OPS },
  { id = "floor.c_noop", loop = loops.call, target = noop, ops = SINGLE_OPS },
  { id = "floor.c_clock", loop = loops.call, target = clock_ns, ops = SINGLE_OPS },
  { id = "floor.c_fast_clock", loop = loops.call, target = baseline.fast_clock_ns,
    ops = SINGLE_OPS },
  { id = "floor.c_monotonic_clock", loop = loops.call, target = baseline.monotonic_clock_ns,
    ops = SINGLE_OPS },
  { id = "floor.c_method_fast_clock", loop = loops.method_clock, target = baseline.object(),
    ops = SINGLE_OPS },
  { id = "cellrate.limiter.allow", loop = loops.method_allow, target = lim, ops = SINGLE_OPS,
    expect = "allow", verify = function() return every_call_admitted(lim, false) end },
  { id = "cellrate.limiter.allow_monotonic_clock", loop = loops.method_allow, target = lim_ordered,
    ops = SINGLE_OPS, expect = "allow",
    verify = function() return every_call_admitted(lim_ordered, false) end },
  { id = "cellrate.keyed.allow", loop = loops.method_allow_key, target = keyed, ops = DRAWS,
    expect = "allow", verify = function() return every_call_admitted(keyed, true) end },
  { id = "plain_gcra.limiter.allow", loop = loops.method_allow, target = plain, ops = SINGLE_OPS,
    expect = "allow", verify = function() return every_call_admitted(plain, false) end },
  { id = "plain_gcra.keyed.allow", loop = loops.method_allow_key, target = plain_keyed, ops = DRAWS,
    expect = "allow", verify = function() return every_call_admitted(plain_keyed, true) end },
}

-- The catalogue's allow paths (each admits every call: windows of 10^7 s with
-- rates under their ceilings), and check_all of 2 and 3 limits against as
-- many separate check() calls.
local catalogue = {
  gcra = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST, algorithm = "gcra" }),
  token_bucket = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST, algorithm = "token_bucket" }),
  fixed_window = cellrate.limiter(1e15, { period = 1e7, algorithm = "fixed_window" }),
  sliding_window = cellrate.limiter(9e7, { period = 1e7, algorithm = "sliding_window" }),
}
for _, name in ipairs({ "gcra", "token_bucket", "fixed_window", "sliding_window" }) do
  local target = catalogue[name]
  scenarios[#scenarios + 1] = { id = "catalogue." .. name .. ".allow", loop = loops.method_allow,
    target = target, ops = SINGLE_OPS, expect = "allow",
    verify = function() return every_call_admitted(target, false) end }
end
local check_all = cellrate.check_all
for _, count in ipairs({ 2, 3 }) do
  local items, separate = {}, {}
  for i = 1, count do
    items[i] = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST })
    separate[i] = cellrate.limiter(ALLOW_RATE, { burst = ALLOW_BURST })
  end
  local function one_call() return (check_all(items)) end
  local function separate_calls()
    local all = true
    for i = 1, count do all = separate[i]:check() and all end
    return all
  end
  scenarios[#scenarios + 1] = { id = "check_all." .. count, loop = loops.call, target = one_call,
    ops = SINGLE_OPS, expect = "allow" }
  scenarios[#scenarios + 1] = { id = "separate." .. count, loop = loops.call,
    target = separate_calls, ops = SINGLE_OPS, expect = "allow" }
end

for _, s in ipairs(scenarios) do
  s.runs, s.met = {}, true
  if s.verify and not s.verify() then s.met = false end
end
for rep = 0, reps do
  for _, s in ipairs(scenarios) do
    local start = clock_ns()
    s.loop(s.target, s.ops)
    local ns = (clock_ns() - start) / s.ops
    if rep > 0 then s.runs[#s.runs + 1] = ns end
  end
end

local function median(values)
  local sorted = {}
  for i, v in ipairs(values) do sorted[i] = v end
  table.sort(sorted)
  local n = #sorted
  if n % 2 == 1 then return sorted[(n + 1) / 2] end
  return (sorted[n / 2] + sorted[n / 2 + 1]) / 2
end

local version = jit and jit.version or _VERSION
for _, s in ipairs(scenarios) do
  if s.verify and not s.verify() then s.met = false end
  local runs = {}
  for i, v in ipairs(s.runs) do runs[i] = string.format("%.3f", v) end
  io.write(string.format(
    '{"id": "%s%s", "lang": "lua", "group": "lua.%s", "lua_version": "%s", "ns_per_op": %.3f, ' ..
    '"threads": 1, "ops_per_run": %d, "runs_ns_per_op": [%s], "expect": "%s", "expect_met": %s}\n',
    prefix, s.id, label, version, median(s.runs), s.ops, table.concat(runs, ", "),
    s.expect or "", tostring(s.met)))
end
