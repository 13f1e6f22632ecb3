-- The Redis store's protocol (tests/vectors/redis.txt, written by the
-- reference model tests/model/redis_model.py) through the Lua face's calls
-- into the core, under Lua 5.4 and LuaJIT: a request's words, a reply's
-- reading, what a failure means, the Cluster slots' message, on_error's
-- answers, the probe's back-off, a key's name. The C tests and pytest
-- (tests/python/test_redis_protocol.py) read the same file; the Lua store
-- keeps no deny cache, so its lines are theirs alone. No server.
local cellrate = require("cellrate")
package.path = "lua/?.lua;" .. package.path
local support = dofile("tests/lua/support.lua")(assert)

local NEVER = "9223372036854775807"
local unpack_ = unpack or table.unpack

local function read()
   local lines = {}
   for line in io.lines("tests/vectors/redis.txt") do
      if line ~= "" and line:sub(1, 1) ~= "#" then
         local fields = {}
         for field in line:gmatch("%S+") do
            fields[#fields + 1] = field
         end
         lines[#lines + 1] = fields
      end
   end
   return lines
end

-- A text field: '-' for none, else a quote and its bytes, %XX escaped.
local function text(field)
   if field == "-" then
      return nil
   end
   assert(field:sub(1, 1) == "'", field)
   return (field:sub(2):gsub("%%(%x%x)", function(hex)
      return string.char(tonumber(hex, 16))
   end))
end

-- A decimal integer: a 5.4 integer, a LuaJIT number (exact below 2^53).
local function integer(field)
   return math.tointeger and math.tointeger(tonumber(field)) or tonumber(field)
end

-- nanoseconds in seconds, as the core converts them
local function seconds(ns)
   return ns == NEVER and math.huge or tonumber(ns) / 1e9
end

local LINES = read()
local MODES, LIMITS = {}, {}
for _, f in ipairs(LINES) do
   if f[1] == "mode" then
      MODES[f[2]] = integer(f[3])
   elseif f[1] == "limit" then
      LIMITS[integer(f[2])] = cellrate.limit_spec(tonumber(f[4]), {
         period = tonumber(f[5]), algorithm = f[3],
         burst = f[6] ~= "-" and integer(f[6]) or nil,
         max_debt = f[7] ~= "-" and integer(f[7]) or nil })
   end
end

-- the core's error of a status, raised by an argument mistake (no position:
-- the core's C function raises it) or answered nil, message, code
local function refused(status, ...)
   local message = support.status(status).message
   local ok, a, b = pcall(...)
   if ok then
      assert.is_nil(a)
      assert.equal(message, b)
   else
      assert.equal(message, a)
   end
end

describe("the Redis protocol's vectors", function()
   it("has the core's constants and words that mean Redis cannot decide", function()
      local store = require("cellrate.redis")
      local protocol = cellrate._redis_protocol()
      local words = {}
      for _, f in ipairs(LINES) do
         if f[1] == "constant" and f[3]:sub(1, 1) ~= "'" then
            local value = protocol[f[2]]
            if f[2]:match("BACKOFF_NS$") then
               value = protocol[f[2]:gsub("_NS$", "_S")] * 1e9
            end
            assert.equal(tonumber(f[3]), value, f[2])
         elseif f[1] == "constant" then
            assert.equal(text(f[3]), protocol[f[2]], f[2])
         elseif f[1] == "mode" then
            assert.equal(integer(f[3]), protocol[f[2]:upper()], f[2])
         elseif f[1] == "unavailable" then
            words[#words + 1] = f[2]
         end
      end
      assert.same(words, store.UNAVAILABLE_REPLIES)
      assert.equal(store.FIRST_BACKOFF_S, protocol.FIRST_BACKOFF_S)
   end)

   it("names keys and signatures as the core does", function()
      local count = 0
      for at, f in ipairs(LINES) do
         if f[1] == "limit" then
            assert.equal("signature", LINES[at + 1][1])
            assert.equal(text(LINES[at + 1][2]), cellrate._redis_signature(LIMITS[integer(f[2])]))
         elseif f[1] == "key" then
            assert.equal(text(f[5]), cellrate._redis_key(text(f[2]), text(f[3]), text(f[4])))
            count = count + 1
         end
      end
      assert.is_true(count >= 5)
   end)

   it("builds every batch's words, reads its reply's shape", function()
      local count = 0
      for at, f in ipairs(LINES) do
         if f[1] == "batch" then
            local after = LINES[at + 1]
            local now = f[2] ~= "-" and tonumber(f[2]) or nil
            local calls, i, arity = {}, 4, true
            for c = 1, integer(f[3]) do
               -- <mode>+marker: the mode with the wipe marker
               local name, marked = f[i]:gsub("%+marker$", "")
               local call = { MODES[name] + (marked > 0 and cellrate._redis_protocol().WIPE_MARKER or 0),
                              integer(f[i + 1]) }
               local n = integer(f[i + 2])
               i = i + 3
               for _ = 1, n do
                  call[#call + 1] = LIMITS[integer(f[i])]
                  call[#call + 1] = text(f[i + 1])
                  call[#call + 1] = text(f[i + 2])
                  call[#call + 1] = text(f[i + 3])
                  i = i + 4
               end
               arity = arity and n > 0
               calls[c] = call
            end
            assert.equal(#f + 1, i)
            if not arity then -- the binding's own check: a call names a limit
               assert.is_false(pcall(cellrate._redis_batch, now, calls))
            elseif after[1] == "refused" then
               refused(after[2], cellrate._redis_batch, now, calls)
            else
               local want = {}
               for w = 3, #after do
                  want[#want + 1] = text(after[w])
               end
               assert.same(want, cellrate._redis_batch(now, calls), table.concat(f, " "))
            end
            count = count + 1
         elseif f[1] == "batch_max" then
            assert.equal(integer(f[2]), require("cellrate.redis").BATCH_MAX)
         elseif f[1] == "batch_reply" then
            local reply = f[3] == "list" and {} or 1
            if f[3] == "list" then
               for e = 1, integer(f[4]) do
                  reply[e] = 0
               end
            end
            if f[5] == "OK" then
               assert.is_true(cellrate._redis_batch_reply(integer(f[2]), reply))
            else
               refused(f[5], cellrate._redis_batch_reply, integer(f[2]), reply)
            end
         end
      end
      assert.is_true(count >= 10)
   end)

   it("builds every request's words", function()
      local count = 0
      for at, f in ipairs(LINES) do
         if (f[1] == "request" or f[1] == "marked") and f[5] ~= "0" then
            local after = LINES[at + 1]
            local cost, nargs = integer(f[3]), 3 + 4 * integer(f[5])
            -- marked: on_wipe = "refuse", the wipe marker after the keys
            local flag = f[1] == "marked" and cellrate._redis_protocol().WIPE_MARKER or 0
            local args = { MODES[f[2]] + flag, cost, f[4] ~= "-" and tonumber(f[4]) or nil }
            for i = 0, integer(f[5]) - 1 do
               local base = 6 + 4 * i
               args[4 + 4 * i] = LIMITS[integer(f[base])]
               args[5 + 4 * i] = text(f[base + 1])
               args[6 + 4 * i] = text(f[base + 2])
               args[7 + 4 * i] = text(f[base + 3])
            end
            -- (every cost of the vectors is an exact double, or INT64_MAX, which
            -- LuaJIT's 2^63 saturates to)
            if after[1] == "refused" then
               refused(after[2], cellrate._redis_request, unpack_(args, 1, nargs))
               count = count + 1
            else
               local words = cellrate._redis_request(unpack_(args, 1, nargs))
               local want = {}
               for i = 3, #after do
                  want[#want + 1] = text(after[i])
               end
               assert.same(want, words, table.concat(f, " "))
               count = count + 1
            end
         end
      end
      assert.is_true(count > 150)
   end)

   it("reads every reply as the core does", function()
      local count = 0
      for at, f in ipairs(LINES) do
         if f[1] == "reply" then
            local after = LINES[at + 1]
            local mode, n = MODES[f[2]], integer(f[3])
            local limits = {}
            for i = 1, n do
               limits[i] = LIMITS[integer(f[3 + i])]
            end
            local reply
            if f[4 + n] == "int" then
               reply = integer(f[5 + n])
            else
               reply = {}
               for i = 6 + n, #f do
                  reply[#reply + 1] = f[i]:sub(1, 1) == "'" and text(f[i]) or integer(f[i])
               end
            end
            if after[1] == "refused" then
               local got, message, code = cellrate._redis_reply(mode, reply, unpack_(limits))
               assert.is_nil(got)
               assert.equal(support.status(after[2]).message, message)
               assert.equal(after[2], code)
            elseif after[1] == "count" then
               assert.equal(integer(after[2]), cellrate._redis_reply(mode, reply, unpack_(limits)))
            else
               local allowed, remaining, retry, reset, clipped, index =
                  cellrate._redis_reply(mode, reply, unpack_(limits))
               local line = table.concat(f, " ")
               assert.equal(after[2] == "1", allowed, line)
               assert.equal(integer(after[3]), remaining, line)
               assert.equal(seconds(after[4]), retry, line)
               assert.equal(seconds(after[5]), reset, line)
               assert.equal(integer(after[7]) + 1, index, line)
               assert.equal(integer(after[6]), limits[index].burst, line)
               assert.equal(after[8] == "1", clipped, line)
            end
            count = count + 1
         end
      end
      assert.is_true(count > 30)
   end)

   it("classifies every failure as the core does", function()
      local kinds = {}
      for _, f in ipairs(LINES) do
         if f[1] == "failure" then
            local message = text(f[3])
            local kind, words = cellrate._redis_classify(text(f[2]), message)
            assert.equal(f[4], kind, table.concat(f, " "))
            assert.equal(f[5] ~= "-" and message:sub(integer(f[5]) + 1) or nil, words)
            kinds[kind] = true
         end
      end
      assert.same({ cannot_decide = true, mistake = true, wrong_algorithm = true,
                    cross_slot = true, no_script = true }, kinds)
   end)

   it("names keys of several Cluster slots in the core's words", function()
      local count = 0
      for _, f in ipairs(LINES) do
         if f[1] == "slots" then
            local n, keys, slots = integer(f[2]), {}, {}
            for i = 1, n do
               keys[i], slots[i] = text(f[1 + 2 * i]), integer(f[2 + 2 * i])
            end
            assert.equal(text(f[3 + 2 * n]), cellrate._redis_slots_message(keys, slots))
            count = count + 1
         end
      end
      assert.equal(3, count)
   end)

   it("answers on_error as the core does: a refusal never below the first back-off", function()
      local count = 0
      for _, f in ipairs(LINES) do
         if f[1] == "unavailable_answer" then
            local limit, allow, cost = LIMITS[integer(f[2])], f[3] == "allow", integer(f[4])
            local probe_in = integer(f[5]) / 1e9
            local allowed, remaining, retry, reset = cellrate._redis_unavailable(
               MODES.check, limit, allow, cost, probe_in)
            assert.same({ f[6] == "1", integer(f[7]), seconds(f[8]), seconds(f[9]) },
                        { allowed, remaining, retry, reset })
            assert.equal(integer(f[11]), cellrate._redis_unavailable(MODES.take, limit, allow,
                                                                    cost, probe_in))
            count = count + 1
         end
      end
      assert.is_true(count >= 9)
   end)

   it("judges, derives and goes back for on_error = 'fallback' as the core does", function()
      local counts = { fallback_check = 0, fallback_limit = 0, going_back = 0, nginx_items = 0 }
      local shares = { nan = 0 / 0, inf = math.huge }
      for _, f in ipairs(LINES) do
         if f[1] == "fallback_check" then
            local ok, err = pcall(cellrate._redis_fallback_check, f[2], f[3] == "1")
            assert.equal(f[4] == "OK", ok, f[2])
            if not ok then
               assert.matches("fallback is the limit", err)
            end
            counts.fallback_check = counts.fallback_check + 1
         elseif f[1] == "nginx_items" then
            local ok, err = pcall(cellrate._redis_nginx_items, integer(f[2]), f[3] == "1",
                                  f[4] == "1")
            assert.equal(f[5] == "OK", ok, table.concat(f, " "))
            if not ok then
               assert.matches(f[5] == "E_NGINX_REDIS_SEVERAL" and "^limits: " or "^client ", err)
            end
            counts.nginx_items = counts.nginx_items + 1
         elseif f[1] == "fallback_limit" then
            local share = shares[f[3]] or tonumber(f[3])
            local ok, got = pcall(cellrate._redis_fallback_limit, LIMITS[integer(f[2])], share)
            assert.equal(f[4] == "OK", ok, f[3])
            if ok then
               assert.same({ f[5], integer(f[6]), integer(f[7]), integer(f[8]) },
                           { got.algorithm, got.emission_ns, got.tolerance_ns, got.burst })
            else
               assert.matches("fallback must be a share", got)
            end
            counts.fallback_limit = counts.fallback_limit + 1
         elseif f[1] == "going_back" then
            local sent, cost, settled = cellrate._redis_going_back(
               MODES[f[3]], integer(f[4]), LIMITS[integer(f[2])], integer(f[5]))
            assert.same({ MODES[f[6]], integer(f[7]), f[8] == "1" }, { sent, cost, settled })
            counts.going_back = counts.going_back + 1
         end
      end
      assert.same({ fallback_check = 8, fallback_limit = 77, going_back = 108, nginx_items = 12 },
                  counts)
   end)

   it("judges a live change as the core does", function()
      local count = 0
      for _, f in ipairs(LINES) do
         if f[1] == "change" then
            local given = f[4] ~= "-" and f[4] or nil
            local ok, err = pcall(cellrate._redis_check_change, f[2] == "1", f[3], given)
            assert.equal(f[5] == "OK", ok, table.concat(f, " "))
            if not ok then
               assert.matches(f[5] == "E_REDIS_NAME_NEEDED" and "name: give the limit a name"
                              or "algorithm: a live change keeps", err)
            end
            count = count + 1
         end
      end
      assert.equal(24, count)
   end)

   it("judges a check_all's items as the core does", function()
      local clients, count = {}, 0
      for _, f in ipairs(LINES) do
         if f[1] == "items" then
            local n, given = integer(f[2]), {}
            for i = 1, n do
               local id = f[2 + i]
               if id == "-" then
                  given[i] = false
               else
                  clients[id] = clients[id] or {}
                  given[i] = clients[id]
               end
            end
            local ok, err = pcall(cellrate._redis_check_items, given, n)
            assert.equal(f[3 + n] == "OK", ok, table.concat(f, " "))
            if not ok then
               assert.matches(f[3 + n] == "E_REDIS_CLIENT" and "items: every limiter"
                              or "items must be a non%-empty list", err)
            end
            count = count + 1
         end
      end
      assert.equal(13, count)
   end)

   it("backs off as the core does", function()
      for _, f in ipairs(LINES) do
         if f[1] == "backoff" then
            assert.equal(seconds(f[3]), cellrate._redis_backoff(integer(f[2]) / 1e9), f[2])
         end
      end
   end)
end)
