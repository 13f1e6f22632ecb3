-- lim:wait(cost, timeout) and keyed:wait(key, cost, timeout): a reservation
-- and a blocking sleep of exactly its delay; a window algorithm sleeps its
-- retry_after and tries again, as Python's wait() (docs/design.md §9).
-- A busy machine may pause any line for a while: every bound here holds
-- whatever the pauses (a limit that must refuse after one counts per hour or
-- day; a bound on a delay subtracts the time measured since its admission).
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)
local unpack = table.unpack or unpack
local socket = require "socket" -- a wall clock with sub-millisecond resolution

local function timed(f, ...)
   local start = socket.gettime()
   local results = { f(...) }
   return socket.gettime() - start, results
end

describe("wait", function()
   it("admits at once, then sleeps each reservation's delay", function()
      local lim = cellrate.limiter(20, { burst = 1 }) -- one unit per 50 ms
      local start = socket.gettime() -- before the first admission
      assert.equal(0, lim:wait())
      local slept, second = timed(lim.wait, lim)
      local returned = socket.gettime()
      -- the second unit is 50 ms after the first, less the time since it
      local least = 0.05 - (returned - slept - start)
      assert.is_true(second[1] >= least - 0.001 and second[1] <= 0.05, tostring(second[1]))
      -- The sleep lasts at least the delay returned (never early).
      assert.is_true(slept >= second[1] - 0.001, slept .. " < " .. second[1])
      -- Both units are spent: the next one is 50 ms from the wake-up (anchored).
      local allowed, _, retry_after = lim:peek()
      local since = socket.gettime() - returned
      assert.is_true(allowed == (since >= 0.05) or since >= 0.049, tostring(since))
      assert.is_true(retry_after >= 0.05 - since - 0.001, retry_after .. " " .. since)
   end)

   it("returns nil, 'timeout' at once, spending nothing, when the wait is too long", function()
      local lim = cellrate.limiter(1, { period = 3600, burst = 1 })
      assert.equal(0, lim:wait())
      local _, _, before = lim:peek()
      local elapsed, result = timed(lim.wait, lim, 1, 30)
      assert.is_nil(result[1])
      assert.equal("timeout", result[2])
      assert.is_true(elapsed < 30) -- a sleep would have lasted 30 s at least
      local _, _, after = lim:peek()
      assert.is_true(after <= before)
      -- An unfittable cost can never be had, however long the timeout.
      local _, never = timed(lim.wait, lim, 2)
      assert.is_nil(never[1])
   end)

   it("waits per key", function()
      local keyed = cellrate.keyed(1, { burst = 1, capacity = 8 }) -- a unit a second per key
      local start = socket.gettime()
      assert.equal(0, keyed:wait("a"))
      assert.equal(0, keyed:wait("b")) -- another key: no wait behind "a"
      local refused = keyed:wait("b", 1, 0)
      local slept, result = timed(keyed.wait, keyed, "a", 1, 2)
      if socket.gettime() - slept - start < 1 then -- (unless a pause outlasted both units)
         assert.is_nil(refused)
         assert.is_true(result[1] > 0)
      end
      assert.is_true(slept >= result[1] - 0.001)
   end)

   it("puts at most the rate in any window of the period, called at full speed", function()
      -- burst 1 and each late wake-up anchored (lim:anchor): the calls are at
      -- least T apart as they start, so [t, t + period) holds at most 20
      local lim = cellrate.limiter("20/0.2s", { burst = 1 })
      local stamps = {}
      while #stamps <= 40 do -- over two periods at least, however slowly
         lim:wait()
         stamps[#stamps + 1] = socket.gettime()
      end
      local most, last = 0, 1
      for first = 1, #stamps do
         while last <= #stamps and stamps[last] < stamps[first] + 0.2 do
            last = last + 1
         end
         most = math.max(most, last - first)
      end
      assert.is_true(most <= 20, tostring(most))
   end)

   it("anchors a late start: what follows is spaced from it", function()
      for _, lim in ipairs({ cellrate.limiter(10, { burst = 1 }),
                             cellrate.keyed(10, { burst = 1, capacity = 8 }) }) do
         local keyed = lim:info().capacity ~= nil
         local function call(method, ...) -- lim:method(...) or keyed:method("k", ...)
            if keyed then
               return lim[method](lim, "k", ...)
            end
            return lim[method](lim, ...)
         end
         call("reserve", 1, nil, 0)
         assert.near(0.1, call("reserve", 1, nil, 0), 1e-9) -- queued for t = 0.1
         call("anchor", 1, 0.13) -- its waiter woke at 0.13
         assert.near(0.1, call("reserve", 1, nil, 0.13), 1e-9) -- 0.23, not 0.2
         support.raises("cost", call, "anchor", -1)
      end
   end)

   for _, algorithm in ipairs({ "fixed_window", "sliding_window" }) do
      describe("on " .. algorithm, function()
         local period = 0.1

         it("waits for the next window instead of giving up", function()
            for _, lim in ipairs({ cellrate.limiter(2, { period = period, algorithm = algorithm }),
                                   cellrate.keyed(2, { period = period, algorithm = algorithm,
                                                       capacity = 8 }) }) do
               local args = lim:info().capacity and { "k" } or {}
               local admitted, start = 0, socket.gettime()
               for _ = 1, 5 do -- 5 units at 2 a window: three windows
                  local seconds, err = lim:wait(unpack(args))
                  assert.is_nil(err)
                  assert.is_number(seconds)
                  admitted = admitted + 1
               end
               assert.equal(5, admitted)
               -- at least two windows rolled over before the last was admitted
               local elapsed = socket.gettime() - start
               assert.is_true(elapsed >= period * 0.99, tostring(elapsed))
            end
         end)

         it("gives up at once, spending nothing, when the window is too far or never comes", function()
            -- Day-long windows (aligned to the epoch), the next one more than a
            -- minute away: a timeout of 30 s cannot be met.
            local day = 86400
            local to_next = day - socket.gettime() % day
            if to_next < 61 then
               socket.sleep(to_next + 0.1)
            end
            local lim = cellrate.limiter(2, { period = day, algorithm = algorithm })
            assert.equal(0, lim:wait(2))
            local elapsed, result = timed(lim.wait, lim, 1, 30)
            assert.is_nil(result[1])
            assert.equal("timeout", result[2])
            assert.is_true(elapsed < 30) -- it did not sleep (30 s) to find out
            local _, never = timed(lim.wait, lim, 3) -- above the rate: never, whatever the timeout
            assert.is_nil(never[1])
            assert.equal("timeout", never[2])
            local fresh = cellrate.limiter(2, { period = day, algorithm = algorithm })
            assert.is_nil((fresh:wait(3)))
            assert.is_true(fresh:allow(2)) -- the refused waits spent nothing
         end)
      end)
   end

   it("refuses a bad timeout with the core's words, as Python does", function()
      local expected = support.status("E_TIMEOUT")
      for _, lim in ipairs({ cellrate.limiter(10), cellrate.keyed(10, { capacity = 8 }) }) do
         local args = lim:info().capacity and { "k", 1 } or { 1 }
         for _, bad in ipairs({ -1, 0 / 0, "1", true }) do
            args[#args + 1] = bad
            local text = support.raises(expected.param, lim.wait, lim, unpack(args))
            assert.equal(expected.message, text)
            args[#args] = nil
         end
      end
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
