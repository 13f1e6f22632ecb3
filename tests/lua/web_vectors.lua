-- The lines of tests/vectors/web.txt (its header says the format), for the
-- Lua run (tests/lua/web_spec.lua) and the nginx run
-- (tests/nginx/test_web_rules.py) of the web rules (docs/design/http.md):
--   local web = dofile("tests/lua/web_vectors.lua")(path)
--   web.lines.key    -- { { "key", address, ipv4, ipv6, key, line = n }, ... }
--   web.text(field)  -- a text field's bytes ("%XX" decoded, "-" for none)
--   web.hex(field)   -- a bytes field's bytes (hex pairs, "-" for none)
--   web.number(field) -- a decimal field as a number (an integer on Lua 5.4)
local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local function text(field)
   if field == "-" then
      return ""
   end
   return (field:gsub("%%(%x%x)", function(pair) return string.char(tonumber(pair, 16)) end))
end

local function hex(field)
   if field == "-" then
      return ""
   end
   return (field:gsub("%x%x", function(pair) return string.char(tonumber(pair, 16)) end))
end

-- Lua 5.4 reads "9223372036854775807" as an integer; LuaJIT as the double
-- 2^63, which the binding saturates to INT64_MAX, as the core reads it.
local function number(field)
   return math.tointeger and math.tointeger(tonumber(field)) or tonumber(field)
end

return function(path)
   local lines = {}
   local n = 0
   for line in io.lines(path) do
      n = n + 1
      if line ~= "" and line:sub(1, 1) ~= "#" then
         local words = words_of(line)
         words.line = n
         local kind = words[1]
         lines[kind] = lines[kind] or {}
         lines[kind][#lines[kind] + 1] = words
      end
   end
   return { lines = lines, text = text, hex = hex, number = number }
end
