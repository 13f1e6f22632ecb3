-- The penalty box through the Lua face of the Redis store (cellrate.redis):
-- tests/vectors/penalty.txt through the script (check and allow; the strikes'
-- key after each turn-away), a ban on the server's clock, check_many, and the
-- refusals in the core's words, against a redis-server started here.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local support = dofile("tests/lua/support.lua")(assert)
local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

-- The vectors: runs of turn-aways (now and the state after) and gcra keys
-- (a limit and its checks), each under the last penalty given.
local runs, keys = {}, {}
local penalty
for line in io.lines("tests/vectors/penalty.txt") do
   local w = words(line)
   if w[1] == "penalty" and w[5] == "OK" then
      penalty = { after = w[2], ban = tonumber(w[3]),
         max_ban = w[4] ~= "-" and tonumber(w[4]) or nil }
      runs[#runs + 1] = { penalty = penalty, ops = {} }
   elseif w[1] == "refused" then
      local ops = runs[#runs].ops
      ops[#ops + 1] = { now = w[2], state = w[5] .. " " .. w[6] .. " " .. w[7] }
   elseif w[1] == "limit" then
      keys[#keys + 1] = { penalty = penalty, emission = tonumber(w[2]), burst = tonumber(w[3]),
         ops = {} }
   elseif w[1] == "check" or w[1] == "reset" then
      local ops = keys[#keys].ops
      ops[#ops + 1] = { reset = w[1] == "reset", now = tonumber(w[2]), cost = tonumber(w[3]),
         allowed = w[4] == "1", remaining = tonumber(w[5]), retry = w[6],
         reset_after = tonumber(w[7]) }
   end
end

local function seconds(ns_text)
   if ns_text == "9223372036854775807" then
      return math.huge
   end
   return tonumber(ns_text) / 1e9
end

support.describe_redis("cellrate.redis penalty", function(redis)
   local store_module = redis.store

   local function strikes(store, key)
      return redis.client:get(store:penalty_key(key)) or "0 0 0"
   end

   for r, run in ipairs(runs) do
      if #run.ops > 0 then
         it(("counts run %d of penalty.txt's turn-aways in the script"):format(r), function()
            local store = store_module.limiter(redis.client, 1, { period = 1, burst = 1, name = "r",
               penalty = run.penalty })
            for i, op in ipairs(run.ops) do
               -- a cost the burst never fits: always refused, a strike (or, in a ban, nothing)
               local allowed, _, retry_after = store:check("k", 2, tonumber(op.now) / 1e9)
               assert.is_false(allowed)
               assert.are.equal(math.huge, retry_after)
               assert.are.equal(op.state, strikes(store, "k"), ("run %d op %d"):format(r, i))
            end
         end)
      end
   end

   for k, key in ipairs(keys) do
      it(("decides key %d of penalty.txt in the script"):format(k), function()
         local store = store_module.limiter(redis.client, 1, { period = key.emission / 1e9,
            burst = key.burst, name = "v", penalty = key.penalty })
         for i, op in ipairs(key.ops) do
            local where = ("key %d op %d"):format(k, i)
            if op.reset then
               assert.is_true(store:reset("k"))
               assert.is_true(store:reset("a"))
               assert.is_nil(redis.client:get(store:penalty_key("k")))
            else
               local now = op.now / 1e9
               local allowed, remaining, retry_after, reset_after = store:check("k", op.cost, now)
               assert.are.equal(op.allowed, allowed, "allowed, " .. where)
               assert.are.equal(op.remaining, remaining, "remaining, " .. where)
               assert.are.equal(seconds(op.retry), retry_after, "retry, " .. where)
               assert.are.equal(op.reset_after / 1e9, reset_after, "reset, " .. where)
               assert.are.equal(op.allowed, store:allow("a", op.cost, now), "allow, " .. where)
            end
         end
      end)
   end

   it("bans a key refused `after` times on the server's clock, and resets it", function()
      local store = store_module.limiter(redis.client, 100, { burst = 5, name = "d",
         penalty = { after = "3/minute", ban = 30, max_ban = 60 } })
      assert.is_true(store:allow("k"))
      assert.is_false(store:check("k", 6))
      assert.is_false(store:check("k", 6))
      assert.is_true(store:check("k"))
      assert.is_false(store:check("k", 6)) -- the third: banned for 30 s
      local allowed, remaining, retry_after = store:check("k")
      assert.is_false(allowed)
      assert.are.equal(0, remaining)
      assert.is_true(retry_after > 25 and retry_after <= 30) -- no test takes 5 s to get here
      local held = strikes(store, "k")
      assert.is_false(store:allow("k")) -- a refusal during a ban counts nothing
      assert.are.equal(held, strikes(store, "k"))
      local ttl = tonumber(redis.client:pttl(store:penalty_key("k")))
      assert.is_true(ttl > 0 and ttl <= 90000)
      assert.is_true(store:reset("k")) -- lets it out
      assert.is_true(store:allow("k"))
   end)

   it("counts check_many's refusals as strikes", function()
      local store = store_module.limiter(redis.client, 1, { period = 60, burst = 1, name = "m",
         penalty = { after = "2/minute", ban = 30 } })
      local answers = store_module.check_many({ { store, "k" }, { store, "k" }, { store, "k" } })
      assert.is_true(answers[1][1])
      assert.is_false(answers[2][1])
      assert.is_false(answers[3][1])
      assert.is_true(answers[3][3] > 25) -- the second refusal started the ban
      assert.are_not.equal("0 0 0", strikes(store, "k"))
   end)

   it("honours on_wipe in check_many under a penalty (the marker, then the penalty key)",
      function()
         local store = store_module.limiter(redis.client, 5, { period = 60, name = "w",
            penalty = { after = "3/minute", ban = 30 } })
         redis.client:flushall() -- every wipe marker gone: the key reads as fully used
         local answers = store_module.check_many({ { store, "k" } })
         assert.is_false(answers[1][1])
         assert.are_not.equal("0 0 0", strikes(store, "k")) -- and the refusal is a strike
      end)

   it("refuses a penalty the script cannot carry, naming penalty", function()
      for _, bad in ipairs({ { after = "3/200d", ban = 1 }, { after = "3/s", ban = 1,
            max_ban = 9e6 } }) do
         local ok, err = pcall(store_module.limiter, redis.client, 10, { penalty = bad })
         assert.is_false(ok)
         assert.truthy(tostring(err):find("^penalty: through Redis"), tostring(err))
      end
      local ok, err = pcall(store_module.limiter, redis.client, 10, { penalty = "3/minute" })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("^penalty"), tostring(err))
   end)
end)
