-- Priorities inside one limit (docs/design/priorities.md) through the Lua face,
-- under Lua 5.4 and LuaJIT alike: tests/vectors/priorities.txt through
-- cellrate.limiter, cellrate.keyed and a shared region (gcra and token_bucket;
-- every time there is below 2^50 ns, every cost an exact double), the class
-- tables the core refuses, the class names, and the same words as Python.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local NEVER = math.huge

local function lines_of(path)
   local file = assert(io.open(path, "r"))
   local lines = {}
   local number = 0
   for line in file:lines() do
      number = number + 1
      if line ~= "" and line:sub(1, 1) ~= "#" then
         lines[#lines + 1] = { number = number, text = line }
      end
   end
   file:close()
   return lines
end

local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

-- A reserve as the model writes it (Python's repr: "nan" and "inf" too).
local function number(text)
   if text == "nan" then return 0 / 0 end
   if text == "inf" then return math.huge end
   return assert(tonumber(text), text)
end

local function unhex(token)
   return (token:sub(2):gsub("%x%x", function(byte) return string.char(tonumber(byte, 16)) end))
end

-- The vectors, by block: { emission, burst, classes = {name = reserve}, ops = {...} }.
local blocks, tables, finds = {}, {}, {}
for _, line in ipairs(lines_of("tests/vectors/priorities.txt")) do
   local w = words(line.text)
   if w[1] == "limit" then
      blocks[#blocks + 1] = { emission = tonumber(w[2]), burst = tonumber(w[3]), classes = {},
         count = tonumber(w[4]), ops = {} }
   elseif w[1] == "class" then
      blocks[#blocks].classes[w[2]] = tonumber(w[3])
   elseif w[1] == "op" then
      local ops = blocks[#blocks].ops
      ops[#ops + 1] = { line = line.number, name = w[2], now = tonumber(w[3]),
         cost = tonumber(w[4]), commit = w[5] == "1", allowed = w[6] == "1",
         remaining = tonumber(w[7]), retry = w[8], reset = tonumber(w[9]) }
   elseif w[1] == "table" then
      local pairs_given = {}
      for i = 1, tonumber(w[4]) do
         pairs_given[i] = { unhex(w[3 + 2 * i]), number(w[4 + 2 * i]) }
      end
      tables[#tables + 1] = { line = line.number, algorithm = w[2], status = w[3],
         pairs = pairs_given }
   elseif w[1] == "find" then
      finds[#finds + 1] = { line = line.number, status = w[2], name = unhex(w[3]) }
   end
end

-- A retry_after or reset_after in ns as the face gives it in seconds.
local function seconds(ns_text)
   if ns_text == "9223372036854775807" then
      return NEVER
   end
   return tonumber(ns_text) / 1e9
end

describe("priorities.txt", function()
   it("holds the blocks", function()
      assert.is_true(#blocks >= 6)
      assert.is_true(#tables >= 15)
   end)

   for _, algorithm in ipairs({ "gcra", "token_bucket" }) do
      for b, block in ipairs(blocks) do
         it(("block %d as %s: limiter, keyed, shared"):format(b, algorithm), function()
            local opts = { period = block.emission / 1e9, burst = block.burst,
               algorithm = algorithm, priorities = block.classes }
            local shared_opts = {}
            for k, v in pairs(opts) do shared_opts[k] = v end
            shared_opts.shared = support.fresh_path("priorities")
            local lim = cellrate.limiter(1, opts)
            local keyed = cellrate.keyed(1, { period = opts.period, burst = opts.burst,
               algorithm = algorithm, priorities = block.classes, capacity = 64 })
            local shared = assert(cellrate.limiter(1, shared_opts))
            local allow_only = cellrate.limiter(1, opts)
            for _, op in ipairs(block.ops) do
               local now = op.now / 1e9
               local where = ("%s, priorities.txt:%d"):format(algorithm, op.line)
               for _, via in ipairs({ "limiter", "keyed", "shared" }) do
                  local allowed, remaining, retry_after, reset_after
                  if via == "keyed" then
                     local method = op.commit and keyed.check or keyed.peek
                     allowed, remaining, retry_after, reset_after =
                        method(keyed, "k", op.cost, now, op.name)
                  else
                     local store = via == "limiter" and lim or shared
                     local method = op.commit and store.check or store.peek
                     allowed, remaining, retry_after, reset_after =
                        method(store, op.cost, now, op.name)
                  end
                  assert.are.equal(op.allowed, allowed, via .. " allowed, " .. where)
                  assert.are.equal(op.remaining, remaining, via .. " remaining, " .. where)
                  assert.are.equal(seconds(op.retry), retry_after, via .. " retry, " .. where)
                  assert.are.equal(op.reset / 1e9, reset_after, via .. " reset, " .. where)
               end
               local got
               if op.commit then
                  got = allow_only:allow(op.cost, now, op.name)
               else
                  got = allow_only:peek(op.cost, now, op.name)
               end
               assert.are.equal(op.allowed, got, "allow, " .. where)
            end
            shared:close()
            os.remove(shared_opts.shared)
         end)
      end
   end

   it("refuses the tables the core refuses, in its words", function()
      for _, t in ipairs(tables) do
         local classes, distinct, count = {}, true, 0
         for _, pair in ipairs(t.pairs) do
            if classes[pair[1]] ~= nil then
               distinct = false -- a Lua table cannot hold a name twice
            end
            classes[pair[1]] = pair[2]
            count = count + 1
         end
         if distinct then
            local opts = { algorithm = t.algorithm, priorities = classes }
            local calendar = t.algorithm == "calendar" -- a window too, counting per day
            if not (t.algorithm:find("window") or calendar) then
               opts.burst = 10
            end
            local ok, err = pcall(cellrate.limiter, calendar and "10/day" or 10, opts)
            local where = "priorities.txt:" .. t.line
            if t.status == "OK" then
               assert.is_true(ok, where .. ": " .. tostring(err))
            else
               assert.is_false(ok, where)
               local status = support.status(t.status)
               assert.is_truthy(tostring(err):find(status.message, 1, true),
                  where .. ": " .. tostring(err))
            end
         end
         assert.is_true(count == #t.pairs)
      end
   end)

   it("finds the class a decision names, or raises naming priority", function()
      local lim = cellrate.limiter(10, { burst = 10, priorities = blocks[#blocks].classes })
      for _, f in ipairs(finds) do
         local ok, err = pcall(lim.peek, lim, 1, 0, f.name)
         if f.status == "OK" then
            assert.is_true(ok, tostring(err))
         else
            assert.is_false(ok)
            assert.is_truthy(tostring(err):find(support.status(f.status).message, 1, true))
         end
      end
   end)
end)

describe("priority", function()
   local classes = { critical = 0, bulk = 0.5 }

   it("is an error naming priority when it is not a class, or the limit has none", function()
      local lim = cellrate.limiter(10, { burst = 10, priorities = classes })
      for _, bad in ipairs({ 3, "Bulk", true, {} }) do
         local ok, err = pcall(lim.allow, lim, 1, nil, bad)
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find(support.status("E_PRIORITY").message, 1, true))
      end
      local plain = cellrate.keyed(10)
      local ok, err = pcall(plain.check, plain, "k", 1, nil, "bulk")
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(support.status("E_PRIORITY_NONE").message, 1, true))
      assert.is_true(lim:peek(1, nil, nil)) -- nil: no class, the whole burst
   end)

   it("keeps its classes through a live change", function()
      local lim = cellrate.limiter(10, { burst = 10, priorities = classes })
      lim:reconfigure(10, { burst = 20 }, 0)
      local bulk = 0
      for _ = 1, 15 do
         if lim:allow(1, 0, "bulk") then bulk = bulk + 1 end
      end
      assert.are.equal(10, bulk)
   end)

   it("is the region's: another table is refused", function()
      local path = support.fresh_path("priorities-region")
      local first = assert(cellrate.limiter(10, { burst = 10, shared = path, priorities = classes }))
      local lim, err, code = cellrate.limiter(10, { burst = 10, shared = path,
         priorities = { critical = 0, bulk = 0.4 } })
      assert.is_nil(lim)
      assert.is_truthy(err:find(support.status("E_SHARED_PRIORITIES").message, 1, true))
      assert.are.equal("E_SHARED_PRIORITIES", code)
      first:close()
      os.remove(path)
   end)

   it("under overload: bulk stops at its reserve, critical gets the rest", function()
      local lim = cellrate.keyed(1000, { burst = 1000, priorities = classes })
      local bulk, critical = 0, 0
      for _ = 1, 800 do
         if lim:allow("k", 1, 0, "bulk") then bulk = bulk + 1 end
         if lim:allow("k", 1, 0, "critical") then critical = critical + 1 end
      end
      assert.are.equal(1000, bulk + critical)
      assert.is_true(bulk <= 500 and critical >= 500)
   end)
end)
