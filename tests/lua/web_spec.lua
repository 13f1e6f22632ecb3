-- The web rules (tests/vectors/web.txt, written by tests/model/web_model.py)
-- through the Lua face, under Lua 5.4 and LuaJIT: an address's key as text
-- and as bytes (under LuaJIT also through cellrate.ffi, as cellrate.nginx
-- keys a request), a refusal's status, the prefix lengths, the fields a dry
-- run leaves out, a count and a settlement. The C tests, pytest and nginx
-- (tests/nginx/test_web_rules.py) read the same file; the proxies' lines are
-- the Python face's (nginx reads a proxy's field with its realip module).
local cellrate = require "cellrate"
package.path = "lua/?.lua;" .. package.path -- cellrate.ffi from this tree

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local web = dofile(here .. "web_vectors.lua")(here .. "../vectors/web.txt")
local text, hex, number = web.text, web.hex, web.number

-- The core's words for a status named in the vectors (tests/vectors/status.txt).
local MESSAGES = {}
for line in io.lines(here .. "../vectors/status.txt") do
   local name, message = line:match("^status %d+ ([%w_]+) %S+ %S+ |(.*)$")
   if name then
      MESSAGES[name] = message
   end
end

local function lines(kind)
   local found = web.lines[kind]
   assert(found and #found > 0, "no " .. kind .. " lines in web.txt")
   return found
end

-- Every line's mismatch, by `check` (nil when the line holds).
local function wrong_lines(kind, check)
   local wrong = {}
   for _, line in ipairs(lines(kind)) do
      local why = check(line)
      if why then
         wrong[#wrong + 1] = ("web.txt:%d: %s"):format(line.line, why)
      end
   end
   return table.concat(wrong, "\n")
end

-- nil when `fn` raises exactly the core's message of `status`.
local function raises(status, fn, ...)
   local ok, err = pcall(fn, ...)
   if ok then
      return "accepted, want " .. status
   elseif tostring(err) ~= MESSAGES[status] then
      return ("raised %q, want %q"):format(tostring(err), MESSAGES[status])
   end
end

describe("the web rules (tests/vectors/web.txt)", function()
   it("keys an address given as text", function()
      assert.equal("", wrong_lines("key", function(line)
         local got = cellrate.address_key(text(line[2]), number(line[3]), number(line[4]))
         if got ~= line[5] then
            return ("%q: %q, want %q"):format(text(line[2]), got, line[5])
         end
      end))
   end)

   it("keys an address given as bytes", function()
      local fast = type(jit) == "table" and require "cellrate.ffi"
      assert.equal("", wrong_lines("bytes", function(line)
         local bytes, ipv4, ipv6 = hex(line[2]), number(line[3]), number(line[4])
         local got = cellrate.binary_address_key(bytes, ipv4, ipv6)
         if got ~= line[5] then
            return ("%s: %q, want %q"):format(line[2], got, line[5])
         end
         if fast and fast.address_key(bytes, ipv4, ipv6) ~= line[5] then
            return ("%s through cellrate.ffi: %q, want %q"):format(
               line[2], fast.address_key(bytes, ipv4, ipv6), line[5])
         end
      end))
   end)

   it("keys with the default prefixes, 32 and 64, when none is given", function()
      assert.equal("192.0.2.1", cellrate.address_key("192.0.2.1"))
      assert.equal("2001:db8:1:2::/64", cellrate.address_key("2001:db8:1:2::1"))
      assert.equal("unknown", cellrate.binary_address_key(nil))
   end)

   it("checks a refusal's status", function()
      assert.equal("", wrong_lines("refusal_status", function(line)
         local status = number(line[2])
         if line[3] ~= "OK" then
            return raises(line[3], cellrate.check_refusal_status, status)
         end
         local ok, got = pcall(cellrate.check_refusal_status, status)
         if not ok or got ~= status then
            return ("%s: %s, want it taken"):format(line[2], tostring(got))
         end
      end))
      assert.is_nil(raises("E_STATUS", cellrate.check_refusal_status, 429.5))
      assert.is_nil(raises("E_STATUS", cellrate.check_refusal_status, "429"))
   end)

   it("checks the prefix lengths, wherever they are given", function()
      local fast = type(jit) == "table" and require "cellrate.ffi"
      assert.equal("", wrong_lines("prefix", function(line)
         local name, prefix = "ipv" .. line[2] .. "_prefix", number(line[3])
         local ipv4, ipv6 = nil, nil
         if line[2] == "4" then ipv4 = prefix else ipv6 = prefix end
         if line[4] == "OK" then
            if cellrate.check_address_prefix(name, prefix) ~= prefix then
               return name .. " " .. line[3] .. " not taken"
            end
            return nil
         end
         return raises(line[4], cellrate.check_address_prefix, name, prefix)
            or raises(line[4], cellrate.address_key, "192.0.2.1", ipv4, ipv6)
            or (fast and raises(line[4], fast.address_key, "\192\0\2\1", ipv4, ipv6))
      end))
   end)

   it("leaves the fields of a dry run out as the model does", function()
      local removed = {}
      for _, name in ipairs(cellrate.dry_run_removed()) do
         removed[name] = true
      end
      assert.equal("", wrong_lines("dry_run", function(line)
         if (removed[line[2]] == true) ~= (line[3] == "removed") then
            return line[2] .. ": want " .. line[3]
         end
      end))
   end)

   it("reads a count as text", function()
      assert.equal("", wrong_lines("count", function(line)
         local total, units, clipped = cellrate.settle(0, text(line[2]), nil)
         if line[3] == "bad" then
            if total ~= nil or units ~= MESSAGES.E_CHARGE_COUNT then
               return ("%q: %s, want no count"):format(text(line[2]), tostring(total))
            end
         elseif total ~= number(line[3]) or units ~= total or clipped ~= false then
            return ("%q: %s, want %s"):format(text(line[2]), tostring(total), line[3])
         end
      end))
   end)

   it("settles a count as the model settles it", function()
      assert.equal("", wrong_lines("settle", function(line)
         local charged, count = number(line[2]), number(line[3])
         local most = line[4] ~= "-" and number(line[4]) or nil
         local total, units, clipped = cellrate.settle(charged, count, most)
         if line[5] == "bad" then
            if total ~= nil or units ~= MESSAGES.E_CHARGE_COUNT then
               return "settled " .. tostring(total) .. ", want no count"
            end
         elseif total ~= number(line[5]) or units ~= number(line[6])
            or clipped ~= (line[7] == "1") then
            return ("%s %s %s, want %s %s %s"):format(tostring(total), tostring(units),
               tostring(clipped), line[5], line[6], line[7])
         end
      end))
   end)
end)
