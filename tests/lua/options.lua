-- The lines of tests/vectors/options.txt (its header says the format) and the
-- messages of status.txt, for the Lua run (tests/lua/options_spec.lua) and the
-- nginx run (tests/nginx/contract.conf.in) of every constructor's options:
--   local vectors = dofile("tests/lua/options.lua")("tests/vectors/")
-- vectors.checks: the checks of the Lua face ({ line, constructor, outcome,
-- status, expected, values = { { name, type, literal }, ... } }); unknown:
-- { line, constructor, name, suggested }; takes_burst: { algorithm, takes };
-- status: name -> message; value(type, literal, path): a value as Lua gives it
-- (nil: absent; "@tmp": path()); decode(literal): a string's bytes.
local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local function decode(literal)
   if literal == "%" then
      return ""
   end
   return (literal:gsub("%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

local SPECIAL = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }
local A_TABLE = {}
local function a_function() return "k" end -- a key function's key, too

local function value(value_type, literal, path)
   if value_type == "absent" then
      return nil
   elseif value_type == "boolean" then
      return literal == "true"
   elseif value_type == "integer" then
      return math.tointeger and math.tointeger(tonumber(literal)) or tonumber(literal)
   elseif value_type == "number" then
      return SPECIAL[literal] or tonumber(literal) + 0.0
   elseif value_type == "function" then
      return a_function
   elseif value_type == "table" then
      return A_TABLE
   end
   assert(value_type == "string", value_type)
   if literal == "@tmp" then
      return path()
   end
   return decode(literal)
end

return function(directory)
   local vectors = { checks = {}, unknown = {}, takes_burst = {}, status = {},
                     value = value, decode = decode, special = SPECIAL }
   for line in io.lines(directory .. "status.txt") do
      local name, message = line:match("^status %d+ (%S+) %S+ %S+ |(.*)$")
      if name then
         vectors.status[name] = message
      end
   end
   local number = 0
   for line in io.lines(directory .. "options.txt") do
      number = number + 1
      local words = words_of(line)
      if words[1] == "check" and (words[2] == "both" or words[2] == "lua") then
         local values = {}
         for i = 7, #words do
            local name, value_type, literal = words[i]:match("^([^=]+)=([^:]+):(.*)$")
            values[#values + 1] = { name = name, type = value_type, literal = literal }
         end
         vectors.checks[#vectors.checks + 1] = {
            line = number, constructor = words[3], outcome = words[4], status = words[5],
            expected = words[6], values = values }
      elseif words[1] == "unknown" and words[2] == "lua" then
         vectors.unknown[#vectors.unknown + 1] = { line = number, constructor = words[3],
                                                   name = words[4], suggested = words[5] }
      elseif words[1] == "takes_burst" then
         vectors.takes_burst[#vectors.takes_burst + 1] = { algorithm = words[2],
                                                           takes = words[3] == "1" }
      end
   end
   return vectors
end
