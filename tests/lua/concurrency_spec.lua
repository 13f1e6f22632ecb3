-- cellrate.concurrency(limit, opts): units held at once, the words of Python's
-- Concurrency (docs/design.md §15).
local cellrate = require "cellrate"
local socket = require "socket"

local function raises(pattern, f, ...)
   local ok, message = pcall(f, ...)
   assert.is_false(ok)
   assert.is_truthy(tostring(message):find(pattern, 1, true), tostring(message))
end

describe("concurrency", function()
   it("refuses bad input with the core's words", function()
      raises("limit must be an integer >= 1", cellrate.concurrency, 0)
      raises("limit must be an integer >= 1", cellrate.concurrency, 65537)
      raises("limit must be an integer >= 1", cellrate.concurrency, "5")
      raises("limit must be an integer >= 1", cellrate.concurrency, 2.5)
      raises("lease must be a number of seconds > 0", cellrate.concurrency, 2, { lease = 0 })
      raises("lease must be a number of seconds > 0", cellrate.concurrency, 2, { lease = -1 })
      raises("lease must be a number of seconds > 0", cellrate.concurrency, 2, { lease = "30" })
      raises("capacity must be an integer >= 1", cellrate.concurrency, 2, { capacity = 0 })
      raises("unknown option 'leas' (did you mean 'lease'?)", cellrate.concurrency, 2, { leas = 1 })
      for _, peak in ipairs({ 1, 0, "true", {} }) do
         raises("peak must be a boolean", cellrate.concurrency, 2, { peak = peak })
      end
      local c = cellrate.concurrency(2)
      raises("cost must be an integer >= 1", c.acquire, c, nil, 0)
      raises("cost must be an integer >= 1", c.acquire, c, nil, -1)
      raises("key: a concurrency limit without capacity has no keys", c.acquire, c, "client")
      raises("slot must be a slot that a concurrency limit gave out", c.release, c, "slot")
      local keyed = cellrate.concurrency(2, { capacity = 4 })
      raises("key must be a string", keyed.acquire, keyed)
      raises("key must be a string", keyed.in_flight, keyed)
   end)

   it("holds at most the limit, and a release is idempotent", function()
      local c = cellrate.concurrency(3)
      local two = assert(c:acquire(nil, 2))
      local none, why = c:acquire(nil, 2)
      assert.is_nil(none)
      assert.equal("rejected", why)
      local one = assert(c:acquire())
      assert.equal(3, c:in_flight())
      assert.is_true(c:release(two))
      assert.is_false(c:release(two)) -- a second release gives nothing back
      assert.equal(1, c:in_flight())
      assert.is_true(c:release(one))
      assert.equal(0, c:in_flight()) -- never below zero
      assert.is_nil(c:acquire(nil, 4)) -- never fits
      assert.equal("cellrate.Concurrency(limit=3)", tostring(c))
   end)

   it("gives nothing back for a slot of another limit", function()
      local a, b = cellrate.concurrency(1), cellrate.concurrency(1)
      local slot = assert(a:acquire())
      assert.is_false(b:release(slot))
      assert.equal(1, a:in_flight())
      assert.is_true(a:release(slot))
   end)

   it("keeps no place for a key with nothing held", function()
      local c = cellrate.concurrency(1, { capacity = 2 })
      local slots = {}
      for k = 0, 7 do slots[k] = assert(c:acquire("key-" .. k)) end
      assert.is_nil(c:acquire("key-8"))
      assert.is_true(c:release(slots[3]))
      assert.equal(0, c:in_flight("key-3"))
      assert.is_truthy(c:acquire("key-8"))
      assert.is_false(c:release(slots[3]))
      assert.equal(1, c:in_flight("key-8"))
   end)

   it("reclaims a holding older than its lease", function()
      local c, hung, second
      for _ = 1, 100 do -- a pause as long as the lease before the second try: again
         c = cellrate.concurrency(1, { lease = 0.05 })
         local start = socket.gettime()
         hung = assert(c:acquire())
         second = c:acquire()
         if socket.gettime() - start < 0.05 then
            break
         end
      end
      assert.is_nil(second) -- within its lease the hung holding still counts
      socket.sleep(0.1)
      local fresh = assert(c:acquire())
      assert.is_false(c:release(hung))
      assert.equal(1, c:in_flight())
      assert.is_true(c:release(fresh))
   end)

   it("gets back the units of a process that died holding them", function()
      local path = os.tmpname()
      os.remove(path)
      local c = assert(cellrate.concurrency(2, { shared = path }))
      local interpreter = jit and "luajit" or "lua5.4"
      local script = string.format(
         "package.cpath = %q; local c = require('cellrate').concurrency(2, { shared = %q }); "
            .. "assert(c:acquire(nil, 2)); os.exit(0)", package.cpath, path)
      assert.is_true(os.execute(string.format("%s -e %q", interpreter, script)) ~= false)
      assert.equal(0, c:in_flight()) -- the dead holder's two units are back
      local slot = assert(c:acquire(nil, 2))
      assert.is_true(c:release(slot))
      local other, message, code = cellrate.concurrency(3, { shared = path })
      assert.is_nil(other)
      assert.equal("E_SHARED_LIMIT", code)
      assert.is_truthy(message:find("another limit, lease or peak", 1, true))
      c:close()
      os.remove(path)
   end)

   for _, made_with in ipairs({ false, true }) do
      it("refuses a region made with peak = " .. tostring(made_with) .. " to the other", function()
         local path = os.tmpname()
         os.remove(path)
         local c = assert(cellrate.concurrency(2, { shared = path, peak = made_with }))
         local other, message, code = cellrate.concurrency(2,
            { shared = path, peak = not made_with })
         assert.is_nil(other)
         assert.equal("E_SHARED_LIMIT", code)
         assert.is_truthy(message:find("another limit, lease or peak", 1, true), message)
         assert.is_truthy(message:find(path, 1, true), message)
         local again = assert(cellrate.concurrency(2, { shared = path, peak = made_with }))
         assert.equal(made_with or nil, again:info().peak)
         again:close()
         c:close()
         os.remove(path)
      end)
   end
end)
