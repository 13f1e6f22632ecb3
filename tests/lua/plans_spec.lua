-- Plans, a limit per key (docs/design/plans.md) through the Lua face, under
-- Lua 5.4 and LuaJIT alike: tests/vectors/plans.txt through cellrate.keyed
-- with plans (gcra and token_bucket; every time there is below 2^53 ns),
-- keyed:check/peek/allow(key, cost, now, priority, plan), reconfigure with
-- opts.plan, the plan tables the core refuses, the plan names, and the same
-- words as Python.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local function unhex(token)
   return (token:sub(2):gsub("%x%x", function(byte) return string.char(tonumber(byte, 16)) end))
end

local blocks, checks, finds, items = {}, {}, {}, {}
do
   local file = assert(io.open("tests/vectors/plans.txt", "r"))
   local number = 0
   for text in file:lines() do
      number = number + 1
      if text ~= "" and text:sub(1, 1) ~= "#" then
         local w = words(text)
         if w[1] == "table" then
            blocks[#blocks + 1] = { plans = {}, steps = {} }
         elseif w[1] == "plan" then
            local plans = blocks[#blocks].plans
            plans[#plans + 1] = { name = w[2], emission = tonumber(w[3]), burst = tonumber(w[4]) }
         elseif w[1] == "op" or w[1] == "edit" then
            local steps = blocks[#blocks].steps
            steps[#steps + 1] = { line = number, w = w }
         elseif w[1] == "check" then
            local given = {}
            for i = 1, tonumber(w[3]) do
               given[i] = { unhex(w[2 + 2 * i]), w[3 + 2 * i] }
            end
            checks[#checks + 1] = { line = number, status = w[2], given = given }
         elseif w[1] == "find" then
            finds[#finds + 1] = { line = number, status = w[2], name = unhex(w[3]) }
         elseif w[1] == "items" then
            items[#items + 1] = { line = number, status = w[2], count = tonumber(w[3]),
                                  keyed = w[4] == "1", named = w[5] == "1" }
         else
            error("plans.txt:" .. number .. ": " .. text)
         end
      end
   end
   file:close()
end

local function seconds(ns_text)
   if ns_text == "9223372036854775807" then
      return math.huge
   end
   return tonumber(ns_text) / 1e9
end

local function table_of(block, algorithm)
   local default = block.plans[1]
   local plans = {}
   for i = 2, #block.plans do
      local p = block.plans[i]
      plans[p.name] = { 1, period = p.emission / 1e9, burst = p.burst }
   end
   return cellrate.keyed(1, { period = default.emission / 1e9, burst = default.burst,
      algorithm = algorithm, capacity = 1000, plans = plans })
end

describe("plans.txt", function()
   it("holds the blocks", function()
      assert.is_true(#blocks >= 3)
      assert.is_true(#checks >= 10)
   end)

   for _, algorithm in ipairs({ "gcra", "token_bucket" }) do
      for b, block in ipairs(blocks) do
         it("block " .. b .. " as " .. algorithm, function()
            local keyed, allow_only = table_of(block, algorithm), table_of(block, algorithm)
            for _, step in ipairs(block.steps) do
               local w = step.w
               local where = algorithm .. ", plans.txt:" .. step.line
               if w[1] == "edit" then
                  local now = tonumber(w[3]) / 1e9
                  for _, lim in ipairs({ keyed, allow_only }) do
                     lim:reconfigure(1, { period = tonumber(w[4]) / 1e9, burst = tonumber(w[5]),
                        plan = w[2] }, now)
                  end
               else
                  local key, plan, now, cost = w[2], w[3], tonumber(w[4]) / 1e9, tonumber(w[5])
                  local commit = w[6] == "1"
                  local method = commit and keyed.check or keyed.peek
                  local allowed, remaining, retry, reset = method(keyed, key, cost, now, nil, plan)
                  assert.are.equal(w[7] == "1", allowed, where)
                  assert.are.equal(tonumber(w[8]), remaining, where)
                  assert.are.equal(seconds(w[9]), retry, where)
                  assert.are.equal(seconds(w[10]), reset, where)
                  local got
                  if commit then
                     got = allow_only:allow(key, cost, now, nil, plan)
                  else
                     got = allow_only:peek(key, cost, now, nil, plan)
                  end
                  assert.are.equal(w[7] == "1", got, "allow, " .. where)
               end
            end
         end)
      end
   end

   for _, c in ipairs(checks) do
      it("plan table, plans.txt:" .. c.line, function()
         local plans, count, dup = {}, 0, false
         for _, pair in ipairs(c.given) do
            local name, algorithm = pair[1], pair[2]
            if plans[name] then dup = true end
            local window = algorithm:find("_window") ~= nil
            plans[name] = window and { 100, algorithm = algorithm } or { 100, burst = 20 }
            count = count + 1
         end
         -- a plan given as a table takes its own rate, period and burst and the
         -- table's algorithm: an algorithm of its own is read from a rate alone
         local has_window = false
         for _, pair in ipairs(c.given) do
            if pair[2]:find("_window") or pair[2] ~= "gcra" then has_window = true end
         end
         if dup or has_window then
            return -- no Lua table holds a name twice; a plan's own algorithm: Python's Limit
         end
         local ok, err = pcall(cellrate.keyed, 10, { burst = 10, plans = plans })
         if c.status == "OK" then
            assert.is_true(ok, tostring(err))
         else
            assert.is_false(ok)
            assert.is_truthy(tostring(err):find(support.status(c.status).message, 1, true),
               "plans.txt:" .. c.line .. ": " .. tostring(err))
         end
      end)
   end

   for _, c in ipairs(items) do
      it("where a plan is taken, plans.txt:" .. c.line, function()
         local ok, err = pcall(cellrate._check_plan_items, c.count, c.keyed, c.named)
         if c.status == "OK" then
            assert.is_true(ok, tostring(err))
         else
            assert.is_false(ok)
            assert.are.equal(support.status(c.status).message, tostring(err))
         end
      end)
   end

   for _, f in ipairs(finds) do
      it("plan name, plans.txt:" .. f.line, function()
         local keyed = table_of(blocks[#blocks], "gcra")
         if f.status == "OK" then
            assert.is_true(keyed:peek("k", 0, 0, nil, f.name))
            return
         end
         for _, method in ipairs({ keyed.allow, keyed.check, keyed.peek }) do
            local ok, err = pcall(method, keyed, "k", 1, nil, nil, f.name)
            assert.is_false(ok)
            assert.is_truthy(tostring(err):find(support.status(f.status).message, 1, true))
         end
         local ok, err = pcall(keyed.reconfigure, keyed, "5/s", { plan = f.name })
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find(support.status(f.status).message, 1, true))
      end)
   end
end)

describe("plans", function()
   it("name their own window in check_headers' fields", function()
      local keyed = cellrate.keyed(5, { period = 3600, burst = 5, capacity = 16,
                                        plans = { pro = { 20, period = 60, burst = 20 } } })
      local fields = { select(5, keyed:check_headers("a", 1, 0, "pro", false, nil, "pro")) }
      assert.are.same({ "RateLimit-Policy", '"pro";q=20;w=60', "RateLimit", '"pro";r=19;t=3' },
                      fields)
      fields = { select(5, keyed:check_headers("b", 1, 0, nil, false, nil, nil)) }
      assert.are.same({ "RateLimit-Policy", '"default";q=5;w=3600', "RateLimit",
                        '"default";r=4;t=720' }, fields)
      -- cellrate.header_fields of a decision under a plan: that plan's limit
      assert.are.same({ "RateLimit-Policy", '"pro";q=20;w=60', "RateLimit", '"pro";r=18;t=6' },
                      { cellrate.header_fields(keyed, true, 18, 0, 6, "pro", false, "pro") })
      assert.are.same({ "RateLimit-Policy", '"free";q=5;w=3600', "RateLimit", '"free";r=4;t=720' },
                      { cellrate.header_fields(keyed, true, 4, 0, 720, "free", false, nil) })
      local ok, err = pcall(cellrate.header_fields, keyed, true, 4, 0, 720, "x", false, "gold")
      assert.is_false(ok)
      assert.are.equal(support.status("E_PLAN").message, tostring(err))
   end)

   it("take the table's options from a rate", function()
      local keyed = cellrate.keyed("10/s", { algorithm = "token_bucket", plans = { pro = "100/s" } })
      local _, remaining = keyed:peek("k", 0, 0, nil, "pro")
      assert.are.equal(100, remaining)
      _, remaining = keyed:peek("k", 0, 0, nil, "default")
      assert.are.equal(10, remaining)
   end)

   it("refuse bad input, naming plans or plan", function()
      for _, plans in ipairs({ {}, { default = "1/s" }, { [string.rep("x", 32)] = "1/s" },
         "pro", { pro = true }, { [1] = "1/s" } }) do
         local ok, err = pcall(cellrate.keyed, "10/s", { plans = plans })
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find("plans", 1, true), tostring(err))
      end
      local many = {}
      for i = 1, 16 do many["p" .. i] = "1/s" end
      local ok, err = pcall(cellrate.keyed, "10/s", { plans = many })
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(support.status("E_PLANS").message, 1, true))
      local keyed = cellrate.keyed("10/s", { plans = { pro = "100/s" } })
      ok, err = pcall(keyed.allow, keyed, "k", 1, nil, nil, 1)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("plan", 1, true))
      local plain = cellrate.keyed("10/s")
      assert.is_true(plain:allow("k", 1, nil, nil, "default"))
      ok = pcall(plain.allow, plain, "k", 1, nil, nil, "pro")
      assert.is_false(ok)
   end)

   it("live in a shared region", function()
      local path = os.tmpname()
      os.remove(path)
      local pro = { pro = { 100, burst = 20 } }
      -- two tables on one region: two workers, each with its own view
      local a = cellrate.keyed(10, { burst = 10, plans = pro, shared = path })
      local b = cellrate.keyed(10, { burst = 10, plans = pro, shared = path })
      for _ = 1, 6 do assert.is_true(a:allow("k", 1, 0)) end
      assert.equal(20 - 7, select(2, b:check("k", 1, 0, nil, "pro"))) -- carried, counted
      -- an opener with another table: pro changed live, gold new (on the
      -- clock, per hour: a change happens at its opener's instant)
      local hourly = cellrate.keyed("10/h", { burst = 10, plans = { pro = { "100/h", burst = 20 } },
                                             shared = path .. "-h" })
      for _ = 1, 4 do assert.is_true(hourly:allow("k", 1, nil, nil, "pro")) end
      local c = cellrate.keyed("10/h", { burst = 10, shared = path .. "-h",
                                         plans = { pro = { "50/h", burst = 20 },
                                                   gold = { "20/h", burst = 5 } } })
      assert.equal(4, select(2, c:check("g", 1, nil, nil, "gold")))
      assert.equal(5 - 2, select(2, hourly:check("g", 1, nil, nil, "gold")))
      assert.equal(20 - 5, select(2, hourly:check("k", 1, nil, nil, "pro"))) -- carried, counted
      os.remove(path .. "-h")
      -- another pro with on_change = "refuse": the region's errors are returned
      local refused, err = cellrate.keyed(10, { burst = 10, shared = path, on_change = "refuse",
                                               plans = { pro = { 10, burst = 20 } } })
      assert.is_nil(refused)
      assert.is_truthy(err:find("rate", 1, true))
      local many = {}
      for i = 1, 15 do many["p" .. i] = 1 end
      local ok
      ok, err = pcall(cellrate.keyed, 10, { burst = 10, shared = path, plans = many })
      assert.is_false(ok) -- 1 + 1 + 15 names: more than the region holds, raised
      assert.is_truthy(tostring(err):find(support.status("E_SHARED_PLANS").message, 1, true))
      os.remove(path)
   end)

   it("check_all's items name a key's plan", function()
      local keyed = cellrate.keyed(10, { burst = 10, plans = { pro = { 100, burst = 20 } } })
      local other = cellrate.keyed(1000, { burst = 1000 })
      local allowed, remaining = cellrate.check_all({ { keyed, "k", "pro" }, { other, "k" } }, 6, 5)
      assert.is_true(allowed)
      assert.equal(14, remaining)
      assert.equal(13, select(2, keyed:peek("k", 1, 5, nil, "pro")))
      allowed, remaining = cellrate.check_all({ { keyed, "k" }, { other, "k" } }, 1, 5)
      assert.is_true(allowed)
      assert.equal(10 - 6 - 1, remaining) -- back to "default", 6 units carried
      local ok, err = pcall(cellrate.check_all, { { keyed, "k", "gold" } }, 1, 5)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(support.status("E_PLAN").message, 1, true))
   end)

   it("inspect_key reads a key's plan and its units, inspect_region the plan table", function()
      local path = os.tmpname()
      os.remove(path)
      local keyed = cellrate.keyed("5/h", { plans = { pro = "20/h" }, shared = path })
      for _ = 1, 5 do assert.is_true(keyed:allow("free")) end
      for _ = 1, 3 do assert.is_true(keyed:allow("paid", 1, nil, nil, "pro")) end
      local info = assert(cellrate.inspect_region(path))
      assert.are.same({ default = { rate = 5, period = 3600, burst = 5 },
                        pro = { rate = 20, period = 3600, burst = 20 } }, info.plans)
      local free = assert(cellrate.inspect_key(path, "free"))
      assert.equal("default", free.plan)
      assert.are.same({ 5, 0, 5 }, { free.used, free.remaining, free.limit.burst })
      local paid = assert(cellrate.inspect_key(path, "paid"))
      assert.are.same({ "pro", 3, 17 }, { paid.plan, paid.used, paid.remaining })
      -- the upgraded key: its 5 units carried, read before and after its move
      assert.is_true(keyed:allow("free", 1, nil, nil, "pro"))
      free = assert(cellrate.inspect_key(path, "free"))
      assert.are.same({ "pro", 6, 14 }, { free.plan, free.used, free.remaining })
      local idle = assert(cellrate.inspect_key(path, "never"))
      assert.are.same({ "never", 0 }, { idle.key, idle.used })
      assert.is_nil(idle.plan)
      local plain = os.tmpname()
      os.remove(plain)
      cellrate.limiter("5/h", { shared = plain })
      local ok, err = pcall(cellrate.inspect_key, plain, "k")
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(support.status("E_INSPECT_KEY").message, 1, true))
      assert.is_nil(assert(cellrate.inspect_region(plain)).plans)
      os.remove(path)
      os.remove(plain)
   end)

   -- key "a" spent the default's burst of 2 (1/s) at 0; moved to "paid"
   -- (10/s, burst 5) at 0 it carries 2 units used, 3 left (§8's rule)
   local function moved()
      local keyed = cellrate.keyed("1/s", { burst = 2, plans = { paid = { "10/s", burst = 5 } } })
      assert.is_true(keyed:allow("a", 2, 0))
      return keyed
   end

   it("are taken by every operation on a key", function()
      local keyed = moved()
      assert.are.equal(3, keyed:take("a", 10, 0, "paid")) -- "default" would give none
      keyed = moved()
      assert.are.equal(0, keyed:reserve("a", 3, 0, 0, "paid"))
      assert.is_nil(keyed:reserve("a", 1, 0, 0, "paid"))
      keyed = moved()
      local allowed, remaining = keyed:charge("a", 3, 0, "paid")
      assert.are.same({ true, 0 }, { allowed, remaining })
      keyed = moved()
      keyed:refund("a", 2, 0, "paid")
      assert.are.equal(4, select(2, keyed:peek("a", 1, 0, nil, "paid")))
      keyed = moved()
      keyed:anchor("a", 1, 0, "paid")
      assert.are.equal(2, select(2, keyed:peek("a", 1, 0, nil, "paid")))
      keyed = moved()
      assert.is_true(keyed:follow("a", { ["Retry-After"] = "30" }, 429, { now = 0, plan = "paid" }))
      assert.is_false(keyed:peek("a", 1, 0, nil, "paid"))
      -- waits: slow limits, so that no unit comes back while the test runs
      keyed = cellrate.keyed("1/m", { burst = 2, plans = { paid = { "10/m", burst = 5 } } })
      assert.is_true(keyed:allow("a", 2))
      assert.are.equal("go", (keyed:_wait_plan("a", 1, 0, nil, "paid"):step()))
      assert.is_truthy(keyed:wait("a", 2, 0, "paid"))
      assert.are.same({ nil, "timeout" }, { keyed:wait("a", 1, 0, "paid") })
   end)

   it("are refused by name by every operation on a key", function()
      local keyed = moved()
      local calls = {
         function() return keyed:take("a", 1, nil, "gold") end,
         function() return keyed:reserve("a", 1, nil, nil, "gold") end,
         function() return keyed:charge("a", 1, nil, "gold") end,
         function() return keyed:refund("a", 1, nil, "gold") end,
         function() return keyed:anchor("a", 1, nil, "gold") end,
         function() return keyed:wait("a", 1, nil, "gold") end,
         function() return keyed:_wait_plan("a", 1, nil, nil, "gold") end,
         function() return keyed:follow("a", {}, 200, { plan = "gold" }) end,
      }
      for _, call in ipairs(calls) do
         local ok, err = pcall(call)
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find(support.status("E_PLAN").message, 1, true), tostring(err))
      end
      assert.is_false(keyed:peek("a", 1, 0))
   end)
end)
