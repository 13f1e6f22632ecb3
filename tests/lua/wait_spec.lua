-- lim:wait(cost, timeout) and keyed:wait(key, cost, timeout): a reservation
-- and a blocking sleep of exactly its delay (docs/design.md §9).
local cellrate = require "cellrate"
local socket = require "socket" -- a wall clock with sub-millisecond resolution

local function timed(f, ...)
   local start = socket.gettime()
   local results = { f(...) }
   return socket.gettime() - start, results
end

describe("wait", function()
   it("admits at once, then sleeps each reservation's delay", function()
      local lim = cellrate.limiter(20, { burst = 1 }) -- one unit per 50 ms
      assert.equal(0, lim:wait())
      local slept, second = timed(lim.wait, lim)
      assert.is_true(second[1] > 0 and second[1] <= 0.05, tostring(second[1]))
      -- The sleep lasts at least the delay returned (never early).
      assert.is_true(slept >= second[1] - 0.001, slept .. " < " .. second[1])
      -- Both units are spent: the next one is 50 ms away again.
      local allowed, _, retry_after = lim:peek()
      assert.is_false(allowed)
      assert.is_true(retry_after > 0.03)
   end)

   it("returns nil, 'timeout' at once, spending nothing, when the wait is too long", function()
      local lim = cellrate.limiter(1, { burst = 1 })
      assert.equal(0, lim:wait())
      local _, _, before = lim:peek()
      local elapsed, result = timed(lim.wait, lim, 1, 0.2)
      assert.is_nil(result[1])
      assert.equal("timeout", result[2])
      assert.is_true(elapsed < 0.5) -- a sleep would have lasted about 1 s
      local _, _, after = lim:peek()
      assert.is_true(after <= before)
      -- An unfittable cost can never be had, however long the timeout.
      local _, never = timed(lim.wait, lim, 2)
      assert.is_nil(never[1])
   end)

   it("waits per key", function()
      local keyed = cellrate.keyed(20, { burst = 1, capacity = 8 })
      assert.equal(0, keyed:wait("a"))
      assert.equal(0, keyed:wait("b"))
      assert.is_nil((keyed:wait("b", 1, 0)))
      local slept, result = timed(keyed.wait, keyed, "a", 1, 1)
      assert.is_true(result[1] > 0 and slept >= result[1] - 0.001)
   end)

   it("refuses bad arguments, naming them", function()
      local lim = cellrate.limiter(10)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      for _, bad in ipairs({ -1, 0 / 0, "1" }) do
         local ok, err = pcall(lim.wait, lim, 1, bad)
         assert.is_false(ok)
         assert.matches("timeout", err)
      end
      local ok, err = pcall(lim.wait, lim, -1)
      assert.is_false(ok)
      assert.matches("cost", err)
      ok, err = pcall(keyed.wait, keyed, 5)
      assert.is_false(ok)
      assert.matches("key", err)
   end)
end)
