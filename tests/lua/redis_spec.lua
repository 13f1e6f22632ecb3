-- The Lua face of the Redis store (cellrate.redis) against a real
-- redis-server started here on a free loopback port and killed in teardown.
-- The client is Debian's redis-lua; its one source serves every Lua version,
-- but the package installs it for 5.1 to 5.3 only, so 5.4 borrows 5.3's copy.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local cellrate = require("cellrate")
local socket = require("socket")
local support = dofile("tests/lua/support.lua")(assert)
local start_server, stop_server = support.start_redis, support.stop_redis
local free_port = support.free_port

support.describe_redis("cellrate.redis", function(redis)
   local store_module = redis.store

   it("sends the script the Python package ships, byte for byte", function()
      local file = assert(io.open("redis/decide.lua", "rb"))
      assert.equal(file:read("*a"), store_module.script)
      file:close()
   end)

   it("converts now to ns as the core does (tests/vectors/seconds.txt)", function()
      local compared = 0
      for line in io.lines("tests/vectors/seconds.txt") do
         local seconds, ns = line:match("^seconds (%S+) OK (%d+)$")
         if seconds then
            assert.equal(ns, cellrate._check_request("", 0, tonumber(seconds)), line)
            compared = compared + 1
         end
      end
      assert.is_true(compared >= 20)
   end)

   it("decides as the core, exactly, over 10^4 random operations", function()
      math.randomseed(11)
      local ops = 0
      local rates = { 1, 3, 7, 10, 100, 0.5, 2.5, 1000 }
      local bursts = { false, 1, 2, 5, 50 }
      local periods = { false, 1, 0.3, 60 }
      local algorithms = { "gcra", "token_bucket", "fixed_window", "sliding_window" }
      local seen = {}
      while ops < 10000 or #seen < 4 do
         local algorithm = algorithms[#seen < 4 and #seen + 1 or math.random(4)]
         local window = algorithm:find("window") ~= nil
         local rate = rates[math.random(#rates)]
         if window then
            rate = math.ceil(rate)
         end
         local opts = { burst = not window and bursts[math.random(#bursts)] or nil,
                        period = periods[math.random(#periods)] or nil, algorithm = algorithm }
         if #seen < 4 then
            seen[#seen + 1] = algorithm
         end
         opts.prefix = "seq" .. ops .. ":"
         opts.on_error = "raise"
         local store = store_module.limiter(redis.client, rate, opts)
         local core = cellrate.keyed(rate, { burst = opts.burst, period = opts.period,
                                             algorithm = algorithm })
         local info = core:info()
         local T = info.emission_ns / 1e9
         local now = math.random() * 1e6
         for _ = 1, math.random(20, 200) do
            local step = math.random()
            if step < 0.3 then
               now = now + math.random() * T
            elseif step < 0.6 then
               now = now + math.random() * 2 * info.burst * T
            elseif step < 0.65 then
               now = math.max(0, now - math.random() * 0.1)
            end
            local key = "k" .. math.random(3)
            local costs = { 0, 1, 1, 1, 2, info.burst, info.burst + 1 }
            local cost = costs[math.random(#costs)]
            local kind = math.random()
            if kind < 0.05 then
               assert.is_true(store:reset(key))
               core:reset(key)
            else
               local method = kind < 0.25 and "peek" or "check"
               local a = { store[method](store, key, cost, now) }
               local b = { core[method](core, key, cost, now) }
               assert.same(b, a)
               ops = ops + 1
            end
         end
      end
   end)

   -- The shared vectors through this face, each live change by store:reconfigure
   -- and a probe at its instant (the script carries the key then), every
   -- decision and every stored state compared; a reservation's state is
   -- written as a bare word (the layout before names: read under the limit
   -- sent). A time, cost or limit this Lua cannot pass exactly, or a limit
   -- the store refuses (a tolerance of 9e15 ns or more), ends its sequence.
   it("replays tests/vectors/decisions.txt, live changes, charges and takes included", function()
      local function seconds(text) -- gcra_model.float_face_seconds
         local ns = tonumber(text)
         if ns < 2 ^ 50 then return ns / 1e9 end
         local fraction = tonumber(text:sub(-9))
         return fraction % 1953125 == 0 and tonumber(text:sub(1, -10)) + fraction / 1e9 or nil
      end
      local function exact(text) -- an integer this Lua carries exactly
         local value = tonumber(text)
         return ("%.0f"):format(value) == text and value < 2 ^ 53 and value or nil
      end
      local function limit(algorithm, first, second) -- rate, opts of a vector's limit
         local period, count = seconds(first), exact(second)
         local window = algorithm:find("window") ~= nil
         local tolerance = window and tonumber(first) or tonumber(first) * tonumber(second)
         if not period or not count or tolerance >= store_module.MAX_TOLERANCE_NS then return nil end
         if window then return count, { period = period } end
         return 1, { period = period, burst = count }
      end
      local function state(store)
         local value = redis.client:get(store:redis_key("v"))
         return value and value:match("(%d+)$") or "0"
      end
      local counts, mismatches = { ops = 0, changes = 0, charges = 0, takes = 0 }, {}
      local function mismatch(line, what)
         mismatches[#mismatches + 1] = ("decisions.txt:%d: %s"):format(line, what)
      end
      local store, stopped = nil, true
      local function start(name, first, second, max_debt)
         redis.client:del("cellrate:vectors:v")
         local rate, opts = limit(name, first, second)
         stopped, store = rate == nil or (max_debt and not exact(max_debt)), nil
         if not stopped then
            opts.algorithm, opts.name, opts.on_error = name, "vectors", "raise"
            opts.max_debt = max_debt and exact(max_debt)
            store = store_module.limiter(redis.client, rate, opts)
            stopped = store.limit.tolerance_ns ~= (name:find("window") and tonumber(first)
                                                   or tonumber(first) * tonumber(second))
         end
      end
      local lines = {}
      for text in io.lines("tests/vectors/decisions.txt") do
         lines[#lines + 1] = text
      end
      for _, name in ipairs({ "token_bucket", "gcra", "fixed_window", "sliding_window" }) do
         for number, text in ipairs(lines) do
            local w = {}
            for word in text:gmatch("%S+") do w[#w + 1] = word end
            if w[1] == "limit" or w[1] == "window" then
               local this = w[1] == "limit" and (name:find("window") and "" or name) or w[2]
               local first = w[1] == "limit" and 2 or 3
               stopped = true
               -- a max_debt of its own: a last word more
               if this == name then
                  start(name, w[first], w[first + 1], w[first + 2])
               end
            elseif not (stopped or w[1] == nil or w[1]:sub(1, 1) == "#") then
               -- (a comment, or a line of another algorithm's or an ended sequence: passed)
               if w[1] == "reset" then
                  store:reset("v")
               elseif w[1] == "charge" and not name:find("window")
                     and tonumber(w[10]) - tonumber(w[2]) > store_module.MAX_DEBT_NS then
                  -- past the script's ceiling (the core's is further): its own test
                  stopped = true
               elseif w[1] == "reserve" then
                  redis.client:set(store:redis_key("v"), w[7])
               else
                  local now, cost = seconds(w[2]), exact(w[3])
                  if not now or (not cost and w[1] ~= "reconfigure") then
                     stopped = true
                  elseif w[1] == "refund" then
                     assert(store:refund("v", cost, now))
                     if state(store) ~= w[5] then mismatch(number, "refund left " .. state(store)) end
                  elseif w[1] == "charge" then
                     local allowed, remaining, retry_after, reset_after, clipped =
                        store:charge("v", cost, now)
                     if allowed ~= (w[4] == "1") or remaining ~= tonumber(w[5])
                           or retry_after ~= tonumber(w[6]) / 1e9 or reset_after ~= tonumber(w[7]) / 1e9
                           or clipped ~= (w[8] == "1") or state(store) ~= w[10] then
                        mismatch(number, ("charge: got %s %s %.17g %.17g %s, state %s"):format(
                           tostring(allowed), tostring(remaining), retry_after, reset_after,
                           tostring(clipped), state(store)))
                     end
                     counts.charges = counts.charges + 1
                  elseif w[1] == "take" then
                     local taken = store:take("v", cost, now)
                     if taken ~= tonumber(w[4]) or state(store) ~= w[5] then
                        mismatch(number, ("take: got %s, state %s"):format(tostring(taken), state(store)))
                     end
                     counts.takes = counts.takes + 1
                  elseif w[1] == "reconfigure" then
                     local rate, opts = limit(name, w[3], w[4])
                     if not rate then
                        stopped = true
                     else
                        store:reconfigure(rate, opts)
                        store:check("v", 0, now)
                        counts.changes = counts.changes + 1
                        if state(store) ~= w[5] then mismatch(number, "carried " .. state(store)) end
                     end
                  else
                     local allowed, remaining, retry_after, reset_after =
                        (w[4] == "1" and store.check or store.peek)(store, "v", cost, now)
                     local want_retry = w[7] == "9223372036854775807" and math.huge or tonumber(w[7]) / 1e9
                     if allowed ~= (w[5] == "1") or remaining ~= tonumber(w[6])
                           or retry_after ~= want_retry or reset_after ~= tonumber(w[8]) / 1e9
                           or state(store) ~= w[9] then
                        mismatch(number, ("got %s %s %.17g %.17g, state %s"):format(tostring(allowed),
                           tostring(remaining), retry_after, reset_after, state(store)))
                     end
                     counts.ops = counts.ops + 1
                  end
               end
            end
         end
      end
      print(("\ncellrate.redis vectors (%s): %d ops, %d live changes, %d charges, %d takes"):format(
         jit and jit.version or _VERSION, counts.ops, counts.changes, counts.charges, counts.takes))
      assert.equal(0, #mismatches, table.concat(mismatches, "\n", 1, math.min(#mismatches, 12)))
      assert.is_true(counts.ops > 20000 and counts.changes > 1000)
      assert.is_true(counts.charges > 600 and counts.takes > 400) -- (a max_debt of its own: left out)
   end)

   -- Costs known after the fact: the script's debt bound (the core's default
   -- max_debt, one burst beyond the limit, and a gcra TAT at most MAX_DEBT_NS
   -- after now), clipped the fifth value as in process, and take's count.
   it("charges into debt up to the script's bound and takes what fits", function()
      local store = store_module.limiter(redis.client, 1, { period = 1, burst = 1, name = "bound",
                                                      on_error = "raise" })
      local allowed, _, retry_after, _, clipped = store:charge("b", 2 ^ 60, 0) -- a bad figure
      assert.same({ false, 2, true }, { allowed, retry_after, clipped }) -- 1 unit of debt
      assert.equal("2000000000", redis.client:get(store:redis_key("b")):match("(%d+)$"))
      assert.equal(0, store:take("b", 10, 0))
      -- a burst whose two taus pass MAX_DEBT_NS: the script's ceiling clips first
      store = store_module.limiter(redis.client, 1, { period = 1, burst = 5000000, name = "ceiling",
                                                on_error = "raise" })
      local to_bound = math.floor(store_module.MAX_DEBT_NS / 1000000000)
      allowed, _, _, _, clipped = store:charge("b", to_bound, 0)
      assert.same({ false, false }, { allowed, clipped })
      allowed, _, _, _, clipped = store:charge("b", 1, 0)
      assert.same({ false, true }, { allowed, clipped })
      assert.equal(("%.0f"):format(store_module.MAX_DEBT_NS),
                   redis.client:get(store:redis_key("b")):match("(%d+)$"))
      local core = cellrate.keyed(10, { period = 1, burst = 5 })
      local rl = store_module.limiter(redis.client, 10, { period = 1, burst = 5, on_error = "raise" })
      for _, now in ipairs({ 0, 0, 0.3, 1 }) do
         assert.same({ core:charge("t", 4, now) }, { rl:charge("t", 4, now) })
         assert.equal(core:take("t", 2, now), rl:take("t", 2, now))
      end
   end)

   it("answers a charge and a take Redis cannot decide by on_error", function()
      local dead = redis.connect("127.0.0.1", redis.server.port)
      local answers = {}
      for _, on_error in ipairs({ "allow", "deny", "raise" }) do
         local rl = store_module.limiter(dead, 10, { on_error = on_error })
         rl:set_client({ evalsha = function() error("closed") end, eval = error,
                         script = function() error("closed") end })
         answers[on_error] = { rl:take("k", 3), (rl:charge("k", 3)) }
      end
      assert.same({ 3, true }, answers.allow)
      assert.same({ 0, false }, answers.deny)
      assert.same({ nil, nil }, { answers.raise[1], answers.raise[2] })
   end)

   it("sets the key to expire when its TAT passes", function()
      local store = store_module.limiter(redis.client, 2, { burst = 3, on_error = "raise" })
      local start = socket.gettime()
      local _, _, _, reset_after = store:check("e", 2)
      local pttl = redis.client:pttl(store:redis_key("e"))
      local since_ms = (socket.gettime() - start) * 1000 + 1 -- less the time since the decision
      local reset_ms = math.ceil(reset_after * 1000)
      assert.is_true(pttl <= reset_ms and pttl >= reset_ms - since_ms, pttl .. " vs " .. reset_ms)
   end)

   it("decides through the client given by set_client", function()
      local store = store_module.limiter(redis.client, 10, { burst = 3, on_error = "raise" })
      local other = redis.connect("127.0.0.1", redis.server.port)
      store:set_client(other)
      assert.same({ true, 2, 0, 0.1 }, { store:check("c", 1, 5) })
      assert.equal(other, store.client)
   end)

   it("gives the core's headers through the store's limit", function()
      local store = store_module.limiter(redis.client, "10/s", { burst = 2, on_error = "raise" })
      local core = cellrate.keyed("10/s", { burst = 2 })
      for _ = 1, 3 do
         assert.same(cellrate.headers(core, core:check("h", 1, 7)),
                     cellrate.headers(store.limit, store:check("h", 1, 7)))
      end
   end)

   it("reloads the script after SCRIPT FLUSH", function()
      local store = store_module.limiter(redis.client, 10, { burst = 100, on_error = "raise" })
      for i = 1, 10 do
         local allowed, remaining = store:check("k", 1, 1.0)
         assert.is_true(allowed)
         assert.equal(100 - i, remaining)
         if i == 5 then
            redis.client:script("flush")
         end
      end
   end)

   it("decides several limits as one with check_all", function()
      local per_ip = store_module.limiter(redis.client, 10, { burst = 5, prefix = "ip:", on_error = "raise" })
      local per_user = store_module.limiter(redis.client, 10, { burst = 2, prefix = "user:", on_error = "raise" })
      local items = { { per_ip, "{u1}:1.2.3.4" }, { per_user, "{u1}" } }
      assert.same({ true, 1, 0, 0.1 }, { store_module.check_all(items, 1, 100) })
      assert.is_true((store_module.check_all(items, 1, 100)))
      local allowed, remaining, retry_after = store_module.check_all(items, 1, 100)
      assert.is_false(allowed)
      assert.equal(0, remaining)
      assert.is_true(math.abs(retry_after - 0.1) < 1e-9)
      -- the refusal took nothing from per_ip: 3 of 5 left there
      assert.same({ true, 0, 0, 0.5 }, { per_ip:check("{u1}:1.2.3.4", 3, 100) })
   end)

   it("refuses bad arguments, naming the parameter", function()
      local cases = {
         { function() store_module.limiter({}, 10) end, "client" },
         { function() store_module.limiter(redis.client, 10):set_client(42) end, "client" },
         { function() store_module.limiter(redis.client, 10, { on_error = "ignore" }) end, "on_error" },
         { function() store_module.limiter(redis.client, 10, { prefix = "{x}" }) end, "prefix" },
         { function() store_module.limiter(redis.client, 10, { prefix = 5 }) end, "prefix" },
         { function() store_module.limiter(redis.client, "1/day", { burst = 200 }) end, "burst" },
         { function() store_module.limiter(redis.client, -1) end, "rate" },
         { function() store_module.limiter(redis.client, 10):check("k", -1) end, "cost" },
         { function() store_module.limiter(redis.client, 10):check({}, 1) end, "key" },
         { function() store_module.check_all({}) end, "items" },
         { function() store_module.check_all({ { cellrate.keyed(1), "k" } }) end, "items" },
         { function() store_module.check_all({ { store_module.limiter(redis.client, 10), {} } }) end, "key" },
         { function() store_module.limiter(redis.client, 10):refund("k", -1) end, "cost" },
         { function() store_module.limiter(redis.client, 10):reset({}) end, "key" },
         { function() store_module.limiter(redis.client, 10, 5) end, "opts" },
         { function() store_module.limiter(redis.client, 10, { name = "a:b" }) end, "name" },
         { function() store_module.limiter(redis.client, 10, { name = 5 }) end, "name" },
         { function() store_module.limiter(redis.client, 10):reconfigure(20) end, "name" },
         { function() store_module.limiter(redis.client, 10, { name = "n" }):reconfigure(-1) end, "rate" },
         { function() store_module.limiter(redis.client, 10, { name = "n" }):reconfigure(20, 5) end, "opts" },
         { function()
              store_module.limiter(redis.client, 10, { name = "n" }):reconfigure(20, { burts = 5 })
           end, "unknown option 'burts' (did you mean 'burst'?)" },
         { function()
              store_module.limiter(redis.client, 10, { name = "n" }):reconfigure(20, { algorithm = "fixed_window" })
           end, "algorithm" },
      }
      for _, case in ipairs(cases) do
         local ok, err = pcall(case[1])
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find(case[2], 1, true), tostring(err))
         -- raised at the caller's position: this file, not the module
         assert.equal("tests/lua/redis_spec.lua", tostring(err):match("^([^:]+):%d+: "), err)
      end
   end)

   it("raises naming algorithm for a key held under another one, at the caller's line", function()
      local gcra = store_module.limiter(redis.client, 10, { name = "algo", on_error = "raise" })
      assert.is_true((gcra:check("k", 3, 5)))
      local before = redis.client:get(gcra:redis_key("k"))
      for _, on_error in ipairs({ "allow", "deny", "raise" }) do
         local other = store_module.limiter(redis.client, 10, { name = "algo", algorithm = "fixed_window",
                                                          on_error = on_error })
         local calls = {
            function() other:check("k", 1, 5) end,
            function() other:peek("k", 1, 5) end,
            function() other:allow("k", 1, 5) end,
            function() other:refund("k", 1, 5) end,
            function() store_module.check_all({ { other, "k" } }, 1, 5) end,
         }
         for _, call in ipairs(calls) do
            local ok, err = pcall(call)
            assert.is_false(ok)
            assert.equal("tests/lua/redis_spec.lua", tostring(err):match("^([^:]+):%d+: "), err)
            assert.is_truthy(tostring(err):find(": algorithm: the keys of this name hold gcra, not "
               .. "fixed_window; ", 1, true), err)
         end
      end
      assert.equal(before, redis.client:get(gcra:redis_key("k")))
   end)

   it("changes a named limit live, carrying each key on its next check", function()
      local store = store_module.limiter(redis.client, 10, { burst = 10, name = "live", on_error = "raise" })
      assert.same({ true, 4, 0, 0.6 }, { store:check("k", 6, 5) })
      store:reconfigure(100, { burst = 20 })
      assert.equal(20, store.burst)
      assert.same({ true, 14, 0, 0.06 }, { store:check("k", 0, 5) })
      assert.equal("gcra:200000000:20 5060000000", redis.client:get("cellrate:live:k"))
   end)

   it("answers on_error for a reply that means Redis cannot decide now (OOM)", function()
      local allow = store_module.limiter(redis.client, 10, { on_error = "allow", prefix = "oom:" })
      local deny = store_module.limiter(redis.client, 10, { on_error = "deny", prefix = "oom:" })
      local raise = store_module.limiter(redis.client, 10, { on_error = "raise", prefix = "oom:" })
      redis.client:config("set", "maxmemory-policy", "noeviction")
      redis.client:config("set", "maxmemory", "1")
      local ok, err = pcall(function()
         assert.is_true(allow:allow("k"))
         local allowed, remaining, retry_after, reset_after = deny:check("k")
         assert.same({ false, 0 }, { allowed, remaining })
         assert.is_true(retry_after > 0)
         assert.equal(retry_after, reset_after) -- an invented refusal agrees with itself
         local nothing, message, code = raise:check("k")
         assert.is_nil(nothing)
         assert.is_truthy(message:find("OOM", 1, true), message)
         assert.equal("unavailable", code)
      end)
      redis.client:config("set", "maxmemory", "0")
      assert(ok, err)
   end)

   it("reports a data error whatever on_error says (WRONGTYPE)", function()
      for _, on_error in ipairs({ "allow", "deny", "raise" }) do
         local store = store_module.limiter(redis.client, 10, { on_error = on_error })
         redis.client:del(store:redis_key("list"))
         redis.client:lpush(store:redis_key("list"), "x")
         local nothing, message, code = store:check("list")
         assert.is_nil(nothing)
         assert.is_truthy(message:find("WRONGTYPE", 1, true), message)
         assert.equal("unavailable", code)
         assert.is_nil(store.gate) -- no back-off: Redis answered
         assert.is_true((store:check("other")))
      end
   end)

   it("reads the first word of error replies as both clients report them", function()
      local word = store_module._reply_word
      assert.equal("OOM", word("OOM command not allowed when used memory > 'maxmemory'."))
      assert.equal("BUSY", word("/usr/share/lua/5.3/redis.lua:420: redis error: BUSY Redis is busy"))
      assert.equal("ERR", word("ERR cellrate: unknown algorithm x"))
      assert.is_nil(word("timeout"))
      assert.is_nil(word("/usr/share/lua/5.3/redis.lua:304: connection error: closed"))
   end)

   it("refunds as the core does", function()
      local store = store_module.limiter(redis.client, 10, { burst = 5, on_error = "raise" })
      local core = cellrate.keyed(10, { burst = 5 })
      assert.same({ core:check("k", 5, 100) }, { store:check("k", 5, 100) })
      core:refund("k", 2, 100.05)
      assert.is_true(store:refund("k", 2, 100.05))
      assert.same({ core:peek("k", 0, 100.1) }, { store:peek("k", 0, 100.1) })
      assert.is_true(store:refund("never-seen", 1, 100))
      assert.is_nil(redis.client:get(store:redis_key("never-seen")))
   end)

   it("survives a SCRIPT FLUSH storm", function()
      local store = store_module.limiter(redis.client, 1000, { burst = 10000, on_error = "raise" })
      local handle = assert(io.popen(("redis-benchmark -p %d -c 1 -n 200000 SCRIPT FLUSH "
         .. ">/dev/null 2>&1 & echo $!"):format(redis.server.port)))
      local storm = handle:read("*l")
      handle:close()
      local ok, err = pcall(function()
         socket.sleep(0.05)
         for i = 1, 300 do
            local allowed, remaining = store:check("k", 1, 1.0)
            assert.is_true(allowed, remaining)
            assert.equal(10000 - i, remaining)
         end
      end)
      os.execute("kill " .. storm .. " 2>/dev/null")
      assert(ok, err)
   end)

   it("honours on_error while Redis is down", function()
      local doomed = start_server(free_port())
      local ok, err = pcall(function()
         local doomed_client = redis.connect("127.0.0.1", doomed.port)
         local allow = store_module.limiter(doomed_client, 10, { on_error = "allow" })
         local deny = store_module.limiter(doomed_client, 10, { on_error = "deny" })
         local raise = store_module.limiter(doomed_client, 10, { on_error = "raise" })
         assert.is_true(raise:allow("k"))
         os.execute("kill -9 " .. doomed.pid)
         socket.sleep(0.1)
         for _ = 1, 20 do
            assert.is_true(allow:allow("k"))
            local allowed, _, retry_after, reset_after = deny:check("k")
            assert.is_false(allowed)
            assert.is_true(retry_after > 0)
            assert.equal(retry_after, reset_after)
            local nothing, message = raise:check("k")
            assert.is_nil(nothing)
            assert.is_string(message)
         end
      end)
      stop_server(doomed)
      assert(ok, err)
   end)

   describe("concurrency", function()
      it("holds at most the limit, gives units back once, and counts what is held", function()
         local c = store_module.concurrency(redis.client, 3, { lease = 30 })
         local slots = { assert(c:acquire("k")), assert(c:acquire("k")), assert(c:acquire("k")) }
         assert.same({ nil, "rejected" }, { c:acquire("k") })
         assert.is_truthy(c:acquire("other")) -- one limit per key
         assert.equal(3, c:in_flight("k"))
         assert.is_true(c:release(slots[1]))
         assert.is_false(c:release(slots[1])) -- idempotent
         assert.same({ nil, "rejected" }, { c:acquire("k", 2) }) -- takes nothing
         assert.equal(2, c:in_flight("k"))
         assert.is_true(c:release(slots[2]))
         assert.is_true(c:release(slots[3]))
         local exists = redis.client:exists("cellrate:concurrency:3:k") -- the key went with its units
         assert.is_true(exists == false or exists == 0)
         local big = assert(c:acquire(nil, 3))
         assert.equal(3, c:in_flight())
         assert.is_true(c:release(big))
         -- a slot of another limit releases nothing of this one
         local other = store_module.concurrency(redis.client, 3, { lease = 30, name = "other" })
         local theirs = assert(other:acquire("k"))
         assert.is_false(c:release(theirs))
         assert.equal(1, other:in_flight("k"))
      end)

      it("gives back the units of a holder that never releases when its lease ends", function()
         local c = store_module.concurrency(redis.client, 1, { lease = 0.05, name = "short" })
         -- the same limit's holdings with a lease that outlasts a busy machine's pauses
         local steady = store_module.concurrency(redis.client, 1, { lease = 30, name = "short" })
         local key, forgotten, second
         for attempt = 1, 100 do -- a pause as long as the lease before the second try: again
            key = "k" .. attempt
            local start = socket.gettime()
            forgotten = assert(c:acquire(key))
            second = { c:acquire(key) }
            if socket.gettime() - start < 0.05 then
               break
            end
         end
         assert.same({ nil, "rejected" }, second)
         while c:in_flight(key) > 0 do -- the lease ends on the server's clock
            socket.sleep(0.01)
         end
         local taker = assert(steady:acquire(key))
         assert.is_false(c:release(forgotten)) -- expired: the new holding stays
         assert.equal(1, c:in_flight(key))
         assert.is_true(steady:release(taker))
      end)

      it("answers by on_error while Redis is down", function()
         local down = redis.connect("127.0.0.1", redis.server.port)
         local stores = {}
         for _, word in ipairs({ "allow", "deny", "raise" }) do
            stores[word] = store_module.concurrency(down, 1, { lease = 30, on_error = word,
                                                                name = word })
         end
         local held = assert(stores.raise:acquire("k"))
         local broken = { script = function() error("closed") end,
                          evalsha = function() error("closed") end, eval = error }
         for _, c in pairs(stores) do
            c:set_client(broken)
         end
         local unheld = assert(stores.allow:acquire("k"))
         assert.is_false(stores.allow:release(unheld)) -- it held nothing
         assert.same({ nil, "rejected" }, { stores.deny:acquire("k") })
         local none, err, code = stores.raise:acquire("k")
         assert.is_nil(none)
         assert.equal("unavailable", code)
         assert.is_truthy(err)
         assert.equal("unavailable", select(3, stores.raise:release(held)))
      end)
   end)
end)

describe("cellrate.redis without a server", function()
   local store_module = require("cellrate.redis")
   -- a client that fails the test if the store ever calls it
   local function never() error("the store called Redis") end
   local client = { evalsha = never, eval = never, script = never }

   local function error_of(fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      return (tostring(err):gsub("^[^\n]-:%d+: ", "", 1))
   end

   -- a number of the vectors: %.17g, or nan, inf, -inf
   local function number(text)
      local special = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }
      if special[text] ~= nil then
         return special[text]
      end
      return tonumber(text)
   end

   it("refuses a bad limit in the core's words (tests/vectors/limits.txt)", function()
      local compared = 0
      for line in io.lines("tests/vectors/limits.txt") do
         local kind, rest = line:match("^(%a+) (.*)$")
         local rate, opts
         if kind == "number" then
            local r, p, b, status = rest:match("^(%S+) (%S+) (%S+) (%S+)")
            -- (a burst past 2^53 is no LuaJIT number)
            local exact = b == "-" or ("%.0f"):format(tonumber(b)) == b
            if status ~= "OK" and exact then
               rate, opts = number(r), { period = p ~= "-" and number(p) or nil,
                                         burst = tonumber(b) }
            end
         elseif kind == "text" then
            local status, given, text = rest:match("^(%S+) %S+ %S+ (%S) |(.*)$")
            if status ~= "OK" then
               rate, opts = text, { period = given == "1" and 1.0 or nil }
            end
         end
         if rate ~= nil then
            assert.equal(error_of(cellrate.limit_spec, rate, opts),
                         error_of(store_module.limiter, client, rate, opts), line)
            compared = compared + 1
         end
      end
      assert.is_true(compared >= 30)
   end)

   it("refuses a bad key, cost or now in the core's words", function()
      local store = store_module.limiter(client, 10)
      local core = cellrate.keyed(10)
      for _, args in ipairs({ { 5, 1 }, { nil, 1 }, { "k", -1 }, { "k", 1.5 }, { "k", "1" },
                              { "k", 1, -1 }, { "k", 1, 0 / 0 }, { "k", 1, "0" } }) do
         local expected = error_of(core.peek, core, args[1], args[2], args[3])
         for _, method in ipairs({ "check", "allow", "peek", "refund" }) do
            assert.equal(expected, error_of(store[method], store, args[1], args[2], args[3]))
         end
      end
   end)
end)
