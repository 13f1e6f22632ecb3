-- Priority classes through the Lua face of the Redis store (cellrate.redis):
-- tests/vectors/priorities.txt through the script (check, peek, allow), the
-- class mistakes in the core's words, against a redis-server started here.
package.path = "lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua"

local support = dofile("tests/lua/support.lua")(assert)
local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local blocks = {}
for line in io.lines("tests/vectors/priorities.txt") do
   local w = words(line)
   if w[1] == "limit" then
      blocks[#blocks + 1] = { emission = tonumber(w[2]), burst = tonumber(w[3]), classes = {},
         ops = {} }
   elseif w[1] == "class" then
      blocks[#blocks].classes[w[2]] = tonumber(w[3])
   elseif w[1] == "op" then
      local ops = blocks[#blocks].ops
      ops[#ops + 1] = { name = w[2], now = tonumber(w[3]), cost = tonumber(w[4]),
         commit = w[5] == "1", allowed = w[6] == "1", remaining = tonumber(w[7]),
         retry = w[8], reset = tonumber(w[9]) }
   end
end

local function seconds(ns_text)
   if ns_text == "9223372036854775807" then
      return math.huge
   end
   return tonumber(ns_text) / 1e9
end

support.describe_redis("cellrate.redis priorities", function(redis)
   local store_module = redis.store

   for b, block in ipairs(blocks) do
      it(("decides block %d of priorities.txt in the script"):format(b), function()
         local store = store_module.limiter(redis.client, 1, { period = block.emission / 1e9,
            burst = block.burst, priorities = block.classes, name = "v" .. b })
         for i, op in ipairs(block.ops) do
            local now = op.now / 1e9
            local where = ("block %d op %d"):format(b, i)
            local method = op.commit and store.check or store.peek
            local allowed, remaining, retry_after, reset_after =
               method(store, "k", op.cost, now, op.name)
            assert.are.equal(op.allowed, allowed, "allowed, " .. where)
            assert.are.equal(op.remaining, remaining, "remaining, " .. where)
            assert.are.equal(seconds(op.retry), retry_after, "retry, " .. where)
            assert.are.equal(op.reset / 1e9, reset_after, "reset, " .. where)
            local got
            if op.commit then
               got = store:allow("a", op.cost, now, op.name)
            else
               got = store:peek("a", op.cost, now, op.name)
            end
            assert.are.equal(op.allowed, got, "allow, " .. where)
         end
      end)
   end

   it("refuses a class the limit lacks, naming priority", function()
      local store = store_module.limiter(redis.client, 10, { burst = 10,
         priorities = { bulk = 0.5, critical = 0 } })
      assert.has_error(function() store:allow("k", 1, nil, "nope") end)
      local ok, err = pcall(store.allow, store, "k", 1, nil, "nope")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("^[^\n]*priority"))
      local plain = store_module.limiter(redis.client, 10, { burst = 10 })
      ok, err = pcall(plain.check, plain, "k", 1, nil, "bulk")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("priority"))
      ok, err = pcall(store_module.limiter, redis.client, 10,
         { algorithm = "fixed_window", priorities = { a = 0 } })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("priorities"))
   end)

   it("keeps half the burst from bulk for critical", function()
      local store = store_module.limiter(redis.client, 1, { period = 3600, burst = 10,
         priorities = { bulk = 0.5, critical = 0 }, name = "share" })
      local bulk, critical = 0, 0
      for _ = 1, 10 do
         if store:allow("k", 1, nil, "bulk") then bulk = bulk + 1 end
      end
      for _ = 1, 10 do
         if store:allow("k", 1, nil, "critical") then critical = critical + 1 end
      end
      assert.are.equal(5, bulk)
      assert.are.equal(5, critical)
   end)
end)
