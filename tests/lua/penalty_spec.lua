-- The penalty box (docs/design/penalty.md) through the Lua face, under Lua 5.4
-- and LuaJIT alike: tests/vectors/penalty.txt through the `penalty` option of
-- cellrate.limiter and cellrate.keyed (check and allow), and the refusals the
-- core makes, in the same words as Python.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local NEVER_TEXT = "9223372036854775807"
local unpack_ = table.unpack or unpack -- luacheck: ignore

-- A number as the model writes it (Python's repr: "nan" and "inf" too).
local function number(text)
   if text == "nan" then return 0 / 0 end
   if text == "inf" then return math.huge end
   return assert(tonumber(text), text)
end

local function seconds_match(got, ns_text)
   if ns_text == NEVER_TEXT then return got == math.huge end
   return got == tonumber(ns_text) / 1e9
end

local given, keys = {}, {}
do
   local file = assert(io.open("tests/vectors/penalty.txt", "r"))
   local number_of_line, current = 0, nil
   for line in file:lines() do
      number_of_line = number_of_line + 1
      if line ~= "" and line:sub(1, 1) ~= "#" then
         local words = {}
         for word in line:gmatch("%S+") do words[#words + 1] = word end
         if words[1] == "penalty" then
            current = { after = words[2], ban = number(words[3]),
                        max_ban = words[4] ~= "-" and number(words[4]) or nil }
            given[#given + 1] = { line = number_of_line, penalty = current, status = words[5] }
         elseif words[1] == "limit" then
            keys[#keys + 1] = { penalty = current, emission = tonumber(words[2]),
                                burst = tonumber(words[3]), ops = {} }
         elseif words[1] == "check" or words[1] == "reset" then
            local op = { line = number_of_line, word = words[1] }
            for i = 2, #words do op[#op + 1] = words[i] end
            table.insert(keys[#keys].ops, op)
         end
      end
   end
   file:close()
end

describe("penalty.txt", function()
   it("is read", function()
      assert.is_true(#given > 15 and #keys >= 3)
   end)

   it("builds the penalties the core takes and refuses the others in its words", function()
      for _, case in ipairs(given) do
         local ok, err = pcall(cellrate.limiter, 10, { penalty = case.penalty })
         if case.status == "OK" then
            assert.is_true(ok, ("penalty.txt:%d: %s"):format(case.line, tostring(err)))
         else
            assert.is_false(ok, ("penalty.txt:%d"):format(case.line))
            local status = support.status(case.status)
            assert.are.equal(status.message, (err:gsub("^[^\n]-:%d+: ", "", 1)),
               ("penalty.txt:%d"):format(case.line))
         end
      end
   end)

   for _, make in ipairs({ "limiter", "keyed" }) do
      it("decides each key's operations through cellrate." .. make, function()
         for _, key in ipairs(keys) do
            local opts = { burst = key.burst, penalty = key.penalty }
            local period = key.emission / 1e9
            local checked = cellrate[make](1 / period, opts)
            local allowing = cellrate[make](1 / period, opts)
            local head = make == "keyed" and { "k" } or {}
            for _, op in ipairs(key.ops) do
               local where = ("penalty.txt:%d"):format(op.line)
               if op.word == "reset" then
                  checked:reset(unpack_(head))
                  allowing:reset(unpack_(head))
               else
                  local now = tonumber(op[1]) / 1e9
                  local cost = tonumber(op[2])
                  local args = { cost, now }
                  if make == "keyed" then args = { "k", cost, now } end
                  local allowed, remaining, retry, reset = checked:check(unpack_(args))
                  assert.are.equal(op[3] == "1", allowed, where)
                  assert.are.equal(tonumber(op[4]), remaining, where)
                  assert.is_true(seconds_match(retry, op[5]), where .. " retry " .. retry)
                  assert.is_true(seconds_match(reset, op[6]), where .. " reset " .. reset)
                  assert.are.equal(op[3] == "1", allowing:allow(unpack_(args)), where)
               end
            end
         end
      end)
   end
end)

describe("a bad penalty", function()
   it("names its parameter", function()
      support.raises("ban", cellrate.limiter, 10, { penalty = { after = "5/minute", ban = 0 } })
      support.raises("ban", cellrate.limiter, 10, { penalty = { after = "5/minute", ban = -2 } })
      support.raises("ban", cellrate.limiter, 10, { penalty = { after = "5/minute", ban = "1" } })
      support.raises("max_ban", cellrate.keyed, 10,
         { penalty = { after = "5/minute", ban = 10, max_ban = 1 } })
      support.raises("after", cellrate.keyed, 10, { penalty = { after = 5, ban = 10 } })
      support.raises("after", cellrate.keyed, 10, { penalty = { after = "often", ban = 10 } })
      support.raises("penalty", cellrate.keyed, 10, { penalty = "5/minute" })
   end)

   it("is the region's in a shared region: every opener counts, the newest wins", function()
      local path = support.fresh_path("penalty")
      local first = cellrate.keyed(1, { burst = 1, shared = path,
                                        penalty = { after = "3/hour", ban = 100 } })
      local plain = cellrate.keyed(1, { burst = 1, shared = path })
      assert.is_true(first:check("k", 1, 1))
      assert.is_false(plain:check("k", 1, 1))
      assert.is_false(first:check("k", 1, 1))
      local allowed, _, retry_after = plain:check("k", 1, 1)
      assert.is_false(allowed)
      assert.are.equal(100, retry_after) -- the third refusal, two openers: a ban
      cellrate.keyed(1, { burst = 1, shared = path, penalty = { after = "1/hour", ban = 30 } })
      assert.is_true(first:check("j", 1, 1))
      allowed, _, retry_after = plain:check("j", 1, 1)
      assert.is_false(allowed)
      assert.are.equal(30, retry_after)
      first:reset("k")
      assert.is_true(plain:check("k", 1, 1))
      local info = assert(cellrate.inspect_region(path))
      assert.are.same({ after = 1, within = 3600, ban = 30, max_ban = 30 }, info.penalty)
      assert.are.equal(2, info.stats.bans)
      assert.are.same({}, info.banned) -- 1 s after boot is long past on the clock
      assert.is_true(plain:check("banned-now"))
      assert.is_false(plain:check("banned-now"))
      info = assert(cellrate.inspect_region(path))
      assert.are.equal(1, #info.banned)
      assert.are.equal("banned-now", info.banned[1].key)
      assert.are.equal(10, info.banned[1].key_length)
      assert.is_true(info.banned[1].ban_left > 25 and info.banned[1].ban_left <= 30)
      assert.are.equal(0, info.banned[1].level)
      os.remove(path)
   end)
end)
