-- Following a provider through the Lua face (docs/design.md §18), under Lua
-- 5.4 and LuaJIT: tests/vectors/follow.txt replayed through
-- cellrate.read_signal and lim:follow / keyed:follow (in process and in a
-- shared region), and what the face adds: the forms headers come in, and
-- bad arguments in the core's words.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local function decode(token)
   assert(token:sub(1, 1) == "=", token)
   return (token:sub(2):gsub("%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

-- The fields at w[at] (a count, then =name =value pairs) as {name, value}
-- pairs, and the index after them.
local function fields_of(w, at)
   local fields = {}
   local count = tonumber(w[at])
   for i = 1, count do
      fields[i] = { decode(w[at + 2 * i - 1]), decode(w[at + 2 * i]) }
   end
   return fields, at + 2 * count + 1
end

local function read_vectors()
   local signals, refusals, scenarios = {}, {}, {}
   local number = 0
   for line in io.lines("tests/vectors/follow.txt") do
      number = number + 1
      if line ~= "" and line:sub(1, 1) ~= "#" then
         local w = words(line)
         if w[1] == "signal" or w[1] == "refused" then
            local fields, after = fields_of(w, 5)
            local case = { number = number, fields = fields, status = tonumber(w[2]),
               quota = w[3], realtime = w[4] }
            if w[1] == "refused" then
               case.name = w[after]
               refusals[#refusals + 1] = case
            else
               case.bounds = {}
               for i = 1, tonumber(w[after]) do
                  case.bounds[i] = { w[after + 2 * i - 1], tonumber(w[after + 2 * i]) }
               end
               signals[#signals + 1] = case
            end
         elseif w[1] == "limit" then
            scenarios[#scenarios + 1] = { number = number, algorithm = w[2],
               a = tonumber(w[3]), b = tonumber(w[4]), steps = {} }
         elseif w[1] ~= "retry" then -- (retry: the Python adapters', no Lua face)
            local steps = scenarios[#scenarios].steps
            steps[#steps + 1] = { number = number, words = w }
         end
      end
   end
   return signals, refusals, scenarios
end

local SIGNALS, REFUSALS, SCENARIOS = read_vectors()

-- An integer of a vector as this Lua reads the binding's answer.
local function integer(text)
   return math.type and math.tointeger(tonumber(text)) or tonumber(text)
end

-- Seconds of a vector time: exact (the generator keeps every time below 2^50
-- ns or a multiple of 5^9 ns: see tests/lua/vectors_spec.lua).
local function seconds(ns_text)
   local ns = tonumber(ns_text)
   if ns < 2 ^ 50 then
      return ns / 1e9
   end
   return tonumber(ns_text:sub(1, -10)) + tonumber(ns_text:sub(-9)) / 1e9
end

local function duration(ns)
   if ns == integer("9223372036854775807") then
      return math.huge
   end
   return ns / 1e9
end

local function make_store(kind, scenario)
   local opts
   local rate
   if scenario.algorithm == "gcra" then
      rate, opts = 1, { period = scenario.a / 1e9, burst = scenario.b }
   else
      rate, opts = scenario.b, { period = scenario.a / 1e9, algorithm = scenario.algorithm }
   end
   if kind:find("shared") then
      opts.shared = support.fresh_path("follow")
   end
   if kind:find("keyed") then
      opts.capacity = 16
      return assert(cellrate.keyed(rate, opts)), { "key" }, opts.shared
   end
   return assert(cellrate.limiter(rate, opts)), {}, opts.shared
end

describe("follow.txt", function()
   it("holds the vectors", function()
      assert.is_true(#SIGNALS > 300 and #SCENARIOS > 100 and #REFUSALS > 0)
   end)

   it("read_signal reads what the model reads", function()
      local mismatches = {}
      for _, case in ipairs(SIGNALS) do
         local status = case.status ~= 0 and case.status or nil
         local got = cellrate.read_signal(case.fields, status,
            { quota = case.quota, now = seconds(case.realtime) })
         local same = #got == #case.bounds
         for i = 1, #case.bounds do
            same = same and got[i][1] == integer(case.bounds[i][1])
               and got[i][2] == case.bounds[i][2] / 1e9
         end
         if not same then
            mismatches[#mismatches + 1] = ("line %d: %d bounds, want %d"):format(case.number,
               #got, #case.bounds)
         end
      end
      assert.are.same({}, mismatches)
   end)

   it("refuses what the core refuses, in its words", function()
      for _, case in ipairs(REFUSALS) do
         local message = support.status(case.name).message
         local ok, err = pcall(cellrate.read_signal, case.fields, case.status,
            { quota = case.quota, now = seconds(case.realtime) })
         assert.is_false(ok, "line " .. case.number)
         assert.is_truthy(tostring(err):find(message, 1, true), tostring(err))
      end
   end)

   for _, kind in ipairs({ "limiter", "keyed", "shared limiter", "shared keyed" }) do
      it("follow through a " .. kind .. " decides as the model", function()
         local mismatches = {}
         for _, scenario in ipairs(SCENARIOS) do
            local store, key, path = make_store(kind, scenario)
            local function call(method, ...)
               if #key > 0 then
                  return store[method](store, key[1], ...)
               end
               return store[method](store, ...)
            end
            for _, step in ipairs(scenario.steps) do
               local w = step.words
               local t = seconds(w[2])
               local got, want
               if w[1] == "check" then
                  got = tostring((call("check", tonumber(w[3]), t)))
                  want = tostring(w[4] == "1")
               elseif w[1] == "peek" then
                  local allowed, remaining, retry_after, reset_after = call("peek", tonumber(w[3]), t)
                  got = table.concat({ tostring(allowed), tostring(remaining), tostring(retry_after),
                     tostring(reset_after) }, " ")
                  want = table.concat({ tostring(w[4] == "1"), tostring(integer(w[5])),
                     tostring(duration(integer(w[6]))), tostring(tonumber(w[7]) / 1e9) }, " ")
               else
                  local fields, after = fields_of(w, 7)
                  local status = tonumber(w[3])
                  got = tostring(call("follow", fields, status ~= 0 and status or nil,
                     { quota = w[4], pending = tonumber(w[5]), share = tonumber(w[6]), now = t }))
                  want = tostring(w[after] == "1")
               end
               if got ~= want then
                  mismatches[#mismatches + 1] = ("line %d (%s): %s, want %s"):format(step.number,
                     w[1], got, want)
               end
            end
            store:close()
            if path then
               os.remove(path)
            end
         end
         assert.are.same({}, mismatches)
      end)
   end
end)

describe("follow", function()
   it("takes ngx's table of headers: names, and lists for repeated fields", function()
      local bounds = cellrate.read_signal({ ["Retry-After"] = "3" }, 429)
      assert.are.same({ { 0, 3 } }, bounds)
      bounds = cellrate.read_signal({ ["x-ratelimit-remaining"] = { "9", "2" } })
      assert.are.same({ { 2, 0 } }, bounds)
   end)

   it("changes nothing for a response without any signal", function()
      local lim = cellrate.limiter("10/s")
      assert.is_false(lim:follow({ ["Content-Type"] = "text/plain" }, 200))
      assert.is_false(lim:follow({}, 503))
      assert.are.equal(9, select(2, lim:peek()))
   end)

   it("holds every process of a shared region after a 429", function()
      local path = support.fresh_path("follow-shared")
      local one = cellrate.limiter("10/s", { shared = path })
      local two = cellrate.limiter("10/s", { shared = path })
      assert.is_true(one:follow({ ["Retry-After"] = "30" }, 429))
      local allowed, _, retry_after = two:check()
      assert.is_false(allowed)
      assert.is_true(retry_after > 29 and retry_after <= 30)
      one:close()
      two:close()
      os.remove(path)
   end)

   it("names the parameter of a bad argument in the core's words", function()
      local lim = cellrate.limiter("10/s")
      local cases = {
         { "E_HEADERS", function() lim:follow("Retry-After: 3") end },
         { "E_HEADERS", function() lim:follow({ { "Retry-After" } }) end },
         { "E_HEADERS", function() lim:follow({ ["Retry-After"] = 3 }) end },
         { "E_STATUS_CODE", function() lim:follow({}, "429") end },
         { "E_STATUS_CODE", function() lim:follow({}, 600) end },
         { "E_QUOTA", function() lim:follow({}, nil, { quota = "bytes" }) end },
         { "E_PENDING", function() lim:follow({}, nil, { pending = -1 }) end },
         { "E_PENDING", function() lim:follow({}, nil, { pending = 1.5 }) end },
         { "E_SHARE", function() lim:follow({}, nil, { share = 0 }) end },
         { "E_SHARE", function() lim:follow({}, nil, { share = "half" }) end },
         { "E_NOW", function() lim:follow({}, nil, { now = -1 }) end },
      }
      for _, case in ipairs(cases) do
         local status = support.status(case[1])
         local text = support.raises(status.param, case[2])
         assert.are.equal(status.message, text)
      end
      assert.has_error(function() lim:follow({}, nil, { qouta = "tokens" }) end,
         nil)
      assert.are.equal(9, select(2, lim:peek()))
   end)
end)
