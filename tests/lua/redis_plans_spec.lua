-- Plans through the Lua face of the Redis store (cellrate.redis): opts.plans
-- and the plan after the priority on check, peek and allow; tests/vectors/
-- plans.txt through the script (a plan edit is reconfigure with opts.plan,
-- and a probe of each key on that plan at its instant); the mistakes in the
-- core's words; against a redis-server started here.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local support = dofile("tests/lua/support.lua")(assert)
local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local blocks = {}
do
   local number = 0
   for text in io.lines("tests/vectors/plans.txt") do
      number = number + 1
      local w = words(text)
      if w[1] == "table" then
         blocks[#blocks + 1] = { plans = {}, steps = {} }
      elseif w[1] == "plan" then
         local plans = blocks[#blocks].plans
         plans[#plans + 1] = { name = w[2], emission = tonumber(w[3]), burst = tonumber(w[4]) }
      elseif w[1] == "op" or w[1] == "edit" then
         local steps = blocks[#blocks].steps
         steps[#steps + 1] = { line = number, w = w }
      end
   end
end

local function seconds(ns_text)
   if ns_text == "9223372036854775807" then
      return math.huge
   end
   return tonumber(ns_text) / 1e9
end

support.describe_redis("cellrate.redis plans", function(redis)
   local store_module = redis.store

   for _, algorithm in ipairs({ "gcra", "token_bucket" }) do
      for b, block in ipairs(blocks) do
         it(("decides block %d of plans.txt in the script as %s"):format(b, algorithm), function()
            local default, plans = block.plans[1], {}
            for i = 2, #block.plans do
               local p = block.plans[i]
               plans[p.name] = { 1, period = p.emission / 1e9, burst = p.burst }
            end
            local store = store_module.limiter(redis.client, 1, { period = default.emission / 1e9,
               burst = default.burst, algorithm = algorithm, name = "v" .. b, plans = plans,
               on_error = "raise" })
            local plan_of = {}
            for _, step in ipairs(block.steps) do
               local w = step.w
               local where = algorithm .. ", plans.txt:" .. step.line
               if w[1] == "edit" then
                  local now = tonumber(w[3]) / 1e9
                  store:reconfigure(1, { period = tonumber(w[4]) / 1e9, burst = tonumber(w[5]),
                     plan = w[2] })
                  for key, on in pairs(plan_of) do
                     if on == w[2] then
                        store:check(key, 0, now, nil, on)
                     end
                  end
               else
                  local key, plan, now, cost = w[2], w[3], tonumber(w[4]) / 1e9, tonumber(w[5])
                  local method = w[6] == "1" and store.check or store.peek
                  local allowed, remaining, retry_after, reset_after =
                     method(store, key, cost, now, nil, plan)
                  assert.are.equal(w[7] == "1", allowed, "allowed, " .. where)
                  assert.are.equal(tonumber(w[8]), remaining, "remaining, " .. where)
                  assert.are.equal(seconds(w[9]), retry_after, "retry, " .. where)
                  assert.are.equal(tonumber(w[10]) / 1e9, reset_after, "reset, " .. where)
                  if w[6] == "1" then
                     plan_of[key] = plan
                  end
               end
            end
         end)
      end
   end

   it("carries an upgraded key's units and writes its plan's limit", function()
      local store = store_module.limiter(redis.client, 10, { burst = 10, name = "tiers",
         on_error = "raise", plans = { pro = { 100, burst = 20 } } })
      assert.are.equal(4, select(2, store:check("k", 6, 5)))
      assert.are.equal(14, select(2, store:peek("k", 0, 5, nil, "pro")))
      assert.truthy(redis.client:get(store:redis_key("k")):find("^gcra:1000000000:10 "))
      assert.are.equal(true, store:allow("k", 14, 5, nil, "pro"))
      assert.truthy(redis.client:get(store:redis_key("k")):find("^gcra:200000000:20 "))
      assert.are.equal(false, store:allow("k", 1, 5, nil, "default"))
   end)

   it("charges and refunds a key under its plan, which it stays on", function()
      local store = store_module.limiter(redis.client, 10, { burst = 10, name = "settled",
         on_error = "raise", plans = { pro = { 100, burst = 20 } } })
      assert.are.equal(19, select(2, store:check("k", 1, 5, nil, "pro")))
      assert.are.equal(16, select(2, store:charge("k", 3, 5, "pro")))
      assert.are.equal(true, store:refund("k", 2, 5, "pro"))
      assert.truthy(redis.client:get(store:redis_key("k")):find("^gcra:200000000:20 "))
      assert.are.equal(18, select(2, store:peek("k", 0, 5, nil, "pro")))
      local ok, err = pcall(store.charge, store, "k", 1, 5, "gold")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("^[^\n]*plan must be 'default' or the name of one"))
      ok, err = pcall(store.refund, store, "k", 1, 5, "gold")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("plan must be"))
   end)

   it("decides a pair's plan in check_all and check_many", function()
      local store = store_module.limiter(redis.client, 10, { burst = 10, name = "items",
         on_error = "raise", plans = { pro = { 100, burst = 20 } } })
      local other = store_module.limiter(redis.client, 1000, { burst = 1000, name = "wide",
         on_error = "raise" })
      local allowed, remaining = store_module.check_all({ { store, "k", "pro" }, { other, "k" } },
         6, 5)
      assert.are.equal(true, allowed)
      assert.are.equal(14, remaining)
      local answers = store_module.check_many({ { store, "k", 4, "pro" }, { store, "k", 0 },
         { { { store, "j", "pro" }, { other, "j" } }, 2 } }, 5)
      assert.are.same({ true, 10 }, { answers[1][1], answers[1][2] })
      assert.are.same({ true, 0 }, { answers[2][1], answers[2][2] })
      assert.are.same({ true, 18 }, { answers[3][1], answers[3][2] })
      local ok, err = pcall(store_module.check_all, { { store, "k", "gold" } }, 1, 5)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("plan must be"))
   end)

   it("refuses what the core refuses, naming the parameter", function()
      local ok, err = pcall(store_module.limiter, redis.client, 10, { plans = { pro = "100/s" } })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("^[^\n]*name: give a Redis limit with plans a name"))
      ok, err = pcall(store_module.limiter, redis.client, 10, { name = "n", plans = {} })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("plans must be"))
      local store = store_module.limiter(redis.client, 10, { name = "n", plans = { pro = "100/s" } })
      ok, err = pcall(store.check, store, "k", 1, nil, nil, "gold")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("plan must be 'default' or the name of one of the plans"))
      ok, err = pcall(store.reconfigure, store, 5, { plan = "gold" })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("plan must be"))
      store:reconfigure(200, { plan = "pro" })
      assert.are.equal(200, select(2, store:peek("x", 0, 5, nil, "pro")))
      assert.are.equal(10, select(2, store:peek("x", 0, 5)))
   end)
end)
