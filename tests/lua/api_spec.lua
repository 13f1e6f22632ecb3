-- The Lua face (docs/design.md §6) against the semantics of docs/design.md §1.
--
-- Every `now` is explicit. Expectations are worked out by hand from the
-- formulas of docs/design.md §1 (T = period / rate, tau = T * burst), in the comments
-- next to them. Times come back as float seconds that are exact to the ns, so
-- they are compared to within 1 ns.
local cellrate = require "cellrate"

local NS = 1e-9
local HAS_CLOSE = _VERSION >= "Lua 5.4"

local function near(expected, actual, what)
   assert.is_number(actual, what)
   assert.is_true(math.abs(expected - actual) <= NS,
      ("%s: expected %.10f, got %.10f"):format(what or "time", expected, actual))
end

-- Asserts one decision: allowed, remaining, retry_after, reset_after.
local function decision(expected, ...)
   assert.equal(4, select("#", ...), "check/peek return four values")
   local allowed, remaining, retry_after, reset_after = ...
   assert.equal(expected[1], allowed, "allowed")
   assert.equal(expected[2], remaining, "remaining")
   if expected[3] == math.huge then
      assert.equal(math.huge, retry_after, "retry_after")
   else
      near(expected[3], retry_after, "retry_after")
   end
   near(expected[4], reset_after, "reset_after")
end

describe("module", function()
   it("has a version string", function()
      assert.is_string(cellrate._VERSION)
      assert.is_truthy(cellrate._VERSION:match("^%d+%.%d+%.%d+$"))
   end)

   it("names its metatables cellrate.Limiter and cellrate.KeyedLimiter", function()
      local registry = debug.getregistry()
      assert.equal(registry["cellrate.Limiter"], getmetatable(cellrate.limiter(1)))
      assert.equal(registry["cellrate.KeyedLimiter"],
         getmetatable(cellrate.keyed(1, { capacity = 8 })))
      assert.are_not.equal(registry["cellrate.Limiter"], registry["cellrate.KeyedLimiter"])
   end)
end)

describe("reference scenarios", function()
   it("rate 10/s, burst 1: t = 0, 0.1, 0.2, 0.25, 0.3", function()
      -- T = 0.1 s, tau = 0.1 s.
      local lim = cellrate.limiter(10, { burst = 1 })
      decision({ true, 0, 0, 0.1 }, lim:check(1, 0))     -- TAT 0.1
      decision({ true, 0, 0, 0.1 }, lim:check(1, 0.1))   -- TAT 0.2
      decision({ true, 0, 0, 0.1 }, lim:check(1, 0.2))   -- TAT 0.3
      -- tat 0.3, new 0.4, allowed from 0.3: retry 0.05, reset 0.3 - 0.25
      decision({ false, 0, 0.05, 0.05 }, lim:check(1, 0.25))
      decision({ true, 0, 0, 0.1 }, lim:check(1, 0.3))   -- TAT 0.4
   end)

   it("rate 10/s, burst 6: 7 at t = 0, one at t = 0.1", function()
      -- T = 0.1 s, tau = 0.6 s. The i-th admission sets TAT = 0.1 i and
      -- leaves floor((0 + 0.6 - 0.1 i) / 0.1) = 6 - i.
      local lim = cellrate.limiter(10, { burst = 6 })
      for i = 1, 6 do
         decision({ true, 6 - i, 0, 0.1 * i }, lim:check(1, 0))
      end
      -- 7th: new TAT 0.7, admitted from 0.7 - 0.6 = 0.1
      decision({ false, 0, 0.1, 0.6 }, lim:check(1, 0))
      -- at 0.1: new TAT 0.7, reset_after 0.7 - 0.1
      decision({ true, 0, 0, 0.6 }, lim:check(1, 0.1))
      -- TAT is 0.7: a probe at 0.1 sees reset_after 0.6 still
      decision({ true, 0, 0, 0.6 }, lim:peek(0, 0.1))
   end)

   it("rate 10/s, burst 6: 6 at t = 0, then 6 at t = 1.0", function()
      local lim = cellrate.limiter(10, { burst = 6 })
      for _ = 1, 6 do
         assert.is_true(lim:allow(1, 0))
      end
      -- TAT 0.6 < 1.0: the key is idle again, tat = 1.0
      for i = 1, 6 do
         decision({ true, 6 - i, 0, 0.1 * i }, lim:check(1, 1.0))
      end
      -- TAT 1.6: reset_after 0.6 from 1.0; a 13th waits 0.1
      decision({ false, 0, 0.1, 0.6 }, lim:check(1, 1.0))
   end)

   it("rate 300/min, burst 60: a drained key admits one every 200 ms", function()
      -- T = 60 / 300 = 0.2 s, tau = 12 s.
      local lim = cellrate.limiter(300, { period = 60, burst = 60 })
      for i = 1, 60 do
         decision({ true, 60 - i, 0, 0.2 * i }, lim:check(1, 0))
      end
      decision({ false, 0, 0.2, 12 }, lim:check(1, 0))
      -- At t = 0.2 k: TAT 12 + 0.2 (k - 1) -> one admitted, the next waits 0.2.
      for k = 1, 10 do
         local t = 0.2 * k
         decision({ true, 0, 0, 12 }, lim:check(1, t))
         decision({ false, 0, 0.2, 12 }, lim:check(1, t))
      end
      -- Between two slots nothing is admitted: at 2.1 (TAT 14) the next slot is 2.2.
      decision({ false, 0, 0.1, 11.9 }, lim:check(1, 2.1))
   end)

   it("rate 300/min, burst 60: about 360 in the first minute", function()
      -- A client retrying every 50 ms over [0, 60] s: at most
      -- burst + floor(d / T) = 60 + 60 / 0.2 = 360, and exactly that, since
      -- every multiple of 0.2 s is a retry time.
      local lim = cellrate.limiter("300/minute", { burst = 60 })
      local admitted, before_60 = 0, 0
      for step = 0, 1200 do
         local t = step * 0.05
         while lim:allow(1, t) do
            admitted = admitted + 1
            if step < 1200 then
               before_60 = before_60 + 1
            end
         end
      end
      assert.equal(360, admitted)
      assert.equal(359, before_60)
   end)

   it("rate 300/min, burst 60: one request leaves 59", function()
      local allowed, remaining = cellrate.limiter(300, { period = 60, burst = 60 }):check(1, 0)
      assert.is_true(allowed)
      assert.equal(59, remaining)
   end)

   it("rate 300/min, burst 300: one request leaves 299", function()
      local allowed, remaining = cellrate.limiter(300, { period = 60, burst = 300 }):check(1, 0)
      assert.is_true(allowed)
      assert.equal(299, remaining)
      -- burst defaults to max(1, ceil(rate)) = 300
      allowed, remaining = cellrate.limiter("300/minute"):check(1, 0)
      assert.is_true(allowed)
      assert.equal(299, remaining)
   end)
end)

describe("cellrate.limiter", function()
   it("admits cost 0 always and commits nothing (a probe)", function()
      -- T = 0.1 s, tau = 0.2 s
      local lim = cellrate.limiter(10, { burst = 2 })
      decision({ true, 2, 0, 0 }, lim:check(0, 0))
      assert.is_true(lim:allow(2, 0)) -- drained, TAT 0.2
      decision({ true, 0, 0, 0.2 }, lim:check(0, 0))
      decision({ true, 0, 0, 0.2 }, lim:check(0, 0))
      assert.is_false(lim:allow(1, 0))
      -- still TAT 0.2: at 0.1 one unit fits (new TAT 0.3, allowed from 0.1)
      decision({ true, 0, 0, 0.2 }, lim:check(1, 0.1))
   end)

   it("never admits a cost above burst, and changes nothing", function()
      -- burst 6: cost 7 needs 0.7 s > tau = 0.6 s
      local lim = cellrate.limiter(10, { burst = 6 })
      decision({ false, 6, math.huge, 0 }, lim:check(7, 0))
      decision({ false, 6, math.huge, 0 }, lim:peek(7, 0))
      assert.is_false(lim:allow(7, 0))
      -- saturated costs are answers too, not errors
      decision({ false, 6, math.huge, 0 }, lim:check(2 ^ 62, 0))
      decision({ false, 6, math.huge, 0 }, lim:check(2 ^ 63, 0))
      decision({ false, 6, math.huge, 0 }, lim:check(math.huge, 0))
      decision({ false, 6, math.huge, 0 }, lim:check(1e300, 0))
      if math.maxinteger then
         decision({ false, 6, math.huge, 0 }, lim:check(math.maxinteger, 0))
      end
      -- the whole burst is still there
      decision({ true, 0, 0, 0.6 }, lim:check(6, 0))
   end)

   it("peek gives the answer of check and commits nothing", function()
      -- T = 0.1 s, tau = 0.3 s
      local lim = cellrate.limiter(10, { burst = 3 })
      for _ = 1, 5 do
         decision({ true, 2, 0, 0.1 }, lim:peek(1, 0))
      end
      decision({ true, 2, 0, 0.1 }, lim:check(1, 0)) -- TAT 0.1
      -- cost 3: new TAT 0.4, admitted from 0.1
      decision({ false, 2, 0.1, 0.1 }, lim:peek(3, 0))
      decision({ true, 0, 0, 0.3 }, lim:peek(2, 0))
      decision({ true, 0, 0, 0.3 }, lim:check(2, 0)) -- TAT 0.3
      decision({ false, 0, 0.1, 0.3 }, lim:peek(1, 0))
   end)

   it("allow returns one boolean", function()
      local lim = cellrate.limiter(1, { burst = 1 })
      assert.equal(1, select("#", lim:allow(1, 0)))
      assert.is_false(lim:allow(1, 0))
   end)

   it("takes cost nil as 1 and now nil as the clock", function()
      local lim = cellrate.limiter(10, { burst = 5 })
      decision({ true, 4, 0, 0.1 }, lim:check(nil, 0))
      decision({ true, 3, 0, 0.2 }, lim:check(nil, 0))
      -- A fresh limiter on the clock: whatever the time, the first unit fits.
      local clocked = cellrate.limiter(10, { burst = 5 })
      local allowed, remaining, retry_after, reset_after = clocked:check()
      assert.is_true(allowed)
      assert.equal(4, remaining)
      assert.equal(0, retry_after)
      near(0.1, reset_after)
      assert.is_true(clocked:allow())
      assert.is_true(clocked:allow(3)) -- 5 of a burst of 5 fit at any time
      assert.is_false(clocked:allow(6)) -- more than a burst never does
   end)

   it("reset brings back the full burst", function()
      local lim = cellrate.limiter(1, { burst = 3 })
      assert.is_true(lim:allow(3, 0))
      assert.is_false(lim:allow(1, 0))
      assert.is_nil(lim:reset())
      decision({ true, 2, 0, 1 }, lim:check(1, 0))
   end)

   it("takes a period and integral floats as burst", function()
      -- 10 per 0.5 s: T = 0.05 s
      local lim = cellrate.limiter(10, { period = 0.5, burst = 3.0 })
      assert.is_true(lim:allow(3, 0))
      decision({ false, 0, 0.05, 0.15 }, lim:check(1, 0))
      assert.equal(3, lim:info().burst)
   end)

   it("takes a fractional rate", function()
      -- 0.5 per second: T = 2 s; burst max(1, ceil(0.5)) = 1
      local lim = cellrate.limiter(0.5)
      decision({ true, 0, 0, 2 }, lim:check(1, 0))
      decision({ false, 0, 2, 2 }, lim:check(1, 0))
      decision({ true, 0, 0, 2 }, lim:check(1, 2))
   end)

   it("describes itself", function()
      assert.equal("cellrate.Limiter(rate=300, period=60, burst=60)",
         tostring(cellrate.limiter("300/minute", { burst = 60 })))
      assert.equal("cellrate.Limiter(rate=0.5, period=1, burst=1)",
         tostring(cellrate.limiter(0.5)))
      assert.equal("cellrate.Limiter(rate=2.5, period=0.25, burst=4)",
         tostring(cellrate.limiter(2.5, { period = 0.25, burst = 4 })))
      local info = cellrate.limiter("300/minute", { burst = 60 }):info()
      assert.same({ rate = 300, period = 60, burst = 60, clock = "fast", algorithm = "gcra",
         emission_ns = 200000000, tolerance_ns = 12000000000, max_debt = 60 }, info)
   end)
end)

describe("rate strings", function()
   local function limit_of(text)
      local info = cellrate.limiter(text):info()
      return info.rate, info.period, info.burst
   end

   it("reads '300/minute'", function()
      assert.same({ 300, 60, 300 }, { limit_of("300/minute") })
      local lim = cellrate.limiter("300/minute")
      assert.is_true(lim:allow(300, 0))
      decision({ false, 0, 0.2, 60 }, lim:check(1, 0)) -- T = 0.2 s
   end)

   it("reads '10/s'", function()
      assert.same({ 10, 1, 10 }, { limit_of("10/s") })
   end)

   it("reads '5 per second'", function()
      assert.same({ 5, 1, 5 }, { limit_of("5 per second") })
      local lim = cellrate.limiter("5 per second", { burst = 1 })
      assert.is_true(lim:allow(1, 0))
      decision({ false, 0, 0.2, 0.2 }, lim:check(1, 0))
   end)

   it("reads '100/5m'", function()
      assert.same({ 100, 300, 100 }, { limit_of("100/5m") })
      -- T = 300 / 100 = 3 s
      local lim = cellrate.limiter("100/5m")
      decision({ true, 0, 0, 300 }, lim:check(100, 0))
      decision({ false, 0, 3, 300 }, lim:check(1, 0))
   end)

   it("works for keyed limiters", function()
      local keyed = cellrate.keyed("2/s", { capacity = 8 })
      assert.same({ rate = 2, period = 1, burst = 2, capacity = 8, evictions = 0, clock = "fast", algorithm = "gcra",
         emission_ns = 500000000, tolerance_ns = 1000000000, max_debt = 2 }, keyed:info())
   end)
end)

describe("cellrate.keyed", function()
   it("keeps keys independent", function()
      -- T = 0.1 s, tau = 0.2 s
      local keyed = cellrate.keyed(10, { burst = 2, capacity = 64 })
      decision({ true, 1, 0, 0.1 }, keyed:check("a", 1, 0))
      decision({ true, 0, 0, 0.2 }, keyed:check("a", 1, 0))
      decision({ false, 0, 0.1, 0.2 }, keyed:check("a", 1, 0))
      decision({ true, 1, 0, 0.1 }, keyed:check("b", 1, 0))
      assert.is_true(keyed:allow("c", 2, 0))
      assert.is_false(keyed:allow("c", 1, 0))
      assert.is_true(keyed:allow("b", 1, 0))
      assert.is_false(keyed:allow("b", 1, 0))
   end)

   it("takes keys as bytes, embedded zeros included", function()
      local keyed = cellrate.keyed(1, { burst = 1, capacity = 16 })
      assert.is_true(keyed:allow("k\0a", 1, 0))
      assert.is_true(keyed:allow("k\0b", 1, 0))
      assert.is_true(keyed:allow("k", 1, 0))
      assert.is_true(keyed:allow("", 1, 0))
      assert.is_false(keyed:allow("k\0a", 1, 0))
      assert.is_false(keyed:allow("", 1, 0))
      assert.equal(4, #keyed)
   end)

   it("counts keys holding a slot with #", function()
      local keyed = cellrate.keyed(10, { burst = 2, capacity = 64 })
      assert.equal(0, #keyed)
      keyed:allow("a", 1, 0)
      keyed:allow("b", 1, 0)
      assert.equal(2, #keyed)
      keyed:allow("a", 1, 0)
      assert.equal(2, #keyed)
      -- peeks, probes and unfittable costs write nothing
      keyed:peek("c", 1, 0)
      keyed:check("d", 0, 0)
      keyed:check("e", 3, 0)
      assert.equal(2, #keyed)
      keyed:reset("a")
      assert.equal(1, #keyed)
      keyed:reset("never seen")
      assert.equal(1, #keyed)
   end)

   it("clear forgets every key, keeping the limit and the counters", function()
      local keyed = cellrate.keyed(10, { burst = 2, capacity = 64 })
      for _, key in ipairs({ "a", "b", "c" }) do
         assert.is_true(keyed:allow(key, 2, 0))
         assert.is_false(keyed:allow(key, 1, 0))
      end
      assert.equal(3, #keyed)
      keyed:clear()
      assert.equal(0, #keyed)
      for _, key in ipairs({ "a", "b", "c" }) do assert.is_true(keyed:allow(key, 2, 0)) end
      assert.equal(2, keyed:info().burst)
      assert.equal(6, keyed:stats().admitted)
   end)

   it("reset forgets one key", function()
      local keyed = cellrate.keyed(10, { burst = 2, capacity = 64 })
      assert.is_true(keyed:allow("a", 2, 0))
      assert.is_true(keyed:allow("b", 2, 0))
      assert.is_nil(keyed:reset("a"))
      decision({ true, 1, 0, 0.1 }, keyed:check("a", 1, 0))
      decision({ false, 0, 0.1, 0.2 }, keyed:check("b", 1, 0))
   end)

   it("peeks without committing, probes with cost 0, refuses unfittable costs", function()
      local keyed = cellrate.keyed(10, { burst = 3, capacity = 64 })
      decision({ true, 2, 0, 0.1 }, keyed:peek("a", 1, 0))
      decision({ true, 2, 0, 0.1 }, keyed:peek("a", 1, 0))
      decision({ true, 3, 0, 0 }, keyed:check("a", 0, 0))
      decision({ false, 3, math.huge, 0 }, keyed:check("a", 4, 0))
      decision({ true, 0, 0, 0.3 }, keyed:check("a", 3, 0))
      decision({ true, 0, 0, 0.3 }, keyed:check("a", 0, 0))
   end)

   it("takes cost nil as 1 and now nil as the clock", function()
      local keyed = cellrate.keyed(10, { burst = 5, capacity = 8 })
      decision({ true, 4, 0, 0.1 }, keyed:check("a", nil, 0))
      local allowed, remaining = keyed:check("b")
      assert.is_true(allowed)
      assert.equal(4, remaining)
      assert.equal(1, select("#", keyed:allow("c")))
   end)

   it("describes itself", function()
      local keyed = cellrate.keyed(10, { burst = 6, capacity = 100 })
      assert.equal("cellrate.KeyedLimiter(rate=10, period=1, burst=6, capacity=100)",
         tostring(keyed))
      assert.same({ rate = 10, period = 1, burst = 6, capacity = 100, evictions = 0, clock = "fast", algorithm = "gcra",
         emission_ns = 100000000, tolerance_ns = 600000000, max_debt = 6 }, keyed:info())
      assert.equal(100000, cellrate.keyed(1):info().capacity)
   end)
end)

describe("lifetime", function()
   local function closed_error(fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("is closed", 1, true), tostring(err))
   end

   it("close() frees a limiter; further calls raise; closing again is safe", function()
      local lim = cellrate.limiter(10)
      assert.is_nil(lim:close())
      lim:close()
      assert.equal("cellrate.Limiter(closed)", tostring(lim))
      closed_error(lim.allow, lim, 1, 0)
      closed_error(lim.check, lim)
      closed_error(lim.peek, lim, 1, 0)
      closed_error(lim.reset, lim)
      closed_error(lim.info, lim)
   end)

   it("close() frees a keyed limiter; further calls raise; closing again is safe", function()
      local keyed = cellrate.keyed(10, { capacity = 8 })
      keyed:allow("a", 1, 0)
      keyed:close()
      keyed:close()
      assert.equal("cellrate.KeyedLimiter(closed)", tostring(keyed))
      closed_error(keyed.allow, keyed, "a", 1, 0)
      closed_error(keyed.check, keyed, "a")
      closed_error(keyed.peek, keyed, "a", 1, 0)
      closed_error(keyed.reset, keyed, "a")
      closed_error(keyed.info, keyed)
      closed_error(function() return #keyed end)
   end)

   it("__gc is safe twice and after close", function()
      local lim = cellrate.limiter(10)
      local gc = getmetatable(lim).__gc
      gc(lim)
      gc(lim)
      closed_error(lim.allow, lim, 1, 0)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      keyed:close()
      getmetatable(keyed).__gc(keyed)
      closed_error(keyed.allow, keyed, "a")
   end)

   it("is collected by the garbage collector", function()
      local weak = setmetatable({}, { __mode = "v" })
      weak[1] = cellrate.limiter(10)
      weak[2] = cellrate.keyed(10, { capacity = 1024 })
      collectgarbage("collect")
      collectgarbage("collect")
      assert.is_nil(weak[1])
      assert.is_nil(weak[2])
   end)

   local close_it = HAS_CLOSE and it or pending
   close_it("closes a <close> variable at the end of its scope (Lua 5.4)", function()
      local chunk = assert(load([[
         local cellrate, seen = ...
         do
            local lim <close> = cellrate.limiter(10)
            local keyed <close> = cellrate.keyed(10, { capacity = 8 })
            seen.lim, seen.keyed = lim, keyed
            assert(lim:allow(1, 0) and keyed:allow("a", 1, 0))
         end
         local ok = pcall(function()
            local lim <close> = cellrate.limiter(10)
            seen.on_error = lim
            error("boom")
         end)
         assert(not ok)
      ]]))
      local seen = {}
      chunk(cellrate, seen)
      assert.equal("cellrate.Limiter(closed)", tostring(seen.lim))
      assert.equal("cellrate.KeyedLimiter(closed)", tostring(seen.keyed))
      assert.equal("cellrate.Limiter(closed)", tostring(seen.on_error))
      closed_error(seen.lim.allow, seen.lim)
      -- collecting a closed object afterwards is safe
      seen = nil
      collectgarbage("collect")
   end)
end)

describe("clock option", function()
   it("reads the fast clock when asked, and decides on it as on the other", function()
      for _, make in ipairs({
         function(opts) return cellrate.limiter(10, opts), function(o, ...) return o:check(...) end end,
         function(opts) return cellrate.keyed(10, opts), function(o, ...) return o:check("k", ...) end end,
      }) do
         local default = make({ burst = 5 })
         assert.are.equal("fast", default:info().clock)
         local ordered = make({ burst = 5, clock = "monotonic" })
         assert.are.equal("monotonic", ordered:info().clock)
         assert.is_truthy(tostring(ordered):find("clock='monotonic'", 1, true))
         assert.is_falsy(tostring(default):find("clock", 1, true))
         local lim, check = make({ burst = 5, clock = "fast" })
         assert.are.equal("fast", lim:info().clock)
         local admitted = 0
         for _ = 1, 20 do
            if check(lim) then admitted = admitted + 1 end
         end
         -- One unit per 100 ms: a busy machine cannot pause long enough to
         -- refill more than a unit or two between these calls.
         assert.is_true(admitted >= 5 and admitted <= 7, tostring(admitted))
         local allowed, _, retry_after = check(lim)
         assert.is_false(allowed)
         assert.is_true(retry_after > 0 and retry_after <= 0.1)
      end
   end)

   it("refuses other clocks", function()
      for _, bad in ipairs({ "tsc", "", 1, true }) do
         local ok, err = pcall(cellrate.limiter, 1, { clock = bad })
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find("^clock must be"), tostring(err))
      end
   end)
end)

describe("cellrate.limit_spec", function()
   it("is the core's validated limit, with no store", function()
      local limit = cellrate.limit_spec("300/minute", { burst = 60 })
      assert.equal(300, limit.rate)
      assert.equal(60, limit.period)
      assert.equal(60, limit.burst)
      assert.equal("gcra", limit.algorithm)
      assert.equal(12, limit.window) -- burst * T = 60 * 0.2 s
      assert.equal(200000000, limit.emission_ns)
      assert.equal(12000000000, limit.tolerance_ns)
      assert.is_nil(limit.capacity)
      assert.equal("cellrate.Limit(rate=300, period=60, burst=60)", tostring(limit))
      local window = cellrate.limit_spec(10, { period = 8, algorithm = "fixed_window" })
      assert.equal(10, window.burst)
      assert.equal(8, window.window)
      assert.equal("cellrate.Limit(rate=10, period=8, algorithm='fixed_window')", tostring(window))
   end)

   it("is equal to a limit of the same parameters", function()
      local limit = cellrate.limit_spec(10, { burst = 6 })
      assert.is_true(limit == cellrate.limit_spec("10/s", { burst = 6 }))
      assert.is_false(limit == cellrate.limit_spec(10, { burst = 7 }))
      assert.is_false(limit == cellrate.limit_spec(10, { burst = 6, algorithm = "token_bucket" }))
      assert.is_false(limit == cellrate.limit_spec(20, { period = 2, burst = 6 }))
   end)

   it("describes a limit as the limiter of the same arguments does", function()
      for _, case in ipairs({
         { "300/minute", { burst = 60 } }, { 0.5 }, { 2.5, { period = 0.25, burst = 4 } },
         { "10/8s", { algorithm = "sliding_window" } }, { 1e-3, { algorithm = "token_bucket" } },
      }) do
         local want = tostring(cellrate.limiter(case[1], case[2])):gsub("^cellrate%.Limiter%(",
            "cellrate.Limit(")
         assert.equal(want, tostring(cellrate.limit_spec(case[1], case[2])))
      end
   end)

   it("refuses what a limiter refuses, in the same words", function()
      for _, case in ipairs({
         { 0 }, { "10/month" }, { true }, { 10, { period = 0 } }, { 10, { burst = 0 } },
         { 10, { burst = 1.5 } }, { 10, { algorithm = "leaky" } }, { 10, { algorithm = 3 } },
         { 0.5, { algorithm = "sliding_window" } }, { 10, { capacity = 5 } },
         { 10, { shared = "/dev/shm/x" } }, { 10, { clock = "fast" } }, { 10, 5 },
      }) do
         local ok, err = pcall(cellrate.limit_spec, case[1], case[2])
         assert.is_false(ok)
         if not (type(case[2]) == "table" and (case[2].capacity or case[2].shared or case[2].clock)) then
            local limiter_ok, limiter_err = pcall(cellrate.limiter, case[1], case[2])
            assert.is_false(limiter_ok)
            -- the same text after the caller's position
            if type(case[2]) == "number" then
               assert.truthy(err:find("opts must be a table with the fields period, burst, algorithm",
                  1, true), err)
            else
               assert.equal(limiter_err:gsub("^[^\n]-:%d+: ", ""), (err:gsub("^[^\n]-:%d+: ", "")))
            end
         else
            assert.truthy(err:find("unknown option", 1, true), err)
         end
      end
   end)
end)

describe("cellrate.check_policy_name", function()
   it("takes a name the header formatter takes, and raises otherwise", function()
      assert.equal(0, select("#", cellrate.check_policy_name("api")))
      cellrate.check_policy_name(("x"):rep(64))
      local lim = cellrate.limiter(1)
      for _, bad in ipairs({ "", ("x"):rep(65), "tab\there", "caf\195\169", 42, false }) do
         local ok, err = pcall(cellrate.check_policy_name, bad)
         assert.is_false(ok)
         local text = err:gsub("^[^\n]-:%d+: ", "")
         assert.equal(1, text:find("name must be 1 to 64 printable ASCII characters", 1, true), err)
         local format_ok, format_err = pcall(cellrate.header_fields, lim, true, 0, 0, 0, bad)
         assert.is_false(format_ok)
         assert.equal(text, (format_err:gsub("^[^\n]-:%d+: ", "")))
      end
      -- nil is the core's default, as the formatter takes it
      assert.equal(0, select("#", cellrate.check_policy_name(nil)))
      assert.equal(0, select("#", cellrate.check_policy_name()))
   end)
end)

describe("live change", function()
   it("carries the units used (docs/design.md §4)", function()
      local lim = cellrate.limiter(10, { burst = 10 })
      for _ = 1, 6 do assert.is_true(lim:allow(1, 5.0)) end
      lim:reconfigure(100, { burst = 20 }, 5.0)
      local allowed, remaining = lim:peek(0, 5.0)
      assert.is_true(allowed)
      assert.are.equal(14, remaining)

      lim = cellrate.limiter(100, { burst = 100 })
      assert.is_true(lim:allow(80, 5.0))
      lim:reconfigure("10/s", { burst = 10 }, 5.0)
      local _, _, retry_after = lim:check(1, 5.0)
      assert.is_true(math.abs(retry_after - 7.1) < 1e-9)
      assert.is_true(lim:allow(1, 12.1))
   end)

   it("carries each key of a keyed table on its next touch", function()
      local keyed = cellrate.keyed(10, { burst = 10, capacity = 100 })
      for _ = 1, 6 do assert.is_true(keyed:allow("busy", 1, 5.0)) end
      keyed:reconfigure(100, { burst = 20 }, 5.0)
      local _, remaining = keyed:peek("busy", 0, 5.0)
      assert.are.equal(14, remaining)
      _, remaining = keyed:peek("never-seen", 0, 5.0)
      assert.are.equal(20, remaining)
   end)

   it("refuses another algorithm and a bad limit, changing nothing", function()
      local lim = cellrate.limiter(10, { burst = 5 })
      assert.is_true(lim:allow(2, 1.0))
      assert.has_error(function() lim:reconfigure(10, { algorithm = "fixed_window" }, 1.0) end,
         "algorithm: a live change keeps the limit's algorithm; make a new limiter for another one")
      assert.has_error(function() lim:reconfigure(10, { burst = 0 }, 1.0) end)
      local _, remaining = lim:peek(0, 1.0)
      assert.are.equal(3, remaining)
   end)
end)
