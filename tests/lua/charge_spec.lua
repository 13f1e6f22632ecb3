-- Costs known after the fact (docs/design.md §9) through the Lua face:
-- lim:charge, lim:take, their keyed forms, the max_cost option, and bad input
-- named as Python names it. The decisions are pinned by vectors_spec.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)
local raises, status = support.raises, support.status

local EPOCH = 1700000000.25 -- a realtime instant, on the windows' grid

describe("charge", function()
   it("commits whatever the state, and the debt drains at exactly the rate", function()
      local lim = cellrate.limiter(10, { burst = 5, max_debt = 10 })
      local allowed, remaining, retry_after, reset_after, clipped = lim:charge(12, 0)
      assert.are.same({ false, 0, 0.8, 1.2, false }, { allowed, remaining, retry_after, reset_after, clipped })
      assert.are.equal(0, lim:take(5, 0.7999))
      assert.is_false((lim:check(1, 0.7999)))
      assert.is_true((lim:check(1, 0.8))) -- the first admission: when the model says
      assert.is_false((lim:check(1, 0.8)))
   end)

   it("settles an estimate, keyed, key first", function()
      local keyed = cellrate.keyed(10, { burst = 5, capacity = 8 })
      assert.is_true((keyed:check("k", 1, 0)))
      local allowed, remaining = keyed:charge("k", 3, 0)
      assert.is_true(allowed)
      assert.are.equal(1, remaining)
      keyed:refund("k", 2, 0)
      assert.are.equal(3, keyed:take("k", 10, 0))
   end)

   it("is clipped at the debt bound and says so: one bad figure, one more burst", function()
      for _, make in ipairs({ function(o) return cellrate.limiter("10/s", o) end,
                              function(o) return cellrate.keyed("10/s", o) end }) do
         local lim = make({ burst = 10 })
         local charge = function(...)
            if lim:info().capacity then return lim:charge("k", ...) end
            return lim:charge(...)
         end
         local allowed, _, retry_after, _, clipped = charge(2 ^ 70, 1) -- max_debt: the burst
         assert.are.same({ false, 1.1, true }, { allowed, retry_after, clipped })
         assert.is_true(select(5, charge(1, 1)))
      end
      local lim = cellrate.limiter("10/s", { burst = 10, max_debt = 100 })
      local allowed, _, retry_after, _, clipped = lim:charge(50, 1) -- 40 units in debt
      assert.are.same({ false, 4.1, false }, { allowed, retry_after, clipped })
      assert.are.equal(10.1, select(3, lim:charge(2 ^ 70, 1)))
      local horizon = cellrate.limiter(1, { burst = 1, max_debt = 2 ^ 63 })
      local horizon_charge = { horizon:charge(2 ^ 62, 1) }
      assert.is_true(horizon_charge[5])
      assert.are.equal(4611686018, horizon_charge[4]) -- whatever max_debt: the horizon, whole units
   end)

   it("takes max_debt as an option, named in the core's words", function()
      assert.are.equal(10, cellrate.limiter("10/s"):info().max_debt)
      local keyed = cellrate.keyed("10/s", { burst = 20, max_debt = 5 })
      assert.are.equal(5, keyed:info().max_debt)
      assert.is_truthy(tostring(keyed):find("max_debt=5", 1, true))
      local words = status("E_MAX_DEBT")
      assert.are.equal(words.message, raises("max_debt", cellrate.limiter, 10, { max_debt = -1 }))
      raises("max_debt", cellrate.keyed, 10, { max_debt = 2.5 })
      raises("max_debt", cellrate.keyed, 10, { max_debt = "3" })
      keyed:reconfigure(100, { burst = 30 }) -- a max_debt given stays
      assert.are.same({ 30, 5 }, { keyed:info().burst, keyed:info().max_debt })
      keyed:reconfigure(100, { burst = 30, max_debt = 50 })
      assert.are.equal(50, keyed:info().max_debt)
      local lim = cellrate.limiter("10/s")
      lim:reconfigure(20) -- the default follows the burst
      assert.are.equal(20, lim:info().max_debt)
      raises("max_debt", function() lim:reconfigure(20, { max_debt = -1 }) end)
      assert.are.equal(20, lim:info().max_debt)
   end)

   it("takes a window's count to its packed ceiling", function()
      local fixed = cellrate.limiter(100, { period = 1, algorithm = "fixed_window", max_debt = 2 ^ 62 })
      assert.is_false(select(5, fixed:charge(1e9 - 1, EPOCH)))
      assert.is_true(select(5, fixed:charge(1, EPOCH)))
      assert.is_true((fixed:check(1, EPOCH + 0.75)))
   end)
end)

describe("take", function()
   it("admits as many units as fit, up to max_cost", function()
      local lim = cellrate.limiter(10, { burst = 10 })
      assert.are.equal(4, lim:take(4, 0))
      assert.are.equal(6, lim:take(10, 0))
      assert.are.equal(0, lim:take(5, 0))
      assert.are.equal(0, lim:take(0, 1))
      assert.are.equal(10, lim:take(100, 5))
   end)
end)

describe("max_cost", function()
   it("refuses a burst that could never fit it, naming burst", function()
      local words = status("E_BURST_MAX_COST")
      assert.are.equal(words.message, raises("burst", cellrate.limiter, "1000/minute", { max_cost = 4000 }))
      assert.is_truthy(cellrate.limiter("1000/minute", { burst = 4000, max_cost = 4000 }))
      raises("rate", cellrate.keyed, 100, { period = 60, algorithm = "fixed_window", max_cost = 101 })
      raises("max_cost", cellrate.keyed, 100, { max_cost = -1 })
      raises("max_cost", cellrate.limiter, 100, { max_cost = 2.5 })
      raises("max_cost", cellrate.limiter, 100, { max_cost = "3" })
   end)

   it("stays the store's across a change", function()
      for _, make in ipairs({ cellrate.limiter, cellrate.keyed }) do
         local lim = make(10, { burst = 10, max_cost = 8 })
         raises("burst", function() lim:reconfigure(10, { burst = 5 }) end)
         assert.are.equal(10, lim:info().burst)
         lim:reconfigure(20, { burst = 8 })
         assert.are.equal(8, lim:info().burst)
      end
   end)
end)

describe("bad input", function()
   local lim, keyed = cellrate.limiter(10), cellrate.keyed(10, { capacity = 8 })
   -- not tail calls: LuaJIT reports no caller for those
   local cases = {
      { "max_cost", function() local _ = lim:take(-1) end },
      { "max_cost", function() local _ = lim:take() end },
      { "max_cost", function() local _ = keyed:take("k", 1.5) end },
      { "max_cost", function() local _ = keyed:take("k", "3") end },
      { "cost", function() local _ = lim:charge(-1) end },
      { "cost", function() local _ = lim:charge() end },
      { "cost", function() local _ = keyed:charge("k", {}) end },
      { "key", function() local _ = keyed:charge(5, 1) end },
      { "now", function() local _ = lim:charge(1, -1) end },
      { "now", function() local _ = keyed:take("k", 1, 0 / 0) end },
   }
   for i, case in ipairs(cases) do
      it(("names %s (%d), in the core's words, at the caller's line"):format(case[1], i), function()
         local ok, err = pcall(case[2])
         assert.is_false(ok)
         assert.is_truthy(err:find("charge_spec.lua:%d+: " .. case[1]), err)
         raises(case[1], case[2])
      end)
   end

   it("spends nothing", function()
      assert.are.equal(9, select(2, lim:check(1, 0)))
      assert.are.equal(9, select(2, keyed:check("k", 1, 0)))
   end)

   it("uses the words Python uses", function()
      assert.are.equal(status("E_MAX_COST").message, raises("max_cost", function() local _ = lim:take(-1) end))
   end)
end)
