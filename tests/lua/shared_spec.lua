-- Shared regions from Lua: two objects on one path share one limit, and a
-- region made for another limit is refused with an error naming what differs.
local cellrate = require "cellrate"

local dir = os.getenv("CELLRATE_TEST_DIR") or "/tmp"
local serial = 0

local function fresh_path()
   serial = serial + 1
   local path = ("%s/cellrate-lua-%s-%d"):format(dir, tostring(os.time()), serial)
   os.remove(path)
   return path
end

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

   it("refuses a region made for another limit", function()
      local path = fresh_path()
      local a = cellrate.keyed(10, { burst = 5, capacity = 100, shared = path })
      raises("another burst", cellrate.keyed, 10, { burst = 6, capacity = 100, shared = path })
      raises("another rate", cellrate.keyed, 20, { burst = 5, capacity = 100, shared = path })
      raises("another capacity", cellrate.keyed, 10, { burst = 5, capacity = 99, shared = path })
      raises("another kind", cellrate.limiter, 10, { burst = 5, shared = path })
      raises(path, cellrate.keyed, 10, { burst = 6, capacity = 100, shared = path })
      a:close()
      os.remove(path)
   end)

   it("checks the shared and shared_mode options", function()
      raises("shared must be", cellrate.keyed, 10, { shared = 42 })
      raises("shared_mode must be", cellrate.keyed, 10, { shared = fresh_path(), shared_mode = 4096 })
      raises("shared_mode must be", cellrate.limiter, 10, { shared = fresh_path(), shared_mode = "rw" })
      raises("cannot open", cellrate.limiter, 10, { shared = "/nonexistent-dir/region" })
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
