-- on_error = "fallback" in the Lua face, against a real redis-server on a free
-- loopback port, killed and started again empty on the same port: every
-- admission from the kill on is counted against the limit's bound, burst +
-- (t - kill) * rate at each admission's instant t (an explicit now: the count
-- does not depend on the machine's speed). A fresh Redis burst on the way back
-- would pass it by a burst.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local cellrate = require("cellrate")
local socket = require("socket")
local support = dofile("tests/lua/support.lua")(assert)

if not support.has_redis then
   describe("cellrate.redis fallback", function()
      pending("redis-server is installed by tests/install-deps.sh")
   end)
   return
end

describe("cellrate.redis fallback", function()
   local redis_client = require("redis")
   local store_module = require("cellrate.redis")
   local server

   after_each(function()
      support.stop_redis(server)
   end)

   -- allow() at now from `from` to `to` (step 0.01 s); the instants admitted
   local function run(rl, from, to, admitted)
      for i = 0, math.floor((to - from) * 100 + 0.5) - 1 do
         local now = from + i / 100
         if rl:allow("k", 1, now) then
            admitted[#admitted + 1] = now
         end
      end
   end

   local function worst_excess(admitted, since, burst, rate)
      local worst, count = -burst, 0
      for _, t in ipairs(admitted) do
         if t >= since then
            count = count + 1
            worst = math.max(worst, count - (burst + rate * (t - since)))
         end
      end
      return worst
   end

   for _, share in ipairs({ 1, 0.5 }) do
      it("holds every admission across an outage to the bound (share " .. share .. ")", function()
         local rate, burst = 20, 20
         server = support.start_redis(support.free_port())
         local rl = store_module.limiter(redis_client.connect("127.0.0.1", server.port), rate,
                                         { burst = burst, name = "fb", on_error = "fallback",
                                           fallback = share })
         assert.equal(burst * share, rl.fallback_limit.burst)
         local admitted = {}
         run(rl, 1000, 1001, admitted) -- Redis decides
         support.stop_redis(server)
         run(rl, 1001, 1003, admitted) -- the fallback
         assert.is_not_nil(rl.gate)
         server = support.start_redis(server.port) -- empty
         rl:set_client(redis_client.connect("127.0.0.1", server.port))
         local now = 1003
         while rl.gate do -- the gate lets one call per back-off try Redis
            if rl:allow("k", 1, now) then
               admitted[#admitted + 1] = now
            end
            now = now + 0.01
            socket.sleep(0.01)
         end
         run(rl, now, now + 2, admitted)
         assert.equal(0, rl.nheld)
         local during = 0
         for _, t in ipairs(admitted) do
            if t >= 1001 and t < 1003 then
               during = during + 1
            end
         end
         assert.is_true(during >= burst * share)
         assert.is_true(during <= burst * share + rate * share * 2 + 1)
         if share == 1 then
            assert.is_true(worst_excess(admitted, 1001, burst, rate) <= 1)
         else
            -- the way back: Redis's rate, and its burst less what the fallback held
            local total = 0
            for _, t in ipairs(admitted) do
               if t >= 1001 then
                  total = total + 1
               end
            end
            assert.is_true(total <= burst + rate * share * 2 + rate * (now + 2 - 1003) + 1)
         end
      end)
   end

   it("goes back with a charge of what the fallback used", function()
      server = support.start_redis(support.free_port())
      local rl = store_module.limiter(redis_client.connect("127.0.0.1", server.port), 10,
                                      { burst = 10, name = "fb", on_error = "fallback" })
      rl:set_client({ evalsha = function() error("closed") end, eval = error,
                      script = function() error("closed") end })
      local answers = {}
      for i = 1, 12 do
         answers[i] = rl:allow("k", 1, 50)
      end
      assert.same({ true, true, true, true, true, true, true, true, true, true, false, false },
                  answers)
      assert.is_true(rl:peek("other", 1, 50)) -- a peek holds no key
      assert.equal(1, rl.nheld)
      rl:set_client(redis_client.connect("127.0.0.1", server.port))
      rl.gate = nil -- Redis answers again
      assert.is_false((rl:check("k", 1, 50))) -- 10 owed + 1: charged into debt
      assert.equal(0, rl.nheld)
      assert.is_false((rl:check("k", 1, 50)))
      local allowed, remaining = rl:check("fresh", 1, 50)
      assert.is_true(allowed)
      assert.equal(9, remaining)
   end)

   -- Every operation that writes a key settles a held one first: a take, a
   -- refund, check_all and check_many cannot carry the units, so the charge of
   -- what the fallback used goes first (the core's rule). Without it Redis,
   -- which never saw the outage, handed out a fresh burst.
   it("settles a held key whatever its first operation after the outage", function()
      server = support.start_redis(support.free_port())
      local names = { "take", "refund", "check_all", "many", "many_all", "other" }
      local stores, client = {}, redis_client.connect("127.0.0.1", server.port)
      for _, name in ipairs(names) do
         stores[name] = store_module.limiter(client, 10, { period = 3600, burst = 10,
                                                           name = name, on_error = "fallback" })
      end
      support.stop_redis(server) -- SIGKILL
      for _, name in ipairs(names) do
         for i = 1, 11 do
            assert.equal(i <= 10, stores[name]:allow("k", 1, 50))
         end
         assert.equal(1, stores[name].nheld)
      end
      server = support.start_redis(server.port) -- empty
      client = redis_client.connect("127.0.0.1", server.port)
      for _, name in ipairs(names) do
         stores[name]:set_client(client)
      end
      socket.sleep(1.1) -- the longest back-off: each gate lets its next call try Redis
      assert.equal(0, stores.take:take("k", 5, 50))
      assert.is_true(stores.refund:refund("k", 3, 50)) -- after the 10 used: 3 come back
      local _, remaining = stores.refund:peek("k", 1, 50)
      assert.equal(2, remaining) -- (a peek of 1 unit)
      assert.is_false((store_module.check_all({ { stores.check_all, "k" } }, 1, 50)))
      local answers = store_module.check_many({ { stores.many, "k" }, { stores.many, "j" },
                                                { { { stores.many_all, "k" },
                                                    { stores.other, "k" } }, 1 } }, 50)
      assert.same({ false, true, false }, { answers[1][1], answers[2][1], answers[3][1] })
      for _, name in ipairs(names) do
         assert.equal(0, stores[name].nheld, name)
      end
   end)

   it("derives a share's fallback from the limit reconfigure gives", function()
      local dead = { evalsha = function() error("closed") end, eval = error,
                     script = function() error("closed") end }
      local share = store_module.limiter(dead, 10, { period = 3600, burst = 10, name = "s",
                                                     on_error = "fallback", fallback = 0.5 })
      local given = store_module.limiter(dead, 10, { period = 3600, burst = 10, name = "g",
                                                     on_error = "fallback", fallback = "4/h" })
      share:reconfigure(40, { period = 3600, burst = 40 })
      given:reconfigure(40, { period = 3600, burst = 40 })
      assert.same({ 20, 4 }, { share.fallback_limit.burst, given.fallback_limit.burst })
      local admitted = { 0, 0 }
      for _ = 1, 30 do
         admitted[1] = admitted[1] + (share:allow("k", 1, 9) and 1 or 0)
         admitted[2] = admitted[2] + (given:allow("k", 1, 9) and 1 or 0)
      end
      assert.same({ 20, 4 }, admitted)
   end)

   -- Two limiters (two processes' worth) of 10 an hour, whose fallback is
   -- one region.
   local function two_processes(port, region)
      local client = redis_client.connect("127.0.0.1", port)
      local stores = {}
      for i = 1, 2 do
         stores[i] = store_module.limiter(client, 10, {
            period = 3600, burst = 10, name = "fb", on_error = "fallback",
            fallback = cellrate.keyed(10, { period = 3600, burst = 10, shared = region }) })
      end
      return stores
   end

   -- The processes of one region go back together: one finding Redis back
   -- marks the region (core.BACK_KEY), and another held back by a long
   -- back-off tries Redis at its next call instead of deciding locally.
   it("goes back on a region's mark, not each process at its own probe", function()
      server = support.start_redis(support.free_port())
      local region = os.tmpname()
      os.remove(region)
      local stores = two_processes(server.port, region)
      local first, other = stores[1], stores[2]
      support.stop_redis(server) -- SIGKILL
      assert.is_true(first:allow("k"))
      assert.is_true(other:allow("k"))
      other.gate = cellrate.limiter(1, { period = 3600, burst = 1 }) -- a long back-off
      other.gate:allow()
      server = support.start_redis(server.port)
      local client = redis_client.connect("127.0.0.1", server.port)
      first:set_client(client)
      other:set_client(client)
      socket.sleep(0.1) -- first's back-off (50 ms)
      assert.is_true(first:allow("j"))
      assert.is_nil(first.gate) -- first found Redis back, and marked the region
      assert.is_not_nil(other.gate)
      assert.is_true(other:allow("j"))
      assert.is_nil(other.gate) -- other went back at its next call
      local _, remaining = first:peek("j", 1)
      assert.equal(7, remaining) -- Redis decided both
      os.remove(region)
   end)

   -- A region's use goes back to Redis once: the first process to go back
   -- charges it and gives it back to the region, so the second sends nothing
   -- more (its key waits what 10 units of an hour and the first's refused unit
   -- owe, not twice that).
   it("sends a region's use to Redis once, whichever processes held the key", function()
      server = support.start_redis(support.free_port())
      local region = os.tmpname()
      os.remove(region)
      local stores = two_processes(server.port, region)
      support.stop_redis(server) -- SIGKILL
      local admitted = 0
      for _ = 1, 6 do
         for i = 1, 2 do
            admitted = admitted + (stores[i]:allow("k") and 1 or 0)
         end
      end
      assert.equal(10, admitted)
      server = support.start_redis(server.port)
      local client = redis_client.connect("127.0.0.1", server.port)
      for i = 1, 2 do
         stores[i]:set_client(client)
         stores[i].gate = nil -- each process's probe has found Redis
      end
      local allowed, _, _, reset_after = stores[1]:check("k")
      assert.is_false(allowed)
      assert.is_true(math.abs(reset_after - 11 * 360) < 2, reset_after)
      allowed, _, _, reset_after = stores[2]:check("k")
      assert.is_false(allowed)
      assert.is_true(math.abs(reset_after - 11 * 360) < 2, reset_after)
      assert.same({ 0, 0 }, { stores[1].nheld, stores[2].nheld })
      os.remove(region)
   end)

   -- A mark read opens the gate for every call of the process, not one try:
   -- another request of the process (an nginx coroutine) made while the try is
   -- in flight asks Redis too, rather than deciding locally on what the first
   -- process back gave back to the region.
   it("opens the gate for every call once the region's mark changed", function()
      local region = os.tmpname()
      os.remove(region)
      local tries, limiter = 0, nil
      local function closed()
         error("closed")
      end
      local function try() -- a call that reached the client (loading the script or not)
         tries = tries + 1
         if tries == 2 then -- the try the mark opened: another request meanwhile
            limiter:allow("k2")
         end
         error("closed")
      end
      local client = { script = try, eval = closed, evalsha = try }
      limiter = store_module.limiter(client, 10, {
         period = 3600, burst = 10, name = "fb", on_error = "fallback",
         fallback = cellrate.keyed(10, { period = 3600, burst = 10, shared = region }) })
      assert.is_true(limiter:allow("k")) -- the outage begins: decided by the region
      limiter.gate = cellrate.limiter(1, { period = 3600, burst = 1 }) -- a long back-off
      limiter.gate:allow()
      assert.is_true(limiter:allow("k"))
      local sent = tries
      limiter.fallback:charge(cellrate._redis_protocol().BACK_KEY, 1) -- another process back
      assert.is_true(limiter:allow("k"))
      assert.equal(sent + 2, tries) -- the try, and the other request's
      os.remove(region)
   end)

   it("takes a keyed limiter (one region: the host's fallback) and check_all's", function()
      local dead = { evalsha = function() error("closed") end, eval = error,
                     script = function() error("closed") end }
      local region = os.tmpname()
      os.remove(region)
      local stores = {}
      for i = 1, 2 do
         stores[i] = store_module.limiter(dead, 100, { name = "fb", on_error = "fallback",
                                                       fallback = cellrate.keyed(5, {
                                                          burst = 5, shared = region }) })
      end
      local admitted = 0
      for _ = 1, 10 do
         for i = 1, 2 do
            if stores[i]:allow("k") then
               admitted = admitted + 1
            end
         end
      end
      os.remove(region)
      assert.equal(5, admitted)
      local a = store_module.limiter(dead, 10, { burst = 3, name = "a", on_error = "fallback" })
      local b = store_module.limiter(dead, 10, { burst = 2, name = "b", on_error = "fallback" })
      local answers = {}
      for i = 1, 4 do
         answers[i] = (store_module.check_all({ { a, "k" }, { b, "k" } }, 1, 7))
      end
      assert.same({ true, true, false, false }, answers)
   end)

   it("judges fallback in the core's words", function()
      local dead = { evalsha = error, eval = error, script = error }
      local function message(opts)
         local ok, err = pcall(store_module.limiter, dead, 10, opts)
         assert.is_false(ok)
         return err
      end
      assert.matches("^[^\n]*fallback is the limit of on_error",
                     message({ fallback = 0.5 }))
      for _, share in ipairs({ 0, 1.5, -1, 0 / 0, {} }) do
         assert.matches("fallback must be a share", message({ on_error = "fallback",
                                                             fallback = share }))
      end
      assert.matches("on_error must be 'allow', 'deny', 'raise' or 'fallback'",
                     message({ on_error = "local" }))
      local rl = store_module.limiter(dead, 10, { burst = 7, on_error = "fallback",
                                                  fallback = "2/s" })
      assert.equal(2, rl.fallback_limit.burst)
      local window = store_module.limiter(dead, 10, { algorithm = "fixed_window",
                                                      on_error = "fallback", fallback = 0.25 })
      assert.equal(2, window.fallback_limit.rate)
   end)
end)
