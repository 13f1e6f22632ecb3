-- The algorithm catalogue, reservations and check_all through the Lua face
-- (the decisions themselves: vectors_spec.lua reads tests/vectors/).
local cellrate = require "cellrate"
local raises = dofile("tests/lua/support.lua")(assert).raises

local EPOCH = 1700000000 -- a realtime instant, in seconds: windows are aligned to the epoch
local ALGORITHMS = { "gcra", "token_bucket", "fixed_window", "sliding_window" }

local function available(lim, key, now)
   local allowed, remaining
   if key ~= nil then
      allowed, remaining = lim:peek(key, 1, now)
   else
      allowed, remaining = lim:peek(1, now)
   end
   return allowed and remaining + 1 or 0
end

describe("algorithm", function()
   it("is in info() and tostring, gcra by default", function()
      assert.equal("gcra", cellrate.limiter(10):info().algorithm)
      for _, name in ipairs(ALGORITHMS) do
         local lim = cellrate.limiter("100/minute", { algorithm = name })
         local keyed = cellrate.keyed("100/minute", { algorithm = name, capacity = 8 })
         assert.equal(name, lim:info().algorithm)
         assert.equal(name, keyed:info().algorithm)
         local window = name:find("window") ~= nil
         assert.equal(window and "realtime" or "fast", lim:info().clock)
         assert.equal(name ~= "gcra", tostring(lim):find(name, 1, true) ~= nil)
      end
      assert.equal(tostring(cellrate.limiter(10)), tostring(cellrate.limiter(10, { algorithm = "gcra" })))
   end)

   it("follows the design's reference vectors", function()
      local fixed = cellrate.limiter("10/8s", { algorithm = "fixed_window" })
      for i = 0, 8 do
         assert.is_true(fixed:allow(1, EPOCH + i / 4))
      end
      local allowed, remaining, retry_after = fixed:check(3, EPOCH + 4)
      assert.is_false(allowed)
      assert.equal(1, remaining)
      assert.equal(4, retry_after)
      local sliding = cellrate.limiter("10/8s", { algorithm = "sliding_window" })
      for _ = 1, 6 do assert.is_true(sliding:allow(1, EPOCH + 7)) end
      for _ = 1, 6 do assert.is_true(sliding:allow(1, EPOCH + 12)) end
      allowed, remaining, retry_after = sliding:check(3, EPOCH + 14)
      assert.is_false(allowed)
      assert.equal(2, remaining)
      assert.equal(0.666666667, retry_after)
   end)

   it("refuses bad names and combinations, naming the parameter", function()
      for _, name in ipairs({ "leaky_bucket", "GCRA", "", 1, true, {} }) do
         raises("algorithm", cellrate.limiter, 10, { algorithm = name })
         raises("algorithm", cellrate.keyed, 10, { algorithm = name, capacity = 8 })
      end
      for _, make in ipairs({ cellrate.limiter, cellrate.keyed }) do
         raises("burst", make, 10, { algorithm = "fixed_window", burst = 10 })
         raises("burst", make, 10, { algorithm = "sliding_window", burst = 1 })
         assert.is_truthy(raises("rate", make, "0.5/s", { algorithm = "fixed_window" }):find("1/2s", 1, true))
         raises("rate", make, 2.5, { algorithm = "sliding_window" })
         raises("rate", make, "1000000000/s", { algorithm = "fixed_window" })
         assert.is_truthy(raises("rate", make, "31622/s", { algorithm = "sliding_window" }):find("31621", 1, true))
         raises("clock", make, 10, { algorithm = "fixed_window", clock = "fast" })
         raises("clock", make, 10, { clock = "realtime" })
         raises("period", make, 1, { algorithm = "fixed_window", period = 2e9 })
         raises("burst", make, 2, { period = 9.2e9 })
      end
   end)

   it("refuses a region made with another algorithm", function()
      local path = os.tmpname()
      os.remove(path)
      local a = cellrate.keyed(10, { period = 8, algorithm = "fixed_window", shared = path, capacity = 8 })
      assert.is_truthy(a)
      for _, name in ipairs({ "sliding_window", "gcra", "token_bucket" }) do
         -- a refused region is a runtime failure: nil, message, code
         local none, err, code = cellrate.keyed(10, { period = 8, algorithm = name, shared = path, capacity = 8 })
         assert.is_nil(none)
         assert.is_truthy(err:find("shared: the region was made with another algorithm", 1, true))
         assert.equal("E_SHARED_ALGORITHM", code)
      end
      local b = cellrate.keyed(10, { period = 8, algorithm = "fixed_window", shared = path, capacity = 8 })
      assert.equal("fixed_window", b:info().algorithm)
      os.remove(path)
   end)
end)

describe("reserve and refund", function()
   it("queue a gcra limiter within a timeout", function()
      for _, name in ipairs({ "gcra", "token_bucket" }) do
         local lim = cellrate.limiter(10, { burst = 2, algorithm = name })
         assert.equal(0, lim:reserve(1, nil, 0))
         assert.equal(0, lim:reserve(1, nil, 0))
         assert.is_near(0.1, lim:reserve(1, nil, 0), 1e-12)
         assert.is_nil(lim:reserve(1, 0.15, 0))
         assert.is_near(0.2, lim:reserve(1, 0.2, 0), 1e-12)
         assert.is_nil(lim:reserve(3, nil, 0))
         lim:refund(2, 0)
         assert.is_near(0.1, lim:reserve(1, 0.1, 0), 1e-12)
         local keyed = cellrate.keyed(10, { burst = 1, algorithm = name, capacity = 8 })
         assert.equal(0, keyed:reserve("k", 1, nil, 0))
         assert.is_nil(keyed:reserve("k", 1, 0.05, 0))
         keyed:refund("k", 1, 0)
         assert.equal(0, keyed:reserve("k", 1, 0, 0))
      end
   end)

   it("reserve windows only for now", function()
      for _, name in ipairs({ "fixed_window", "sliding_window" }) do
         local lim = cellrate.limiter(2, { period = 10, algorithm = name })
         assert.equal(0, lim:reserve(2, nil, EPOCH))
         assert.is_nil(lim:reserve(1, 100, EPOCH))
         lim:refund(1, EPOCH)
         assert.equal(0, lim:reserve(1, 0, EPOCH))
      end
   end)

   it("refuse bad arguments", function()
      local lim = cellrate.limiter(10)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      raises("timeout", lim.reserve, lim, 1, -1)
      raises("timeout", lim.reserve, lim, 1, 0 / 0)
      raises("timeout", lim.reserve, lim, 1, "1")
      raises("cost", lim.reserve, lim, -1)
      raises("cost", lim.refund, lim, 1.5)
      raises("now", lim.refund, lim, 1, -1)
      raises("key", keyed.reserve, keyed, 5)
      raises("key", keyed.refund, keyed, nil)
      raises("timeout", keyed.reserve, keyed, "k", 1, -0.5)
      raises("now", lim.allow, lim, 1, 9223372036.5)
      assert.equal(0, lim:reserve(1, math.huge))
   end)
end)

describe("check_all", function()
   it("returns the tightest decision and spends nothing on a refusal", function()
      local route = cellrate.limiter(5, { period = 1 })
      local per_ip = cellrate.keyed(2, { period = 1, algorithm = "fixed_window", capacity = 8 })
      local per_user = cellrate.keyed(3, { period = 1, algorithm = "sliding_window", capacity = 8 })
      local items = { route, { per_ip, "10.0.0.1" }, { per_user, "alice" } }
      local allowed, remaining = cellrate.check_all(items, 1, EPOCH)
      assert.is_true(allowed)
      assert.equal(1, remaining)
      assert.is_true((cellrate.check_all(items, 1, EPOCH)))
      local before = { available(route, nil, EPOCH), available(per_ip, "10.0.0.1", EPOCH),
         available(per_user, "alice", EPOCH) }
      local retry_after
      allowed, remaining, retry_after = cellrate.check_all(items, 1, EPOCH)
      assert.is_false(allowed)
      assert.equal(1, retry_after)
      assert.same(before, { available(route, nil, EPOCH), available(per_ip, "10.0.0.1", EPOCH),
         available(per_user, "alice", EPOCH) })
      allowed, remaining, retry_after = cellrate.check_all(items, 4, EPOCH)
      assert.is_false(allowed)
      assert.equal(math.huge, retry_after)
      assert.is_true((cellrate.check_all({ route }, 0, EPOCH)))
      local twice = cellrate.limiter(1, { period = 1 })
      assert.is_false((cellrate.check_all({ twice, twice }, 1, EPOCH)))
      assert.equal(1, available(twice, nil, EPOCH))
   end)

   it("names the item whose decision it returns", function()
      local wide = cellrate.limiter(10, { burst = 5 })
      local narrow = cellrate.keyed(10, { burst = 2, capacity = 8 })
      local items = { wide, { narrow, "k" } }
      -- Admissions: the fewest remaining (wide 4, narrow 1; then 3 and 0).
      assert.same({ true, 1, 0, 0.1, 2 }, { cellrate.check_all(items, 1, 0) })
      assert.same({ true, 0, 0, 0.2, 2 }, { cellrate.check_all(items, 1, 0) })
      -- A refusal: the limit that refused.
      local allowed, _, _, _, index = cellrate.check_all(items, 1, 0)
      assert.is_false(allowed)
      assert.equal(2, index)
      local single = cellrate.limiter(10, { burst = 1 })
      assert.equal(1, select(5, cellrate.check_all({ single, { narrow, "z" } }, 1, 0)))
   end)

   it("refuses bad items", function()
      local lim = cellrate.limiter(10)
      local keyed = cellrate.keyed(10, { capacity = 8 })
      for _, bad in ipairs({ {}, 5, "ab", { 5 }, { keyed }, { { lim, "k" } }, { { keyed } },
         { { keyed, "k", "default", 1 } }, { {} } }) do
         raises("items", cellrate.check_all, bad)
      end
      raises("plan", cellrate.check_all, { { keyed, "k", 1 } }) -- { keyed, key, plan }
      raises("items", cellrate.check_all)
      raises("key", cellrate.check_all, { { keyed, 5 } })
      raises("cost", cellrate.check_all, { lim }, -1)
      raises("now", cellrate.check_all, { lim }, 1, -1)
   end)
end)
