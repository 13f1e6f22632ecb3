-- The Lua face of the fleet shares (cellrate.share) against a real redis-server
-- started here on a free loopback port and killed in teardown (the client:
-- redis-lua, as redis_spec.lua). Heartbeats are driven here, with explicit
-- instants, so each demand is exact.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local support = dofile("tests/lua/support.lua")(assert)

if not support.has_redis then
   describe("cellrate.share", function()
      pending("redis-server is installed by tests/install-deps.sh")
   end)
   return
end

describe("cellrate.share", function()
   local redis_client = require("redis")
   local share = require("cellrate.share")
   local server, client

   setup(function()
      server = support.start_redis(support.free_port())
      client = redis_client.connect("127.0.0.1", server.port)
   end)

   teardown(function()
      support.stop_redis(server)
   end)

   before_each(function()
      client:flushall()
   end)

   -- Each member asks asks[i] units per round of `interval` s, then heartbeats at now.
   local function drive(members, asks, rounds, now, interval)
      for _ = 1, rounds do
         now = now + interval
         for i, member in ipairs(members) do
            for _ = 1, asks[i] do
               member:allow()
            end
         end
         for _, member in ipairs(members) do
            assert.is_true(member:heartbeat(now))
         end
      end
      return now
   end

   it("sends the script the Python package ships, byte for byte", function()
      local file = assert(io.open("redis/share.lua", "rb"))
      assert.equal(file:read("*a"), share.script)
      file:close()
   end)

   it("splits the fleet max-min fairly by demand", function()
      local members = {}
      for i = 1, 3 do
         members[i] = share.limiter(client, 1000, { burst = 100, name = "uneq", interval = 0.2,
                                                    member = "m" .. i })
      end
      -- the first at 10% of the others: 100 units/s asked against 1000/s
      drive(members, { 20, 200, 200 }, 6, 0, 0.2)
      local want = { 0.1, 0.45, 0.45 }
      local sum = 0
      for i, member in ipairs(members) do
         local info = member:info()
         assert.is_true(math.abs(info.share - want[i]) < 1e-9, tostring(info.share))
         assert.is_true(math.abs(info.target - want[i]) < 1e-9)
         assert.equal(3, info.members)
         assert.is_true(math.abs(member.local_limiter:info().rate - 1000 * want[i]) < 1e-6)
         assert.equal(math.floor(100 * info.share), member.local_limiter:info().burst)
         sum = sum + info.share
      end
      assert.is_true(sum <= 1 + 1e-9)
   end)

   it("starts a new member from what is unclaimed, never from zero", function()
      local a = share.limiter(client, 1000, { name = "join", member = "a" })
      assert.is_true(a:heartbeat(0))
      assert.equal(1, a.share)
      local b = share.limiter(client, 1000, { name = "join", member = "b" })
      assert.is_true(b:heartbeat(0))
      assert.equal(1 / (share.FLOOR_DIVISOR * 2), b.share)
      local now = drive({ a, b }, { 2000, 2000 }, 2, 0, 1)
      assert.equal(0.5, a.share)
      assert.equal(0.5, b.share)
      b:leave()
      assert.equal(0, b.share)
      local after = 0
      for _ = 1, 10 do
         after = after + (b:allow() and 1 or 0)
      end
      assert.is_true(after <= 1) -- what it held is a's now
      drive({ a }, { 2000 }, 1, now, 1)
      assert.equal(1, a.share)
   end)

   it("says at once that it applied a share that shrank: the others grow at their next beat",
      function()
      local a = share.limiter(client, 1000, { name = "confirm", member = "a" })
      local b = share.limiter(client, 1000, { name = "confirm", member = "b" })
      assert.is_true(a:heartbeat(0))
      assert.is_true(b:heartbeat(0))
      assert.equal(1 / (share.FLOOR_DIVISOR * 2), b.share)
      drive({ a, b }, { 2000, 2000 }, 1, 0, 1)
      assert.equal(0.5, a.share)
      assert.equal(0.5, b.share) -- a's old share counted no more
      assert.equal(3, select("#", client:hget("cellrate:share:confirm", "a"):match(
         "^(%S+) (%S+) (%S+)$")))
   end)

   it("keeps the last share while Redis does not answer, and rejoins", function()
      local port = server.port
      local lim = share.limiter(client, 1000, { burst = 50, name = "down", member = "x" })
      assert.is_true(lim:heartbeat(0))
      local held = lim:info()
      support.stop_redis(server)
      server = nil
      for now = 1, 3 do
         local ok, err, code = lim:heartbeat(now)
         assert.is_nil(ok)
         assert.is_string(err)
         assert.equal("unavailable", code)
         assert.same(held, lim:info())
      end
      server = support.start_redis(port)
      client = redis_client.connect("127.0.0.1", server.port)
      lim:set_client(client)
      assert.is_true(lim:heartbeat(4))
      assert.equal(held.share, lim.share) -- alone, and quiet: no growth beyond what it held
   end)

   it("refuses a member whose interval or ttl is not the fleet's, which then holds nothing",
      function()
      local a = share.limiter(client, 100, { name = "fixed", interval = 0.5, member = "a" })
      assert.is_true(a:heartbeat(0))
      local cases = {
         { { interval = 0.05, ttl = 0.06 },
           "interval must be that of the fleet (0.5 s, fixed when it was created), not 0.05 s" },
         { { interval = 0.5, ttl = 0.6 },
           "ttl must be that of the fleet (1.5 s, fixed when it was created), not 0.6 s" },
      }
      for i, case in ipairs(cases) do
         local opts = { name = "fixed", member = "x" .. i }
         for k, v in pairs(case[1]) do
            opts[k] = v
         end
         local other = share.limiter(client, 100, opts)
         local ok, err, code = other:heartbeat(0)
         assert.same({ nil, case[2], "refused" }, { ok, err, code })
         assert.equal(0, other.share)
         local admitted = 0
         for _ = 1, 10 do
            admitted = admitted + (other:allow() and 1 or 0)
         end
         assert.is_true(admitted <= 1)
      end
      -- nothing was written for them: a is alone, and keeps all of it
      assert.same({ "a" }, (function()
         local members = {}
         for _, field in ipairs(client:hkeys("cellrate:share:fixed")) do
            if field:sub(1, 1) ~= ":" then
               members[#members + 1] = field
            end
         end
         return members
      end)())
      assert.is_true(a:heartbeat(0.5))
      assert.equal(1, a.share)
   end)

   it("cannot be expired by a raw heartbeat with a ttl of its own", function()
      local honest = {}
      for i = 1, 2 do
         honest[i] = share.limiter(client, 100, { name = "raw", interval = 0.5, member = "h" .. i })
      end
      local now = drive(honest, { 100, 100 }, 3, 0, 0.5)
      local script = share.script
      -- a ttl of 1 us (it dropped every other member), then a shorter ttl of its own
      for _, ttl in ipairs({ "0.000001", "0.6" }) do
         local ok, err = pcall(client.eval, client, script, 1, "cellrate:share:raw", "evil",
                               "1e300", "1", ttl, "0.5", "100", "1e15")
         assert.is_false(ok)
         assert.matches("ttl must be", tostring(err))
      end
      drive(honest, { 100, 100 }, 1, now, 0.5)
      for _, member in ipairs(honest) do
         assert.equal(0.5, member.share)
         assert.equal(2, member.members)
      end
   end)

   it("applies the share at every heartbeat: a limit changed by hand is undone", function()
      local members = {}
      for i = 1, 2 do
         members[i] = share.limiter(client, 100, { burst = 20, name = "hand", member = "h" .. i })
      end
      local now = drive(members, { 100, 100 }, 2, 0, 1)
      local first = members[1]
      assert.equal(0.5, first.share)
      for _ = 1, 3 do -- an unchanged share, heartbeat after heartbeat
         first.local_limiter:reconfigure(100, { burst = 20 })
         assert.equal(100, first.local_limiter:info().rate)
         now = drive(members, { 100, 100 }, 1, now, 1)
         assert.equal(0.5, first.share)
         assert.equal(50, first.local_limiter:info().rate)
         assert.equal(10, first.local_limiter:info().burst)
      end
      -- while Redis does not answer: its last share, never more
      first.local_limiter:reconfigure(100, { burst = 20 })
      first:set_client({ evalsha = function() error("connection refused") end,
                         eval = function() error("connection refused") end,
                         script = function() error("connection refused") end })
      local ok, _, code = first:heartbeat(now + 1)
      assert.same({ nil, "unavailable" }, { ok, code })
      assert.equal(50, first.local_limiter:info().rate)
      assert.equal(10, first.local_limiter:info().burst)
   end)

   it("scales every key of a keyed limit by the share", function()
      local members = {}
      for i = 1, 2 do
         -- per hour: a busy machine's pauses while it decides refill nothing
         members[i] = share.keyed(client, 100, { period = 3600, burst = 40, name = "keyed",
                                                 member = "k" .. i, capacity = 64 })
      end
      drive(members, { 0, 0 }, 3, 0, 1) -- the second's first demand is unknown (as much as
      -- it may) until its second heartbeat: three rounds to the equal split
      assert.equal(0.5, members[1].share)
      assert.equal(0.5, members[2].share)
      local admitted = 0
      for _, member in ipairs(members) do
         for _ = 1, 100 do
            if member:allow("k") then
               admitted = admitted + 1
            end
         end
      end
      assert.equal(40, admitted) -- each member: burst 20 of key k
   end)

   it("takes the demand from the local limiter's counters: a region's, every opener's",
      function()
      local path = support.fresh_path("share")
      local host = share.limiter(client, 1000, { burst = 100, name = "host", member = "h",
                                                 interval = 1, shared = path })
      assert.is_true(host:heartbeat(0))
      -- another worker of the host: the same region, opened with the same limit
      local local_info = host.local_limiter:info()
      local other = require("cellrate").limiter(local_info.rate, { burst = local_info.burst,
                                                                    shared = path })
      for _ = 1, 30 do
         other:allow()
      end
      for _ = 1, 10 do
         host:allow()
      end
      host:peek(1) -- counts nothing
      assert.is_true(host:heartbeat(2))
      local demand = client:hget("cellrate:share:host", "h"):match("^%S+ (%S+)")
      assert.equal(40 / 2 / 1000, tonumber(demand))
      other:close()
      host.local_limiter:close()
      os.remove(path)
   end)

   it("counts refunded units out of the demand", function()
      -- a slow limit (per hour): nothing refills meanwhile
      local lim = share.limiter(client, 1000, { period = 3600, burst = 200, name = "refunds",
                                                member = "r" })
      assert.is_true(lim:heartbeat(0))
      assert.is_true(lim:check(100))
      lim.local_limiter:refund(90) -- the estimate was 100, 10 were used
      assert.is_true(lim:heartbeat(3600))
      local demand = client:hget("cellrate:share:refunds", "r"):match("^%S+ (%S+)")
      assert.equal(10 / 3600 / (1000 / 3600), tonumber(demand))
   end)

   -- A client whose every script call answers `reply`.
   local function answering(reply)
      return { evalsha = function() return reply end, eval = function() return reply end,
               script = function() return "sha" end }
   end

   it("keeps the last share on a reply that is not the script's", function()
      local lim = share.limiter(client, 1000, { burst = 100, name = "garbled", member = "g" })
      assert.is_true(lim:heartbeat(0))
      assert.equal(1, lim.share)
      local said = "the heartbeat's reply is not the share script's"
      for _, reply in ipairs({ { "most", 1, "0.5" }, { "1.5", 1, "1" }, { "0.5", 0, "0.5" },
                               "OK", { "0.5", 1 } }) do
         lim.local_limiter:reconfigure(5000, { burst = 500 }) -- changed by hand
         lim:set_client(answering(reply))
         local ok, err, code = lim:heartbeat(1)
         assert.same({ nil, "unavailable" }, { ok, code })
         assert.equal(said, err:sub(1, #said))
         assert.equal(1, lim.share)
         assert.equal(1000, lim.local_limiter:info().rate)
         assert.equal(100, lim.local_limiter:info().burst)
      end
   end)

   it("applies every share of a fleet near the ceilings as a limit", function()
      -- T = 1 ns, tau = 2^62: a share rounds T up, and floor(burst * share) would not
      -- fit beside it; the local burst is what fits
      local lim = share.limiter(nil, 1e9, { burst = 2 ^ 62, name = "ceiling", member = "c" })
      for _, case in ipairs({ { "0.4", 1537228672809129301 }, { "0.9", 4150517416584649216 } }) do
         lim:set_client(answering({ case[1], 2, case[1] }))
         assert.is_true(lim:heartbeat(1))
         assert.equal(tonumber(case[1]), lim.share)
         assert.equal(case[2], lim.local_limiter:info().burst)
      end
   end)

   it("never runs faster than a fleet slower than the slowest share", function()
      local lim = share.limiter(client, 1, { period = 2 ^ 62 / 1e9, name = "slowest",
                                             member = "s" })
      assert.is_true(lim:heartbeat(0))
      assert.equal(1, lim.local_limiter:info().rate)
      lim:leave()
      assert.equal(1, lim.local_limiter:info().rate) -- nothing held: still the fleet's
   end)

   it("heartbeats only once given a client, and applies its first answer", function()
      local later = share.limiter(nil, 1000, { name = "later", member = "l" })
      local ok, err, code = later:heartbeat(0)
      assert.same({ nil, "unavailable" }, { ok, code })
      assert.matches("set_client", err)
      later:set_client(client)
      assert.is_true(later:heartbeat(1))
      assert.equal(1, later.share)
      assert.equal(1000, later.local_limiter:info().rate)
   end)

   it("runs through a client that answers an error reply with false (lua-resty-redis)",
      function()
      -- lua-resty-redis answers an error reply with false and its text, where
      -- redis-lua raises: after SCRIPT FLUSH the NOSCRIPT is seen and EVAL sent
      local resty = {}
      for _, method in ipairs({ "evalsha", "eval", "script" }) do
         resty[method] = function(_, ...)
            local ok, reply = pcall(client[method], client, ...)
            if ok then
               return reply
            end
            return false, (tostring(reply):gsub("^[^\n]-:%d+: ", "", 1)
                                          :gsub("^redis error: ", "", 1))
         end
      end
      local lim = share.limiter(resty, 1000, { name = "resty", member = "r" })
      assert.is_true(lim:heartbeat(0))
      client:script("flush")
      assert.is_true(lim:heartbeat(1))
      assert.equal(1, lim.share)
   end)

   it("gives the local limiter its own options, and refuses every other", function()
      for _, clock in ipairs({ "monotonic", "fast" }) do
         assert.equal(clock, share.limiter(nil, 100, { name = "n", clock = clock })
                                .local_limiter:info().clock)
         local keyed = share.keyed(nil, 100, { name = "n", clock = clock, capacity = 64 })
         assert.equal(clock, keyed.local_limiter:info().clock)
         assert.equal(64, keyed.local_limiter:info().capacity)
      end
      -- the core's words for an option no limiter takes, at the caller
      for _, case in ipairs({ { "foo", { name = "n", foo = 1 } },
                              { "capacity", { name = "n", capacity = 64 } },
                              { "background", { name = "n", background = false } },
                              { "on_error", { name = "n", on_error = "deny" } } }) do
         local ok, err = pcall(share.limiter, nil, 100, case[2])
         assert.is_false(ok)
         assert.equal(("unknown option '%s'"):format(case[1]), err:gsub("^[^\n]-:%d+: ", "", 1))
         assert.is_nil(err:find("cellrate/share.lua", 1, true), err)
      end
      local ok, err = pcall(share.limiter, nil, 100, { name = "n", clocks = "fast" })
      assert.is_false(ok)
      assert.truthy(err:find("unknown option 'clocks' (did you mean 'clock'?)", 1, true), err)
      -- a region that cannot be opened: nil, the core's words and its code, as cellrate.limiter
      local lim, said, code = share.limiter(nil, 100, { name = "n", shared = "/nonexistent/r" })
      assert.is_nil(lim)
      assert.equal("E_SHARED_IO", code)
      assert.equal("shared: ", said:sub(1, 8))
   end)

   it("names the parameter of a mistake", function()
      local cases = {
         { "interval", { name = "n", interval = 0 } },
         { "interval", { name = "n", interval = "1" } },
         { "ttl", { name = "n", ttl = 0.5 } },
         { "name", { name = "a:b" } },
         { "name", {} },
         { "member", { name = "n", member = "a:b" } },
         { "member", { name = "n", member = 3 } },
         { "prefix", { name = "n", prefix = 3 } },
         { "max_cost", { name = "n", max_cost = 3 } },
         { "algorithm", { name = "n", algorithm = "gcra" } },
         { "on_change", { name = "n", on_change = "apply" } },
         { "timeout", { name = "n", timeout = -1 } },
         { "shared_mode", { name = "n", shared_mode = 384 } },
         { "clock", { name = "n", clock = "bogus" } },
      }
      for _, case in ipairs(cases) do
         support.raises(case[1], share.limiter, client, 100, case[2])
      end
      support.raises("rate", share.limiter, client, 0, { name = "n" })
      support.raises("client", share.limiter, {}, 100, { name = "n" })
      support.raises("client", share.limiter(nil, 100, { name = "n" }).set_client,
                     share.limiter(nil, 100, { name = "n" }), {})
      support.raises("burst", share.keyed, client, 100, { name = "n", burst = 0 })
      -- the core's words, the Python face's too (tests/vectors/options.txt)
      local said = {
         { "interval must be a finite number of seconds > 0", { name = "n", interval = 0 } },
         { "on_change is not taken by a share store: its local limiter follows the share",
           { name = "n", on_change = "apply" } },
         { "ttl must be longer than interval", { name = "n", ttl = 1 } },
         { "member must be a non-empty string without a colon", { name = "n", member = "" } },
         { "member must be a non-empty string without a colon", { name = "n", member = 3 } },
         { "ttl must be a finite number of seconds > 0", { name = "n", ttl = -1 } },
         { "ttl must be a finite number of seconds > 0", { name = "n", ttl = "3" } },
         { "on_change is not taken by a share store: its local limiter follows the share",
           { name = "n", on_change = "refuse" } },
      }
      for _, case in ipairs(said) do
         local text = support.raises(case[1], share.limiter, client, 100, case[2])
         assert.equal(case[1], text)
      end
   end)
end)
