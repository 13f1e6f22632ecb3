-- The scenarios of tests/vectors/contract.txt (its header says the format),
-- for the Lua run (tests/lua/contract_spec.lua) and the nginx run
-- (tests/nginx/contract.conf.in) of the cross-face contract (docs/contract.md):
--   local scenarios = dofile("tests/lua/contract.lua")(path)
-- Each scenario: { name =, clock = bool, limits = { { kind, rate, burst }, ... },
-- options = { ... }, requests = { { now, cost, status, allowed, fields }, ... } },
-- fields keyed by the names as written.
local words_of = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

local function option(name, value)
   if name == "status" then
      return tonumber(value)
   elseif name == "name" then
      return value
   end
   assert(value == "true" or value == "false", name .. ": " .. value)
   return value == "true"
end

return function(path)
   local scenarios = {}
   local current
   for line in io.lines(path) do
      local words = words_of(line)
      local kind = words[1]
      if kind == "scenario" then
         current = { name = words[2], clock = words[3] == "clock", limits = {}, options = {},
                     requests = {} }
         scenarios[#scenarios + 1] = current
      elseif kind == "limit" then
         current.limits[#current.limits + 1] = { words[2], words[3], tonumber(words[4]) }
      elseif kind == "option" then
         current.options[words[2]] = option(words[2], words[3])
      elseif kind == "request" then
         local fields = {}
         for i = 6, #words do
            local name, value = words[i]:match("^([^=]+)=(.*)$")
            fields[name] = value
         end
         current.requests[#current.requests + 1] = {
            now = tonumber(words[2]), cost = tonumber(words[3]), status = tonumber(words[4]),
            allowed = words[5] == "1", fields = fields,
         }
      elseif kind ~= nil and kind:sub(1, 1) ~= "#" then
         error(path .. ": unknown line " .. line)
      end
   end
   return scenarios
end
