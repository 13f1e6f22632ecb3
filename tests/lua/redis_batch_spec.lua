-- Batches of the Lua face's Redis store (cellrate.redis.check_many) against a
-- real redis-server started here: each decision of a batch answers what it
-- answers sent alone (differential, state compared too), in one script call
-- (counted); duplicate keys, an empty batch, a batch too long for one call and
-- bad items are each handled. The client is Debian's redis-lua, as redis_spec.lua.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local support = dofile("tests/lua/support.lua")(assert)

-- a batch of more than BATCH_MAX decisions, refused by the core
local function batch_too_long(store)
   local calls = {}
   for i = 1, 257 do
      calls[i] = { 1, 1, store.limit, "p", "n", "k" }
   end
   return require("cellrate")._redis_batch(nil, calls)
end

support.describe_redis("cellrate.redis batches", function(redis)
   local store_module = redis.store

   before_each(function()
      redis.client:script("load", store_module.script)
      redis.client:script("load", store_module.batch_script)
   end)

   local function script_calls()
      local stats = redis.client:info("commandstats")
      local total = 0
      for _, name in ipairs({ "evalsha", "eval" }) do
         local entry = (stats.commandstats or stats)["cmdstat_" .. name]
         if type(entry) == "table" then
            total = total + tonumber(entry.calls)
         elseif type(entry) == "string" then
            total = total + tonumber(entry:match("calls=(%d+)"))
         end
      end
      return total
   end

   local function state()
      local keys = redis.client:keys("*")
      table.sort(keys)
      local values = {}
      for _, key in ipairs(keys) do
         values[#values + 1] = key .. "=" .. redis.client:get(key)
      end
      return values
   end

   local function restore(values)
      redis.client:flushall()
      for _, entry in ipairs(values) do
         local key, value = entry:match("^(.-)=(.*)$")
         redis.client:set(key, value)
      end
   end

   local function limiters()
      local opts = {
         { 5, { burst = 3, name = "g" } },
         { 2, { burst = 4, algorithm = "token_bucket", name = "t" } },
         { 4, { algorithm = "fixed_window", name = "f" } },
         { 6, { period = 2, algorithm = "sliding_window", name = "s" } },
      }
      local stores = {}
      for i, o in ipairs(opts) do
         o[2].on_error = "raise"
         stores[i] = store_module.limiter(redis.client, o[1], o[2])
      end
      return stores
   end

   it("sends the batch script the Python package sends", function()
      local wrapper = assert(io.open("redis/batch.lua", "rb")):read("*a")
      local at, past = wrapper:find("--@decide.lua\n", 1, true)
      assert.equal(wrapper:sub(1, at - 1) .. store_module.script .. wrapper:sub(past + 1),
                   store_module.batch_script)
   end)

   it("answers each decision as it answers alone, in one call", function()
      math.randomseed(5)
      local stores = limiters()
      local now = 100
      for round = 1, 10 do
         local items = {}
         for i = 1, math.random(1, 30) do
            local cost = ({ 0, 1, 1, 2, 3 })[math.random(5)]
            if math.random() < 0.2 then
               local key = "{k" .. math.random(3) .. "}"
               items[i] = { { { stores[1], key }, { stores[2], key .. ":b" } }, cost }
            else
               items[i] = { stores[math.random(4)], "k" .. math.random(5), cost }
            end
         end
         now = now + math.random() * 0.6
         local before = state()
         local calls = script_calls()
         local batch = store_module.check_many(items, now)
         assert.equal(calls + 1, script_calls())
         local after = state()
         restore(before)
         for i, item in ipairs(items) do
            local alone
            if getmetatable(item[1]) == nil then
               alone = { store_module.check_all(item[1], item[2], now) }
            else
               alone = { item[1]:check(item[2], item[3], now) }
            end
            assert.same(alone, batch[i], "round " .. round .. " item " .. i)
         end
         assert.same(after, state())
      end
   end)

   it("decides duplicate keys in order, each on the one before", function()
      local store = store_module.limiter(redis.client, 1, { burst = 2, name = "d", on_error = "raise" })
      local answers = store_module.check_many({ { store, "k" }, { store, "k" }, { store, "k", 0 },
                                                { store, "k" } }, 10)
      local allowed = {}
      for i, answer in ipairs(answers) do
         allowed[i] = answer[1]
      end
      assert.same({ true, true, true, false }, allowed)
   end)

   it("answers an empty batch without a call, splits a long one", function()
      local calls = script_calls()
      assert.same({}, store_module.check_many({}))
      assert.equal(calls, script_calls())
      local store = store_module.limiter(redis.client, 1, { burst = 300, name = "long" })
      local items = {}
      for i = 1, store_module.BATCH_MAX + 44 do
         items[i] = { store, "k" }
      end
      local answers = store_module.check_many(items, 5)
      assert.equal(calls + 2, script_calls())
      assert.equal(#items, #answers)
      assert.equal(299, answers[1][2])
      assert.equal(300 - #items, answers[#items][2])
      local ok, err = pcall(batch_too_long, store)
      assert.is_false(ok)
      assert.matches("items", err)
   end)

   it("raises a mistake of one decision after every decision was made", function()
      store_module.limiter(redis.client, 5, { burst = 3, name = "same" }):check("held", 1, 1)
      local window = store_module.limiter(redis.client, 5, { algorithm = "fixed_window", name = "same" })
      local other = store_module.limiter(redis.client, 5, { burst = 3, name = "other" })
      local ok, err = pcall(store_module.check_many, { { other, "a" }, { window, "held" },
                                                       { other, "b" } }, 1)
      assert.is_false(ok)
      assert.matches("algorithm", err)
      assert.equal(2, select(2, other:peek("a", 0, 1)))
      assert.equal(2, select(2, other:peek("b", 0, 1)))
   end)

   it("names items (or cost) in bad batches", function()
      local store = store_module.limiter(redis.client, 5, { name = "bad" })
      for _, items in ipairs({ "x", { "x" }, { { {}, 1 } }, { { "x", "k" } } }) do
         local ok, err = pcall(store_module.check_many, items)
         assert.is_false(ok)
         assert.matches("items", err)
      end
      local ok, err = pcall(store_module.check_many, { { store, "k", -1 } })
      assert.is_false(ok)
      assert.matches("^cost", err)
   end)
end)

