-- Bad arguments: every parameter raises an error whose message is the
-- caller's position (when the caller is Lua code) and the core's text for it,
-- which starts with the parameter's name; nothing crashes.
local cellrate = require "cellrate"
local raises = dofile("tests/lua/support.lua")(assert).raises

local NAN = 0 / 0
local HUGE = math.huge
local a_table, a_function = {}, print

local function show(value)
   if type(value) == "string" then
      return ("%q"):format(value)
   end
   return tostring(value)
end

local function limiter_with(opts)
   return function() return cellrate.limiter(10, opts) end
end

local function keyed_with(opts)
   return function() return cellrate.keyed(10, opts) end
end

describe("rate", function()
   local bad = {
      0, -1, -0.5, NAN, HUGE, -HUGE, 1e300, a_table, true, false, a_function,
      "abc", "", "   ", "10", "/s", "10/",
      "10/s/2", "10 / parsec", "ten/second", "-5/s", "0/s",
   }
   for _, rate in ipairs(bad) do
      it("refuses " .. show(rate), function()
         raises("rate", cellrate.limiter, rate)
         raises("rate", cellrate.keyed, rate, { capacity = 8 })
      end)
   end

   it("refuses a missing rate", function()
      raises("rate", cellrate.limiter)
      raises("rate", cellrate.limiter, nil, { burst = 1 })
      raises("rate", cellrate.keyed)
   end)

   it("gives the core's words", function()
      assert.equal("rate must be a number > 0 or a rate string such as '10/second'",
         raises("rate", cellrate.limiter, true))
      -- a month or a year is a calendar quota's period (docs/design.md §19)
      for _, rate in ipairs({ "10/month", "10/months", "5/year", "1/y" }) do
         assert.is_truthy(raises("algorithm", cellrate.limiter, rate):find("months and years", 1,
            true))
         raises("algorithm", cellrate.keyed, rate, { capacity = 8 })
      end
      assert.is_truthy(raises("rate", cellrate.limiter, "abc"):find("cannot parse", 1, true))
      assert.is_truthy(raises("rate", cellrate.limiter, 1e300):find("too high", 1, true))
      assert.is_truthy(raises("rate", cellrate.limiter, 1e-300):find("too low", 1, true))
   end)
end)

describe("period", function()
   local bad = { 0, -1, -0.0, NAN, HUGE, -HUGE, a_table, true, a_function, "1", "1s", "" }
   for _, period in ipairs(bad) do
      it("refuses " .. show(period), function()
         raises("period", limiter_with({ period = period }))
         raises("period", keyed_with({ period = period, capacity = 8 }))
      end)
   end

   it("refuses a period whose interval cannot be held (names the rate it divides)", function()
      -- 1e300 s / 10: beyond 2^63 ns; 1e-300 s / 10: below 1 ns
      raises("rate is too low", limiter_with({ period = 1e300 }))
      raises("rate is too high", limiter_with({ period = 1e-300 }))
   end)

   it("refuses a period given with a rate string", function()
      local err = raises("period", cellrate.limiter, "10/s", { period = 1 })
      assert.is_truthy(err:find("rate string", 1, true))
      raises("period", cellrate.keyed, "10/s", { period = 60, capacity = 8 })
   end)
end)

describe("burst", function()
   local bad = {
      0, -1, NAN, HUGE, -HUGE, 1e300, -1e300, 2.5, -2.5, 0.5, 1 + 2 ^ -40,
      "x", "6", a_table, true, a_function, 2 ^ 62, 2 ^ 63, -(2 ^ 63),
   }
   if math.maxinteger then
      bad[#bad + 1] = math.maxinteger
      bad[#bad + 1] = math.mininteger
   end
   for _, burst in ipairs(bad) do
      it("refuses " .. show(burst), function()
         raises("burst", limiter_with({ burst = burst }))
         raises("burst", keyed_with({ burst = burst, capacity = 8 }))
      end)
   end

   it("says integer for non-integers, of any type", function()
      local message = "burst must be an integer >= 1"
      assert.equal(message, raises("burst", limiter_with({ burst = 2.5 })))
      assert.equal(message, raises("burst", limiter_with({ burst = "x" })))
      assert.equal(message, raises("burst", limiter_with({ burst = NAN })))
      assert.equal(message, raises("burst", limiter_with({ burst = 0 })))
      -- an infinity is no whole number (as Python's float('inf')); a finite
      -- integral one past int64 saturates, and is too large
      assert.equal(message, raises("burst", limiter_with({ burst = HUGE })))
      assert.is_truthy(raises("burst", limiter_with({ burst = 1e300 })):find("too large", 1, true))
   end)
end)

describe("capacity", function()
   local bad = {
      0, -1, NAN, HUGE, -HUGE, 1e300, -1e300, 2.5, 0.5, 2 ^ 32 + 1, 2 ^ 63,
      "x", "100", a_table, true, a_function,
   }
   for _, capacity in ipairs(bad) do
      it("refuses " .. show(capacity), function()
         raises("capacity", keyed_with({ capacity = capacity }))
      end)
   end

   it("is no option of a single limiter", function()
      assert.equal("unknown option 'capacity'",
         select(2, pcall(cellrate.limiter, 10, { capacity = 8 })))
   end)
end)

describe("cost", function()
   local bad = {
      -1, -0.5, 0.5, 2.5, NAN, -HUGE, -1e300, -(2 ^ 63), "1", "", a_table, true, false,
      a_function,
   }
   if math.mininteger then
      bad[#bad + 1] = math.mininteger
   end
   for _, cost in ipairs(bad) do
      it("refuses " .. show(cost), function()
         local lim = cellrate.limiter(10, { burst = 2 })
         local keyed = cellrate.keyed(10, { burst = 2, capacity = 8 })
         for _, method in ipairs({ "allow", "check", "peek" }) do
            raises("cost", lim[method], lim, cost, 0)
            raises("cost", keyed[method], keyed, "k", cost, 0)
         end
         -- nothing was spent by the refused calls
         assert.is_true(lim:allow(2, 0))
         assert.is_true(keyed:allow("k", 2, 0))
      end)
   end

   it("takes 0, math.huge and 1e300 as answers, not errors", function()
      local lim = cellrate.limiter(10, { burst = 2 })
      assert.is_true(lim:allow(0, 0))
      for _, cost in ipairs({ HUGE, 1e300, 2 ^ 63 }) do
         local allowed, remaining, retry_after = lim:check(cost, 0)
         assert.is_false(allowed)
         assert.equal(2, remaining)
         assert.equal(HUGE, retry_after)
      end
   end)

   it("says integer for non-integers, of any type", function()
      local lim = cellrate.limiter(10)
      assert.equal("cost must be an integer >= 0", raises("cost", lim.allow, lim, 1.5))
      assert.equal("cost must be an integer >= 0", raises("cost", lim.allow, lim, "1"))
      assert.equal("cost must be an integer >= 0", raises("cost", lim.allow, lim, -1))
   end)
end)

describe("now", function()
   local bad = {
      -1, -1e-3, NAN, HUGE, -HUGE, 1e300, -1e300, 2 ^ 63 / 1e9, 1e10, "0", "", a_table, true,
      a_function,
   }
   for _, now in ipairs(bad) do
      it("refuses " .. show(now), function()
         local lim = cellrate.limiter(10)
         local keyed = cellrate.keyed(10, { capacity = 8 })
         for _, method in ipairs({ "allow", "check", "peek" }) do
            raises("now", lim[method], lim, 1, now)
            raises("now", keyed[method], keyed, "k", 1, now)
         end
         assert.equal(0, #keyed)
      end)
   end

   it("gives the core's words", function()
      local lim = cellrate.limiter(10)
      assert.equal("now must be a finite number of seconds >= 0 and below 2^62 ns (146 years)",
         raises("now", lim.check, lim, 1, "soon"))
   end)
end)

describe("key", function()
   local bad = { 1, 1.5, NAN, a_table, true, false, a_function }
   for _, key in ipairs(bad) do
      it("refuses " .. show(key), function()
         local keyed = cellrate.keyed(10, { capacity = 8 })
         for _, method in ipairs({ "allow", "check", "peek", "reset" }) do
            raises("key", keyed[method], keyed, key, 1, 0)
         end
         assert.equal(0, #keyed)
      end)
   end

   it("refuses a missing key", function()
      local keyed = cellrate.keyed(10, { capacity = 8 })
      raises("key", keyed.allow, keyed)
      raises("key", keyed.reset, keyed)
      raises("key", keyed.check, keyed, nil, 1, 0)
   end)

   it("says what a key is and what it got, in the core's words", function()
      local keyed = cellrate.keyed(10, { capacity = 8 })
      local status = io.open("tests/vectors/status.txt"):read("a"):match("E_KEY [^|]*|([^\n]*)")
      assert.equal(status .. ", not number", raises("key", keyed.allow, keyed, 42))
      assert.equal(status .. ", not nil", raises("key", keyed.reset, keyed))
   end)
end)

describe("opts", function()
   local bad = { true, false, 1, 60, "x", "{ burst = 1 }", a_function }
   for _, opts in ipairs(bad) do
      it("refuses " .. show(opts), function()
         raises("opts", cellrate.limiter, 10, opts)
         raises("opts", cellrate.keyed, 10, opts)
      end)
   end

   it("refuses unknown options by name", function()
      local ok, err = pcall(cellrate.limiter, 10, { brust = 6 })
      assert.is_false(ok)
      assert.equal("unknown option 'brust' (did you mean 'burst'?)", err)
      ok, err = pcall(cellrate.keyed, 10, { capacity = 8, capcity = 9 })
      assert.is_false(ok)
      assert.equal("unknown option 'capcity' (did you mean 'capacity'?)", err)
      -- only an option the function takes, and only within two edits
      ok, err = pcall(cellrate.limit_spec, 10, { capacty = 8 })
      assert.is_false(ok)
      assert.equal("unknown option 'capacty'", err)
      ok, err = pcall(cellrate.limiter, 10, { algo = "gcra" })
      assert.is_false(ok)
      assert.equal("unknown option 'algo'", err)
      ok, err = pcall(cellrate.limiter, 10, { [("x"):rep(100)] = 1 })
      assert.is_false(ok)
      assert.equal("unknown option '" .. ("x"):rep(100) .. "'", err)
      ok, err = pcall(cellrate.limiter, 10, { 6 })
      assert.is_false(ok)
      assert.is_truthy(err:find("^unknown option"))
      ok, err = pcall(cellrate.limiter, 10, { [true] = 6 })
      assert.is_false(ok)
      assert.is_truthy(err:find("^unknown option"))
   end)

   it("takes nil and an empty table as no options", function()
      local defaults = { rate = 10, period = 1, burst = 10, clock = "fast", algorithm = "gcra",
         emission_ns = 100000000, tolerance_ns = 1000000000, max_debt = 10 }
      assert.same(defaults, cellrate.limiter(10):info())
      assert.same(defaults, cellrate.limiter(10, {}):info())
      assert.same(defaults, cellrate.limiter(10, { period = nil, burst = nil }):info())
   end)
end)

describe("self", function()
   it("must be the right kind of object", function()
      local lim = cellrate.limiter(10)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      for _, wrong in ipairs({ keyed, io.stdout, {}, "x", 1, false }) do
         assert.is_false(pcall(lim.allow, wrong, 1, 0))
         assert.is_false(pcall(lim.close, wrong))
      end
      for _, wrong in ipairs({ lim, io.stdout, {}, "x", 1, false }) do
         local ok, err = pcall(keyed.allow, wrong, "k", 1, 0)
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find("cellrate.KeyedLimiter expected", 1, true))
         assert.is_false(pcall(keyed.close, wrong))
      end
      assert.is_false(pcall(lim.allow))
   end)
end)

describe("any argument", function()
   -- Every value (and nil, at index 0) in every position: each call either
   -- answers or raises a string, and the objects stay usable.
   local values = {
      false, true, 0, 1, -1, 0.5, 2 ^ 53, 2 ^ 63, -(2 ^ 63), NAN, HUGE, -HUGE, 1e300,
      "", "1", "10/s", "x\0y", a_table, a_function, coroutine.create(function() end),
   }

   local function answers_or_raises(...)
      local ok, err = pcall(...)
      if not ok then
         assert.is_string(err)
      end
   end

   it("to the constructors", function()
      for i = 0, #values do
         local rate = values[i]
         answers_or_raises(cellrate.limiter, rate)
         answers_or_raises(cellrate.keyed, rate, { capacity = 4 })
         for _, option in ipairs({ "period", "burst" }) do
            answers_or_raises(cellrate.limiter, 10, { [option] = rate })
         end
         answers_or_raises(cellrate.keyed, 10, { capacity = rate })
      end
   end)

   it("to the methods", function()
      local lim = cellrate.limiter(10, { burst = 4 })
      local keyed = cellrate.keyed(10, { burst = 4, capacity = 16 })
      for i = 0, #values do
         for j = 0, #values do
            local a, b = values[i], values[j]
            answers_or_raises(lim.check, lim, a, b)
            answers_or_raises(lim.peek, lim, a, b)
            answers_or_raises(keyed.check, keyed, a, b, 0)
            answers_or_raises(keyed.peek, keyed, "k", a, b)
         end
      end
      assert.is_string(tostring(lim))
      assert.is_true(#keyed >= 0)
   end)
end)

describe("the error convention", function()
   it("puts the caller's position before the core's words", function()
      local lim = cellrate.limiter(10)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      local calls = {
         function() local r = lim:allow(-1); return r end,
         function() local r = keyed:check(42); return r end,
         function() local r = cellrate.limiter("10/fortnight"); return r end,
         function() local r = cellrate.keyed(10, { brust = 1 }); return r end,
      }
      for _, call in ipairs(calls) do
         local ok, err = pcall(call)
         assert.is_false(ok)
         assert.is_truthy(err:find("^[^\n]*errors_spec%.lua:%d+: %S"), err)
      end
   end)

   it("raises for argument mistakes only: constructors return values otherwise", function()
      local lim, err, code = cellrate.limiter(10)
      assert.is_not_nil(lim)
      assert.is_nil(err)
      assert.is_nil(code)
   end)
end)
