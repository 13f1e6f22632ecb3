-- The options of every constructor (tests/vectors/options.txt, written by the
-- reference model) through every Lua constructor: each vector's values are
-- given to the constructor itself, which must take them or raise the status's
-- words; and to cellrate._check_options, which must give the same outcome and
-- the value normalised. An unknown name raises "unknown option", suggesting a
-- near one. The rate list grammar (tests/vectors/rates.txt) and which
-- algorithms take a burst, asked of the core. The Python face reads the same
-- lines (tests/python/test_options.py); cellrate.nginx's options (Policy) run
-- here through the core's judge, and inside nginx in tests/nginx.
package.path = "lua/?.lua;" .. package.path

local cellrate = require "cellrate"
local store = require "cellrate.redis"
local share = require "cellrate.share"
local support = dofile("tests/lua/support.lua")(assert)

local VECTORS = "tests/vectors/"
local vectors = dofile("tests/lua/options.lua")(VECTORS)
local STATUS, CHECKS, UNKNOWN, TAKES_BURST =
   vectors.status, vectors.checks, vectors.unknown, vectors.takes_burst
local decode, SPECIAL = vectors.decode, vectors.special

local function lines_of(name)
   local lines = {}
   for line in io.lines(VECTORS .. name) do
      lines[#lines + 1] = line
   end
   return lines
end

local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local MADE = {} -- the region paths made, removed after each check
local function fresh_path()
   MADE[#MADE + 1] = support.fresh_path("options")
   return MADE[#MADE]
end

-- A client the Redis stores take (nothing is sent while they are made).
local CLIENT = {
   evalsha = function() return nil, "no server" end,
   eval = function() return nil, "no server" end,
   script = function() return nil, "no server" end,
}

-- Each constructor of the table, made by every Lua function it names
-- (cellrate.nginx's options, Policy, need nginx: the core's judge alone here).
local CONSTRUCTORS = {
   Limiter = { function(opts) return cellrate.limiter(10, opts) end },
   KeyedLimiter = { function(opts) return cellrate.keyed(10, opts) end },
   Limit = { function(opts) return cellrate.limit_spec(10, opts) end },
   reconfigure = {
      function(opts) return cellrate.limiter(10):reconfigure(10, opts) end,
      function(opts) return cellrate.keyed(10):reconfigure(10, opts) end,
   },
   Concurrency = { function(opts) return cellrate.concurrency(2, opts) end },
   RedisLimiter = { function(opts) return store.limiter(CLIENT, 10, opts) end },
   RedisConcurrency = { function(opts) return store.concurrency(CLIENT, 2, opts) end },
   ShareLimiter = { function(opts) return share.limiter(nil, 10, opts) end },
   KeyedShareLimiter = { function(opts) return share.keyed(nil, 10, opts) end },
   Policy = {},
}

local function without_position(err)
   return (tostring(err):gsub("^[^\n]-:%d+: ", "", 1))
end

local function normalised_matches(expected, got, given)
   local value_type, literal = expected:match("^([^:]+):(.*)$")
   if value_type == "absent" then
      return got == nil
   elseif value_type == "given" then
      return rawequal(got, given)
   elseif value_type == "boolean" then
      return got == (literal == "true")
   elseif value_type == "integer" or value_type == "number" then
      if literal == "nan" then
         return got ~= got
      end
      return type(got) == "number" and got == (SPECIAL[literal] or tonumber(literal))
   end
   return got == decode(literal)
end

local function show(check)
   return ("options.txt:%d %s"):format(check.line, check.constructor)
end

local function run_check(check)
   local opts, first = {}, nil
   for _, value in ipairs(check.values) do
      opts[value.name] = vectors.value(value.type, value.literal, fresh_path)
      first = first or value.name
   end
   -- the core's judge, through the binding
   local ok, normalised = pcall(cellrate._check_options, check.constructor, opts)
   if check.outcome == "OK" then
      assert(ok, show(check) .. ": " .. tostring(normalised))
      assert(normalised_matches(check.expected, normalised[first], opts[first]),
             show(check) .. ": normalised " .. tostring(normalised[first]))
   else
      assert(not ok, show(check) .. ": taken")
      assert.equal(STATUS[check.status], without_position(normalised), show(check))
   end
   -- every constructor the table's name stands for; a calendar quota's zone and
   -- algorithm are judged with its rate (cr_limit_init), in calendar_spec.lua
   if opts.tz ~= nil or opts.algorithm == "calendar" then
      return
   end
   for _, make in ipairs(CONSTRUCTORS[check.constructor]) do
      local made, err = pcall(make, opts)
      if check.outcome == "OK" then
         assert(made, show(check) .. ": " .. tostring(err))
      else
         assert(not made, show(check) .. ": made")
         assert.equal(STATUS[check.status], without_position(err), show(check))
      end
   end
   for i = #MADE, 1, -1 do
      os.remove(MADE[i])
      MADE[i] = nil
   end
end

describe("the options of every constructor (options.txt)", function()
   it("cover every constructor of the Lua face", function()
      local seen = {}
      for _, check in ipairs(CHECKS) do
         seen[check.constructor] = true
      end
      for name in pairs(CONSTRUCTORS) do
         assert.is_true(seen[name], name)
      end
      assert.is_true(#CHECKS > 800)
   end)

   local names = {}
   for name in pairs(CONSTRUCTORS) do
      names[#names + 1] = name
   end
   table.sort(names)
   for _, name in ipairs(names) do
      it("every option of " .. name, function()
         local count = 0
         for _, check in ipairs(CHECKS) do
            if check.constructor == name then
               run_check(check)
               count = count + 1
            end
         end
         assert.is_true(count > 0)
      end)
   end

   it("refuses an unknown name, suggesting a near one", function()
      assert.is_true(#UNKNOWN > 0)
      local required = { ShareLimiter = { name = "fleet" }, KeyedShareLimiter = { name = "fleet" },
                         RedisConcurrency = { lease = 30 } }
      for _, case in ipairs(UNKNOWN) do
         local wanted = "unknown option '" .. case.name .. "'"
         if case.suggested ~= "-" then
            wanted = wanted .. " (did you mean '" .. case.suggested .. "'?)"
         end
         local ok, err = pcall(cellrate._check_options, case.constructor, { [case.name] = 1 })
         assert(not ok, case.line)
         assert.equal(wanted, without_position(err), case.line)
         for _, make in ipairs(CONSTRUCTORS[case.constructor]) do
            local opts = { [case.name] = 1 }
            for name, value in pairs(required[case.constructor] or {}) do
               opts[name] = value
            end
            local made, why = pcall(make, opts)
            assert(not made, case.line)
            assert.equal(wanted, without_position(why), case.line)
         end
      end
   end)

   it("refuses what is no constructor", function()
      assert.has_error(function() cellrate._check_options("Nothing", {}) end)
      local ok, err = pcall(cellrate._check_options, "Limiter", 5)
      assert.is_false(ok)
      assert.is_truthy(without_position(err):find("^opts must be a table"))
   end)

   it("asks the core which algorithms take a burst", function()
      assert.is_true(#TAKES_BURST == 4)
      for _, case in ipairs(TAKES_BURST) do
         assert.equal(case.takes, cellrate._algorithm_takes_burst(case.algorithm), case.algorithm)
      end
      local ok, err = pcall(cellrate._algorithm_takes_burst, "bogus")
      assert.is_false(ok)
      assert.equal(STATUS.E_ALGORITHM, without_position(err))
   end)
end)

describe("several limits in one rate string (rates.txt)", function()
   it("are the parts the core reads", function()
      local count = 0
      for number, line in ipairs(lines_of("rates.txt")) do
         local head, text = line:match("^(rates .-) |(.*)$")
         if head then
            local words = words_of(head)
            local ok, parts = pcall(cellrate.parse_rates, text, words[3] == "1")
            if words[2] == "OK" then
               assert(ok, number)
               assert.equal(tonumber(words[4]), #parts, number)
               for i, part in ipairs(parts) do
                  local at = 5 + (i - 1) * 5
                  assert.equal(tonumber(words[at]), part.rate, number)
                  assert.equal(tonumber(words[at + 1]), part.period, number)
                  local start, length = tonumber(words[at + 2]), tonumber(words[at + 3])
                  assert.equal(text:sub(start + 1, start + length), part.text, number)
                  assert.equal(words[at + 4] ~= "-" and words[at + 4] or nil, part.calendar, number)
               end
            else
               assert(not ok, number)
               assert.equal(STATUS[words[2]], without_position(parts), number)
            end
            count = count + 1
         end
      end
      assert.is_true(count > 20)
      assert.equal(STATUS.E_RATE, without_position(select(2, pcall(cellrate.parse_rates, 5))))
   end)
end)
