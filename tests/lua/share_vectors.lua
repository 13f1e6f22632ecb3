-- The fleet share's member rules (tests/vectors/share.txt; its header says the
-- format) through the functions cellrate.share calls (cellrate._share_*),
-- for busted (tests/lua/share_vectors_spec.lua, Lua 5.4 and LuaJIT) and
-- inside nginx (tests/nginx/share.conf.in), where the host member runs them:
--   local result = dofile("tests/lua/share_vectors.lua")(cellrate, path)
-- result: { checked = lines, skipped = lines, failures = { text, ... } }.
-- LuaJIT has no 64-bit integers: a line with an integer no double holds
-- exactly is skipped (counted); every other line is checked.
local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

-- A number as %.17g wrote it (Lua reads neither "nan" nor "inf").
local function number(word)
   if word == "nan" then
      return 0 / 0
   elseif word == "inf" then
      return math.huge
   elseif word == "-inf" then
      return -math.huge
   end
   return assert(tonumber(word), word)
end

-- An integer, or nil when this Lua cannot hold it exactly (LuaJIT beyond 2^53).
local function integer(word)
   local value = tonumber(word)
   if math.type == nil and string.format("%.0f", value) ~= word then
      return nil
   end
   return value
end

local function same(got, want)
   if got ~= got or want ~= want then
      return got ~= got and want ~= want
   end
   return got == want
end

local function flag(word)
   return word == "1"
end

local function text(word)
   return word == "-" and "" or word
end

local checks = {}

function checks.constant(cellrate, w)
   if w[2] == "floor_divisor" then
      return cellrate._SHARE_FLOOR_DIVISOR == integer(w[3])
   elseif w[2] == "cold_start" then
      return same(cellrate._SHARE_COLD_START, number(w[3]))
   end
   return true -- the C tests check the others
end

local function fleet(cellrate, rate, period, burst)
   return cellrate.limit_spec(number(rate), { period = number(period), burst = burst })
end

checks["local"] = function(cellrate, w)
   local burst, want_burst = integer(w[4]), integer(w[9])
   if burst == nil or want_burst == nil then
      return nil
   end
   local ok, rate, period, got_burst = pcall(cellrate._share_limit,
                                             fleet(cellrate, w[2], w[3], burst), number(w[5]))
   if w[6] ~= "OK" then
      return not ok
   end
   return ok and same(rate, number(w[7])) and same(period, number(w[8]))
      and got_burst == want_burst
end

function checks.algorithm(cellrate, w)
   local limit = cellrate.limit_spec(number(w[3]), { period = number(w[4]), algorithm = w[2] })
   local ok = pcall(cellrate._share_limit, limit, number(w[5]))
   return ok == (w[6] == "OK")
end

function checks.of(cellrate, w)
   local got = cellrate._share_of(fleet(cellrate, w[2], w[3], integer(w[4])), number(w[5]),
                                  number(w[6]))
   return same(got, number(w[7]))
end

function checks.asked(cellrate, w)
   local n = {}
   for i = 2, 7 do
      n[i] = integer(w[i])
      if n[i] == nil then
         return nil
      end
   end
   local asked, counted = cellrate._share_asked(
      { units_admitted = n[2], units_refused = n[3], units_refunded = n[4] }, n[5])
   return asked == n[6] and counted == n[7]
end

function checks.report(cellrate, w)
   local demand, held, fleet_rate = cellrate._share_report(
      fleet(cellrate, w[2], w[3], integer(w[4])), number(w[5]), number(w[6]), flag(w[7]),
      number(w[8]), flag(w[9]))
   return same(demand, number(w[10])) and same(held, number(w[11]))
      and same(fleet_rate, number(w[12]))
end

function checks.reply(cellrate, w)
   local members = integer(w[3])
   if members == nil then
      return nil
   end
   local share, got_members, target = cellrate._share_reply({ text(w[2]), members, text(w[4]) })
   if w[5] ~= "OK" then
      -- nil, the core's words, the status's name
      return share == nil and type(got_members) == "string" and target == w[5]
   end
   return same(share, number(w[6])) and got_members == members and same(target, number(w[7]))
end

function checks.after(cellrate, w)
   local share, apply, confirm = cellrate._share_after(w[2], number(w[3]), flag(w[4]),
                                                       number(w[5]), number(w[6]))
   return same(share, number(w[7])) and apply == flag(w[8]) and confirm == flag(w[9])
end

return function(cellrate, path)
   local result = { checked = 0, skipped = 0, failures = {} }
   local number_of_line = 0
   for line in io.lines(path) do
      number_of_line = number_of_line + 1
      local w = words_of(line)
      if #w > 0 and w[1]:sub(1, 1) ~= "#" then
         local check = checks[w[1]]
         local ok, passed = pcall(check or error, cellrate, w)
         if ok and passed == nil then
            result.skipped = result.skipped + 1
         else
            result.checked = result.checked + 1
            if not (ok and passed) then
               result.failures[#result.failures + 1] = ("share.txt:%d: %s%s"):format(
                  number_of_line, line, ok and "" or (" (" .. tostring(passed) .. ")"))
            end
         end
      end
   end
   return result
end
