-- Shared regions from Lua: two objects on one path share one limit. A region
-- that cannot be used (made for another limit, or not openable) is a runtime
-- failure: the constructor returns nil, a message naming what differs and the
-- path, and the status's name as a code. A bad option is an argument mistake
-- and raises.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)
local pack, fails = support.pack, support.fails

local function fresh_path() return support.fresh_path("shared") end

local function raises(needle, fn, ...)
   local ok, err = pcall(fn, ...)
   assert.is_false(ok, "expected an error about " .. needle)
   assert.is_truthy(tostring(err):find(needle, 1, true), ("error %q lacks %q"):format(tostring(err), needle))
end


describe("shared keyed", function()
   it("two objects on one path admit burst between them", function()
      local path = fresh_path()
      local a = cellrate.keyed(1, { burst = 5, capacity = 100, shared = path })
      local b = cellrate.keyed(1, { burst = 5, capacity = 100, shared = path })
      local admitted = 0
      for _ = 1, 10 do
         if a:allow("k", 1, 50) then admitted = admitted + 1 end
         if b:allow("k", 1, 50) then admitted = admitted + 1 end
      end
      assert.are.equal(5, admitted)
      assert.are.equal(1, #a)
      b:reset("k")
      assert.is_true(a:allow("k", 1, 50))
      a:close(); b:close()
      os.remove(path)
   end)

   it("with on_change = 'refuse', refuses a region made for another limit", function()
      local path = fresh_path()
      local a = cellrate.keyed(10, { burst = 5, capacity = 100, shared = path })
      fails("E_SHARED_BURST", { "another burst", path },
         cellrate.keyed, 10, { burst = 6, capacity = 100, shared = path, on_change = "refuse" })
      fails("E_SHARED_RATE", { "another rate", path },
         cellrate.keyed, 20, { burst = 5, capacity = 100, shared = path, on_change = "refuse" })
      fails("E_SHARED_CAPACITY", { "another capacity", path },
         cellrate.keyed, 10, { burst = 5, capacity = 99, shared = path })
      fails("E_SHARED_KIND", { "another kind", path }, cellrate.limiter, 10, { burst = 5, shared = path })
      fails("E_SHARED_ALGORITHM", { "another algorithm", path },
         cellrate.keyed, 10, { capacity = 100, shared = path, algorithm = "fixed_window" })
      -- the OpenResty idiom
      local lim, err, code = cellrate.keyed(10, { burst = 6, capacity = 100, shared = path,
                                                  on_change = "refuse" })
      assert.is_nil(lim)
      assert.is_truthy(err:find("^shared: "))
      assert.are.equal("E_SHARED_BURST", code)
      assert.is_true(a:allow("k", 1, 0)) -- the region is untouched
      a:close()
      os.remove(path)
   end)

   it("opened with another limit, changes the region's for every object on it", function()
      local path = fresh_path()
      -- per hour: a busy machine's pauses between these lines refill nothing
      local a = cellrate.keyed(10, { period = 3600, burst = 10, capacity = 100, shared = path })
      for _ = 1, 6 do a:allow("k") end
      local b = cellrate.keyed(100, { period = 3600, burst = 20, capacity = 100, shared = path })
      -- the first object follows from its next decision: 6 of 20 used, this one more
      local allowed, remaining = a:check("k")
      assert.is_true(allowed)
      assert.are.equal(20, a:info().burst)
      assert.are.equal(13, remaining)
      b:reconfigure(10, { period = 3600, burst = 10 })
      allowed, remaining = a:check("k")
      assert.is_true(allowed)
      assert.are.equal(10, a:info().burst)
      assert.are.equal(2, remaining) -- 7 of 10 used carry; one more
      assert.are.equal(tostring(a), tostring(b))
      a:close(); b:close()
      os.remove(path)
   end)

   it("checks on_change", function()
      raises("on_change must be 'apply' or 'refuse'", cellrate.keyed, 10, { on_change = "keep" })
      raises("on_change must be 'apply' or 'refuse'", cellrate.limiter, 10, { on_change = 1 })
      raises("did you mean 'on_change'", cellrate.limiter, 10, { on_chnage = "apply" })
   end)

   it("returns nil, message, code for a region that cannot be opened", function()
      fails("E_SHARED_IO", { "cannot open", "/nonexistent-dir/region", "(" },
         cellrate.limiter, 10, { shared = "/nonexistent-dir/region" })
      fails("E_SHARED_IO", { "cannot open" },
         cellrate.keyed, 10, { shared = "/nonexistent-dir/region" })
      local path = fresh_path()
      local file = assert(io.open(path, "w"))
      file:write(("not a region\n"):rep(100))
      file:close()
      fails("E_SHARED_FOREIGN", { "not a cellrate region", path },
         cellrate.keyed, 10, { capacity = 8, shared = path })
      os.remove(path)
   end)

   it("raises, with the caller's position, for argument mistakes", function()
      local ok, err = pcall(function()
         local lim = cellrate.keyed(10, { capacity = 8, shared = fresh_path(), shared_mode = 4096 })
         return lim
      end)
      assert.is_false(ok)
      assert.is_truthy(err:find("^[^\n]*shared_spec%.lua:%d+: shared_mode must be"), err)
      local a_path = fresh_path()
      ok, err = pcall(function()
         local lim = cellrate.keyed(10, { capacity = 0, shared = a_path })
         return lim
      end)
      assert.is_false(ok)
      assert.is_truthy(err:find("^[^\n]*shared_spec%.lua:%d+: capacity must be"), err)
      os.remove(a_path)
   end)

   it("checks the shared and shared_mode options", function()
      raises("shared must be", cellrate.keyed, 10, { shared = 42 })
      raises("shared_mode must be", cellrate.keyed, 10, { shared = fresh_path(), shared_mode = 4096 })
      raises("shared_mode must be", cellrate.limiter, 10, { shared = fresh_path(), shared_mode = "rw" })
   end)
end)

describe("shared limiter", function()
   it("two objects on one path admit burst between them", function()
      local path = fresh_path()
      local a = cellrate.limiter("10/s", { burst = 3, shared = path })
      local b = cellrate.limiter("600/minute", { burst = 3, shared = path }) -- the same limit
      local admitted = 0
      for _ = 1, 5 do
         if a:allow(1, 9) then admitted = admitted + 1 end
         if b:allow(1, 9) then admitted = admitted + 1 end
      end
      assert.are.equal(3, admitted)
      a:close(); b:close()
      os.remove(path)
   end)
end)

describe("info().shared", function()
   it("is true in a shared region and absent in one process", function()
      local path = fresh_path()
      assert.is_true(cellrate.limiter(1, { shared = path }):info().shared)
      assert.is_true(cellrate.keyed(1, { shared = path .. ".keyed" }):info().shared)
      assert.is_true(cellrate.concurrency(2, { shared = path .. ".in_flight" }):info().shared)
      assert.is_nil(cellrate.limiter(1):info().shared)
      assert.is_nil(cellrate.keyed(1):info().shared)
      assert.is_nil(cellrate.concurrency(2):info().shared)
      os.remove(path)
      os.remove(path .. ".keyed")
      os.remove(path .. ".in_flight")
   end)
end)
