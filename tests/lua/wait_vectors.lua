-- The wait plan (tests/vectors/wait.txt; its header says the format) through
-- the plans Lua code steps (lim:_wait_plan, as cellrate.nginx does), for
-- busted (tests/lua/wait_vectors_spec.lua, Lua 5.4 and LuaJIT) and inside
-- nginx (tests/nginx/wait.conf.in):
--   local result = dofile("tests/lua/wait_vectors.lua")(cellrate, path)
-- result: { checked = lines, failures = { text, ... } }. Every time in the
-- file is whole ms, which a double's seconds hold exactly.
local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local function seconds(word)
   if word == "never" then
      return nil
   end
   return tonumber(word) / 1e9
end

-- seconds as whole ns (math.huge: "never")
local function ns(value)
   if value == math.huge then
      return "never"
   end
   return string.format("%.0f", value * 1e9)
end

return function(cellrate, path)
   local result = { checked = 0, failures = {} }
   local limiter, plans
   local probe = assert(cellrate.limiter(1))
   local number = 0
   for line in io.lines(path) do
      number = number + 1
      local w = words_of(line)
      local ok, problem = true, nil
      if #w == 0 or w[1]:sub(1, 1) == "#" then
         ok = nil
      elseif w[1] == "answer" then
         local plan = probe:_wait_plan(1, seconds(w[2]), 0)
         local wait = w[4] == "never" and math.huge or tonumber(w[4]) / 1e9
         local action, sleep = plan:answer(wait, tonumber(w[3]) / 1e9)
         ok = action == w[5] and ns(sleep) == w[6]
         problem = action .. " " .. ns(sleep)
      elseif w[1] == "limit" then
         local options = { period = tonumber(w[4]) / 1e9, algorithm = w[2] }
         if w[5] ~= "-" then
            options.burst = tonumber(w[5])
         end
         limiter, plans = assert(cellrate.limiter(tonumber(w[3]), options)), {}
      elseif w[1] == "begin" then
         plans[w[2]] = limiter:_wait_plan(tonumber(w[3]), seconds(w[4]), seconds(w[5]))
      elseif w[1] == "step" then
         local action, value = plans[w[2]]:step(seconds(w[3]))
         if action == "go" then
            ok = w[4] == "go" and value == nil
         elseif action == "sleep" then
            ok = w[4] == "sleep" and ns(value) == w[5]
         else
            ok = w[4] == action and ns(value) == w[6]
         end
         problem = action .. " " .. tostring(value and ns(value))
      elseif w[1] == "leave" then
         plans[w[2]]:leave(seconds(w[3]))
      else
         ok, problem = false, "not understood"
      end
      if ok ~= nil then
         result.checked = result.checked + 1
         if not ok then
            result.failures[#result.failures + 1] =
               string.format("line %d: %s: got %s", number, line, tostring(problem))
         end
      end
   end
   return result
end
