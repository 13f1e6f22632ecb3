-- Calendar quotas through the Lua face of the Redis store (cellrate.redis,
-- docs/calendar.md): tests/vectors/calendar.txt (from Python's zoneinfo)
-- through the script, each decision the same as the in-process keyed
-- limiter's, a live change of zone, a year's quota, against a redis-server
-- started here.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local VECTORS = here .. "../vectors/"


support.describe_redis("cellrate.redis calendar", function(redis)
   local store_module = redis.store

   local function pair(rate, tz, name, opts)
      opts = opts or {}
      local store = store_module.limiter(redis.client, rate, { algorithm = "calendar", tz = tz,
         name = name, max_debt = opts.max_debt })
      local keyed = cellrate.keyed(rate, { algorithm = "calendar", tz = tz,
         max_debt = opts.max_debt })
      return store, keyed
   end

   it("decides at every exact bounds line of calendar.txt as in process", function()
      local stores, checked, n = {}, 0, 0
      for zone, period, now_s, start, stop, line in
         support.calendar_bounds(VECTORS .. "calendar.txt") do
         local rate = "2/" .. period
         local id = zone .. " " .. rate
         if not stores[id] then
            n = n + 1
            stores[id] = { pair(rate, zone, "v" .. n) }
         end
         local store, keyed = stores[id][1], stores[id][2]
         checked = checked + 1
         local key = "k" .. checked
         local got = support.pack(store:check(key, 1, now_s))
         local want = support.pack(keyed:check(key, 1, now_s))
         assert.are.same(want, got, line)
         assert.are.equal(stop - now_s, got[4], line)
         assert.is_true(start <= now_s)
      end
      assert.is_true(checked > 5000)
   end)

   it("charges, refunds, takes and peeks as in process, across a month of 23-hour day", function()
      local store, keyed = pair("7/month", "Europe/Berlin", "d", { max_debt = 3 })
      local now = 1614553200 - 3 * 86400 -- three days before March 2021 in Berlin
      local seed = 12345
      local function random(n) -- a small LCG: the same run under 5.4 and LuaJIT
         seed = (seed * 1103515245 + 12345) % 2147483648
         return seed % n
      end
      local ops = { "check", "peek", "charge", "take", "refund" }
      for step = 1, 200 do
         now = now + random(40000)
         local op, key, cost = ops[random(#ops) + 1], random(2) == 0 and "a" or "b", random(5)
         local got, want
         if op == "refund" then
            store:refund(key, cost, now)
            keyed:refund(key, cost, now)
            got = support.pack(store:peek(key, 0, now))
            want = support.pack(keyed:peek(key, 0, now))
         else
            got = support.pack(store[op](store, key, cost, now))
            want = support.pack(keyed[op](keyed, key, cost, now))
         end
         assert.are.same(want, got, ("step %d %s %s %d at %.1f"):format(step, op, key, cost, now))
      end
   end)

   it("carries a count to another zone as in process, keeping tz unless given", function()
      local store, keyed = pair("10/month", "Europe/Berlin", "live")
      local now = 1614553200 + 86400
      assert.are.same({ keyed:check("a", 6, now) }, { store:check("a", 6, now) })
      store:reconfigure("10/month", { tz = "America/New_York" })
      keyed:reconfigure("10/month", { tz = "America/New_York" }, now)
      assert.are.equal("America/New_York", store.tz)
      assert.are.same({ keyed:peek("a", 0, now) }, { store:peek("a", 0, now) })
      store:reconfigure("4/month")
      keyed:reconfigure("4/month", nil, now)
      assert.are.equal("America/New_York", store.tz)
      assert.are.same({ keyed:check("a", 1, now) }, { store:check("a", 1, now) })
   end)

   it("refuses a local fallback, naming on_error", function()
      support.raises("on_error", store_module.limiter, redis.client, "10/month",
         { algorithm = "calendar", tz = "Europe/Berlin", on_error = "fallback" })
   end)

   it("keeps a year's quota on the server's clock until the year's end", function()
      local store = store_module.limiter(redis.client, "1000/year",
         { algorithm = "calendar", tz = "Asia/Kolkata", name = "y" })
      local allowed, remaining, _, reset_after = store:check("k", 3)
      assert.is_true(allowed)
      assert.are.equal(997, remaining)
      local _, stop = cellrate.calendar_period("Asia/Kolkata", "year")
      local ttl = tonumber(redis.client:pttl(store:redis_key("k"))) / 1000
      assert.is_true(math.abs(ttl - reset_after) < 60 and ttl <= stop - os.time() + 60)
      assert.is_true(reset_after > 104 * 86400 or stop - os.time() <= 104 * 86400)
   end)
end)
