-- Counters from Lua: lim:stats() and reset_stats() count what was decided,
-- as Python's stats() does (tests/python/test_stats.py); a shared region's
-- are every opener's.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local NOW = 5000
local RATE_KEYS = { "admitted", "refused", "units_admitted", "units_refused", "units_refunded",
                    "unfittable", "would_refuse", "evicted", "bans" }

local function expect(counts)
   local out = {}
   for _, key in ipairs(RATE_KEYS) do
      out[key] = counts[key] or 0
   end
   return out
end

local function fresh_path() return support.fresh_path("stats") end

describe("stats", function()
   for _, shared in ipairs({ false, true }) do
      it("counts what each call decided" .. (shared and " (shared)" or ""), function()
         local path = shared and fresh_path() or nil
         local lim = cellrate.limiter(1, { burst = 5, shared = path })
         assert.are.same(expect({}), lim:stats())
         for _ = 1, 3 do assert.is_true(lim:allow(1, NOW)) end
         assert.is_false(lim:allow(3, NOW))
         assert.is_false((lim:check(6, NOW))) -- unfittable
         lim:peek(1, NOW)
         assert.are.equal(2, lim:take(5, NOW))
         assert.are.equal(0, lim:take(5, NOW))
         lim:charge(4, NOW)
         lim:refund(1, NOW)
         assert.are.same(expect({ admitted = 5, refused = 3, units_admitted = 9,
                                  units_refused = 14, units_refunded = 1, unfittable = 1 }),
                         lim:stats())
         lim:_would_refuse(3)
         assert.are.same(expect({ admitted = 5, refused = 2, units_admitted = 9,
                                  units_refused = 11, units_refunded = 1, unfittable = 1,
                                  would_refuse = 1 }),
                         lim:stats())
         assert.is_true(lim:reset_stats())
         assert.are.same(expect({}), lim:stats())
         if path then os.remove(path) end
      end)
   end

   it("counts what was committed: never negative, never wrapped", function()
      local lim = cellrate.limiter("10/s", { burst = 10 })
      lim:refund(5, NOW) -- a fresh key holds nothing to give back
      local keyed = cellrate.keyed("10/s", { burst = 10 })
      keyed:refund("a", 3, NOW)
      assert.are.same(expect({}), lim:stats())
      assert.are.same(expect({}), keyed:stats())
      for _ = 1, 3 do assert.is_true(select(5, lim:charge(2 ^ 62, NOW))) end
      assert.are.same(expect({ admitted = 3, units_admitted = 20 }), lim:stats())
      for _ = 1, 3 do assert.is_false((lim:check(2 ^ 62, NOW))) end
      assert.are.equal(math.maxinteger or 2 ^ 63, lim:stats().units_refused) -- saturated
   end)

   it("keyed: counts across two objects on one region", function()
      local path = fresh_path()
      local a = cellrate.keyed("1/hour", { burst = 2, capacity = 10, shared = path })
      local b = cellrate.keyed("1/hour", { burst = 2, capacity = 10, shared = path })
      for _ = 1, 3 do
         a:allow("x", 1, NOW)
         b:allow("y", 1, NOW)
      end
      assert.are.same(expect({ admitted = 4, refused = 2, units_admitted = 4,
                               units_refused = 2 }), b:stats())
      assert.are.same(a:stats(), b:stats())
      b:reset_stats()
      assert.are.same(expect({}), a:stats())
      os.remove(path)
   end)

   it("check_all counts one refusal, at the limit it names", function()
      local wide = cellrate.limiter(1, { burst = 10 })
      local narrow = cellrate.keyed(1, { burst = 1, capacity = 10 })
      assert.is_true((cellrate.check_all({ wide, { narrow, "k" } }, 1, NOW)))
      local allowed, _, _, _, index = cellrate.check_all({ wide, { narrow, "k" } }, 1, NOW)
      assert.is_false(allowed)
      assert.are.equal(2, index)
      assert.are.equal(1, wide:stats().admitted)
      assert.are.equal(0, wide:stats().refused)
      assert.are.equal(1, narrow:stats().refused)
   end)

   it("concurrency", function()
      local c = cellrate.concurrency(3, { peak = true })
      assert.is_true(c:info().peak)
      assert.are.equal("cellrate.Concurrency(limit=3, peak=True)", tostring(c))
      local one = c:acquire(nil, 1)
      local two = c:acquire(nil, 2)
      assert.is_nil((c:acquire(nil, 1)))
      c:release(one)
      c:release(one)
      assert.are.same({ acquired = 2, refused = 1, units_acquired = 3, units_refused = 1,
                        released = 1, reclaimed = 0, in_flight = 2, peak = 3, evicted = 0 },
                      c:stats())
      assert.is_true(c:reset_stats())
      assert.are.equal(2, c:stats().peak)
      c:release(two)
      assert.are.equal(0, c:stats().in_flight)
   end)

   for _, shared in ipairs({ false, true }) do
      it("concurrency without a peak" .. (shared and " (shared)" or ""), function()
         local path = shared and fresh_path() or nil
         local c = cellrate.concurrency(3, { shared = path })
         assert.is_nil(c:info().peak)
         assert.are.equal("cellrate.Concurrency(limit=3)", tostring(c))
         local one = c:acquire(nil, 2)
         assert.is_truthy(c:acquire(nil, 1))
         c:release(one)
         assert.are.same({ acquired = 2, refused = 0, units_acquired = 3, units_refused = 0,
                           released = 2, reclaimed = 0, in_flight = 1, evicted = 0 },
                         c:stats()) -- no peak
         local keyed_path = shared and fresh_path() or nil
         local keyed = cellrate.concurrency(2, { capacity = 8, shared = keyed_path })
         for _, key in ipairs({ "a", "b", "c" }) do assert.is_truthy(keyed:acquire(key, 2)) end
         assert.are.equal(6, keyed:stats().in_flight) -- the whole table's cells
         assert.is_nil(keyed:stats().peak)
         if shared then
            local info = assert(cellrate.inspect_region(path))
            assert.is_false(info.peak)
            assert.are.same(c:stats(), info.stats)
            os.remove(path)
            os.remove(keyed_path)
         end
      end)
   end

   it("inspect_region reads a region and refuses what is not one", function()
      local path = fresh_path()
      local keyed = cellrate.keyed("100/minute", { capacity = 50, shared = path })
      keyed:allow("a", 1, NOW)
      local info = assert(cellrate.inspect_region(path))
      assert.are.equal(12, info.layout_version)
      assert.are.equal("keyed", info.kind)
      assert.are.equal("gcra", info.algorithm)
      assert.are.equal(tostring(keyed), info.limit)
      assert.are.equal(100, info.burst)
      assert.are.equal(50, info.capacity)
      assert.are.equal(1, info.live_keys)
      assert.are.same(keyed:stats(), info.stats)
      local text = fresh_path()
      local f = assert(io.open(text, "w"))
      f:write(("hello\n"):rep(1000))
      f:close()
      local none, message, code = cellrate.inspect_region(text)
      assert.is_nil(none)
      assert.are.equal("E_SHARED_FOREIGN", code)
      assert.is_truthy(message:find(text, 1, true))
      local missing = fresh_path()
      none, message, code = cellrate.inspect_region(missing)
      assert.is_nil(none)
      assert.are.equal("E_SHARED_MISSING", code)
      assert.is_truthy(message:find(missing, 1, true))
      assert.has_error(function() cellrate.inspect_region(42) end)
      os.remove(path)
      os.remove(text)
   end)
end)
