-- The shared conformance vectors (tests/vectors/) through the Lua face, under
-- Lua 5.4 and LuaJIT alike.
--
-- The vectors are in integer nanoseconds; Lua speaks float seconds, and
-- LuaJIT has no 64-bit integers. A vector is replayed only where every value
-- passes exactly, by the same rule as tests/python/test_vectors.py
-- (gcra_model.float_face_seconds, which the generator proves on every time):
--
-- * a time t goes in as t / 1e9 when t < 2^50 ns (the quotient is then
--   within 0.12 ns) or t is a multiple of 5^9 ns (t / 1e9 is then k / 2^9,
--   an exact double); a limit (T, burst) as limiter(1, {period = T / 1e9});
-- * under LuaJIT, an integer (burst, cost) goes in only if it is an exact
--   double, or INT64_MAX (2^63 as a double, which the binding saturates to
--   INT64_MAX).
--
-- Anything else is skipped, counted by reason, printed, and bounded. A skipped
-- op that stores nothing (the vectors give the TAT after each op) is skipped
-- alone; after one that stores, the rest of its sequence is skipped, since its
-- state would no longer be known. The C tests replay every vector.
local cellrate = require "cellrate"
-- cellrate.ffi from this tree (tests/lua/run.sh runs at the root)
package.path = "lua/?.lua;" .. package.path

local IS_LUAJIT = type(jit) == "table"
local MAX_SKIPPED_SHARE = IS_LUAJIT and 0.03 or 0.02

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local ROOT = here .. "../../"
local VECTORS = ROOT .. "tests/vectors/"

local function lines_of(name)
   local file = assert(io.open(VECTORS .. name, "r"))
   local lines = {}
   local number = 0
   for line in file:lines() do
      number = number + 1
      line = line:gsub("\r$", "")
      if line ~= "" and line:sub(1, 1) ~= "#" then
         lines[#lines + 1] = { number = number, text = line }
      end
   end
   file:close()
   return lines
end

local words = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
   .. "vector_text.lua").words

---------------------------------------------------------------------------
-- The status table (tests/vectors/status.txt): the messages a face must raise.

local function read_status_table()
   local statuses = {}
   for _, line in ipairs(lines_of("status.txt")) do
      local number, name, class, param, message =
         line.text:match("^status (%d+) ([%w_]+) (%S+) (%S+) |(.*)$")
      if name then
         statuses[name] = { number = tonumber(number), class = class,
            param = param == "-" and "" or param, message = message }
      end
   end
   assert(statuses.OK and statuses.E_RATE_SYNTAX, "cannot read status.txt")
   return statuses
end

local STATUS = read_status_table()

-- nil if `fn` raises the error of `status`, else what went wrong.
local function raised_status(status, fn)
   local ok, err = pcall(fn)
   if ok then
      return "did not raise, want " .. status
   end
   err = tostring(err)
   if not err:find(STATUS[status].message, 1, true) then
      return ("raised %q, want the message of %s"):format(err, status)
   end
   return nil
end

---------------------------------------------------------------------------
-- Exact values

local INT64_MAX_TEXT = "9223372036854775807"

-- The integer of a decimal string, or nil when this Lua cannot pass it exactly.
local function integer_of(text)
   local value = tonumber(text)
   if math.type then -- 5.3+: strings within int64 read as integers
      return math.type(value) == "integer" and value or nil
   end
   if text == INT64_MAX_TEXT then
      return 2 ^ 63 -- the binding saturates it to INT64_MAX
   end
   if ("%.0f"):format(value) == text then
      return value
   end
   return nil
end

-- Seconds for a vector time, or nil (see the rule at the top).
local function seconds_of(ns_text)
   local ns = tonumber(ns_text)
   if ns < 2 ^ 50 then
      return ns / 1e9
   end
   local whole = tonumber(ns_text:sub(1, -10))
   local fraction = tonumber(ns_text:sub(-9))
   if fraction % 1953125 == 0 then
      return whole + fraction / 1e9
   end
   return nil
end

local NEVER_TEXT = INT64_MAX_TEXT

-- `got` is the face's seconds for the vector value `ns_text`: CR_NEVER is
-- math.huge; below 2^53 ns, the one correctly rounded quotient; above, within
-- an ulp or two of it.
local function seconds_match(got, ns_text)
   if ns_text == NEVER_TEXT then
      return got == math.huge
   end
   local expected = tonumber(ns_text) / 1e9
   if tonumber(ns_text) <= 2 ^ 53 then
      return got == expected
   end
   return math.abs(got - expected) <= expected * 2 ^ -51
end

-- Under LuaJIT, integers above 2^53 come back as doubles: compare as doubles.
local function integer_match(got, text)
   return got == tonumber(text)
end

---------------------------------------------------------------------------
-- decisions.txt

local function read_decisions()
   local sequences = {}
   for _, line in ipairs(lines_of("decisions.txt")) do
      local w = words(line.text)
      if w[1] == "limit" then -- run as gcra and as token_bucket: identical decisions
         sequences[#sequences + 1] = { line = line.number, emission = w[2], burst = w[3], steps = {},
            algorithms = { "gcra", "token_bucket" }, max_debt = w[4] }
      elseif w[1] == "window" then -- emission: the window; burst: the rate
         sequences[#sequences + 1] = { line = line.number, emission = w[3], burst = w[4], steps = {},
            algorithms = { w[2] }, max_debt = w[5] }
      elseif w[1] == "reserve" then
         table.insert(sequences[#sequences].steps, {
            kind = "reserve", line = line.number, now = w[2], cost = w[3], max_wait = w[4],
            reserved = w[5] == "1", delay = w[6], tat_after = w[7],
         })
      elseif w[1] == "refund" then
         table.insert(sequences[#sequences].steps, {
            kind = "refund", line = line.number, now = w[2], cost = w[3], given = w[4], tat_after = w[5],
         })
      elseif w[1] == "reconfigure" then -- emission: T (windows: the window); burst: burst (the rate)
         table.insert(sequences[#sequences].steps, {
            kind = "reconfigure", line = line.number, now = w[2], emission = w[3], burst = w[4],
            tat_after = w[5],
         })
      elseif w[1] == "charge" then
         table.insert(sequences[#sequences].steps, {
            kind = "charge", line = line.number, now = w[2], cost = w[3], allowed = w[4] == "1",
            remaining = w[5], retry_after = w[6], reset_after = w[7], clipped = w[8] == "1",
            committed = w[9], tat_after = w[10],
         })
      elseif w[1] == "take" then -- cost: the max_cost
         table.insert(sequences[#sequences].steps, {
            kind = "take", line = line.number, now = w[2], cost = w[3], taken = w[4], tat_after = w[5],
         })
      elseif w[1] == "reset" then
         table.insert(sequences[#sequences].steps, "reset")
      elseif w[1] == "op" then
         table.insert(sequences[#sequences].steps, {
            line = line.number, now = w[2], cost = w[3], commit = w[4] == "1",
            allowed = w[5] == "1", remaining = w[6], retry_after = w[7], reset_after = w[8],
            tat_after = w[9],
         })
      else
         error(("decisions.txt:%d: %s"):format(line.number, line.text))
      end
   end
   return sequences
end

local SEQUENCES = read_decisions()

local function count_ops(steps, from)
   local n = 0
   for i = from, #steps do
      if steps[i] ~= "reset" then n = n + 1 end
   end
   return n
end

-- face: { make(algorithm, period, burst, max_debt), decide(store, commit, cost, now), reset(store),
--         reserve(store, cost, max_wait, now), refund(store, cost, now),
--         charge(store, cost, now), take(store, max_cost, now) }, and optionally stats(store),
--         whose units_admitted and units_refunded are checked against a charge's and a
--         refund's units (where this Lua carries them exactly)
-- A window sequence's "period" is its window and its "burst" its rate.
--         and, where the store changes live, reconfigure(store, algorithm, period, burst, now)
local function replay_one(face, seq, algorithm, counts, mismatches)
   local function skip(reason, n)
      counts[reason] = (counts[reason] or 0) + n
   end
   local period = seconds_of(seq.emission)
   local burst = integer_of(seq.burst)
   local max_debt = seq.max_debt and integer_of(seq.max_debt)
   if not period then
      return skip("skipped: T has no exact float period", count_ops(seq.steps, 1))
   elseif not burst then
      return skip("skipped: burst is not an exact double", count_ops(seq.steps, 1))
   elseif seq.max_debt and not max_debt then
      return skip("skipped: max_debt is not an exact double", count_ops(seq.steps, 1))
   end
   local store = face.make(algorithm, period, burst, max_debt)
   -- A counter of the store, or nil where this Lua cannot carry it exactly (or it
   -- saturated: a sequence's huge units may get it there).
   local function counter(field)
      local value = face.stats and face.stats(store)[field]
      return value and value < 2 ^ 53 and value or nil
   end
   local function check_counted(step, field, before, want)
      local after = counter(field)
      if before and after and not integer_match(after - before, want) then
         mismatches[#mismatches + 1] = ("decisions.txt:%d (%s): %s moved by %s; want %s")
            :format(step.line, algorithm, field, tostring(after - before), want)
      end
   end
   local tat = "0" -- the key's state before each step, as the vectors say
   for index, step in ipairs(seq.steps) do
      if step == "reset" then
         face.reset(store)
         tat = "0"
      else
         local now, cost = seconds_of(step.now), step.cost and integer_of(step.cost)
         local reason = (not now and "a time has no exact float seconds")
            or (not cost and step.kind ~= "reconfigure" and "a cost is not an exact double")
         if reason and step.tat_after == tat then
            -- it changes nothing: the rest of the sequence stays known
            skip("skipped: " .. reason .. " (one op that stores nothing)", 1)
         elseif reason then
            return skip("skipped: " .. reason .. " (rest of its sequence)", count_ops(seq.steps, index))
         elseif step.kind == "reserve" then
            local max_wait = step.max_wait ~= "-1" and tonumber(step.max_wait) / 1e9 or nil
            local delay = face.reserve(store, cost, max_wait, now)
            if not ((delay == nil and not step.reserved)
                  or (delay ~= nil and step.reserved and seconds_match(delay, step.delay))) then
               mismatches[#mismatches + 1] = ("decisions.txt:%d (%s): reserve gave %s; want %s %s ns")
                  :format(step.line, algorithm, tostring(delay), tostring(step.reserved), step.delay)
            end
            counts.compared = counts.compared + 1
         elseif step.kind == "refund" then
            local before = counter("units_refunded")
            face.refund(store, cost, now)
            check_counted(step, "units_refunded", before, step.given)
            counts.compared = counts.compared + 1
         elseif (step.kind == "charge" or step.kind == "take") and not face[step.kind] then
            return skip("skipped: a charge or take this face does not make (rest of its sequence)",
               count_ops(seq.steps, index))
         elseif step.kind == "take" then
            local taken = face.take(store, cost, now)
            if not integer_match(taken, step.taken) then
               mismatches[#mismatches + 1] = ("decisions.txt:%d (%s): take gave %s; want %s")
                  :format(step.line, algorithm, tostring(taken), step.taken)
            end
            counts.compared = counts.compared + 1
         elseif step.kind == "reconfigure" then
            local new_period, new_burst = seconds_of(step.emission), integer_of(step.burst)
            if not face.reconfigure or not new_period or not new_burst then
               return skip("skipped: a live change this store or face cannot make (rest of its sequence)",
                  count_ops(seq.steps, index))
            end
            face.reconfigure(store, algorithm, new_period, new_burst, now)
            counts.compared = counts.compared + 1
         else
            local allowed, remaining, retry_after, reset_after, clipped
            if step.kind == "charge" then
               local before = counter("units_admitted")
               allowed, remaining, retry_after, reset_after, clipped = face.charge(store, cost, now)
               check_counted(step, "units_admitted", before, step.committed)
            else
               allowed, remaining, retry_after, reset_after = face.decide(store, step.commit, cost, now)
            end
            if not (allowed == step.allowed and integer_match(remaining, step.remaining)
                  and (step.kind ~= "charge" or clipped == step.clipped)
                  and seconds_match(retry_after, step.retry_after)
                  and seconds_match(reset_after, step.reset_after)) then
               mismatches[#mismatches + 1] = ("decisions.txt:%d (%s): got %s %s %.17g %.17g; want %s %s %s ns %s ns")
                  :format(step.line, algorithm, tostring(allowed), tostring(remaining), retry_after, reset_after,
                     tostring(step.allowed), step.remaining, step.retry_after, step.reset_after)
            end
            counts.compared = counts.compared + 1
         end
         tat = step.tat_after
      end
   end
end

local function replay(face)
   local counts, mismatches = { compared = 0 }, {}
   for _, seq in ipairs(SEQUENCES) do
      for _, algorithm in ipairs(seq.algorithms) do
         replay_one(face, seq, algorithm, counts, mismatches)
      end
   end
   return counts, mismatches
end

-- The options that rebuild a vector's limit: (rate, opts).
local function limit_of(algorithm, period, burst, max_debt)
   if algorithm == "gcra" or algorithm == "token_bucket" then
      return 1, { period = period, burst = burst, algorithm = algorithm, max_debt = max_debt }
   end
   return burst, { period = period, algorithm = algorithm, max_debt = max_debt }
end

local function report(name, counts, mismatches)
   local total, reasons = 0, {}
   for reason, n in pairs(counts) do
      total = total + n
      if reason ~= "compared" then reasons[#reasons + 1] = ("  %d %s"):format(n, reason) end
   end
   table.sort(reasons)
   print(("\n%s (%s): %d of %d vector ops compared, %d skipped"):format(
      name, IS_LUAJIT and jit.version or _VERSION, counts.compared, total, total - counts.compared))
   if #reasons > 0 then print(table.concat(reasons, "\n")) end
   assert.is_true(total > 5000, "decisions.txt holds " .. total .. " ops")
   assert.is_true(total - counts.compared <= MAX_SKIPPED_SHARE * total,
      ("%d of %d ops skipped"):format(total - counts.compared, total))
   assert.are.equal(0, #mismatches, table.concat(mismatches, "\n", 1, math.min(#mismatches, 12)))
end

---------------------------------------------------------------------------
-- limits.txt

local SPECIAL_NUMBERS = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge, ["-0"] = -0.0 }

local function number_of(text)
   local special = SPECIAL_NUMBERS[text]
   if special then return special end
   return assert(tonumber(text), text)
end

local FACES = {
   limiter = {
      new = function(rate, options) return cellrate.limiter(rate, options) end,
      peek = function(lim, cost, now) return lim:peek(cost, now) end,
      check = function(lim, cost, now) return lim:check(cost, now) end,
   },
   keyed = {
      new = function(rate, options)
         options = options or {}
         options.capacity = 16
         return cellrate.keyed(rate, options)
      end,
      peek = function(lim, cost, now) return lim:peek("k", cost, now) end,
      check = function(lim, cost, now) return lim:check("k", cost, now) end,
   },
}

local function limit_mismatch(face, status, emission, burst, rate, options)
   local make = function() return face.new(rate, options) end
   if status ~= "OK" then
      return raised_status(status, make)
   end
   local ok, lim = pcall(make)
   if not ok then
      return "raised " .. tostring(lim) .. ", want OK"
   end
   if not integer_match(lim:info().burst, burst) then
      return ("burst %s, want %s"):format(tostring(lim:info().burst), burst)
   end
   local allowed, remaining = face.peek(lim, 0, 0)
   if not (allowed and integer_match(remaining, burst)) then
      return ("an idle probe left %s, want %s"):format(tostring(remaining), burst)
   end
   -- An idle key's cost-1 peek answers reset_after = T.
   local _, _, _, reset_after = face.peek(lim, 1, 0)
   if not seconds_match(reset_after, emission) then
      return ("reset_after %.17g of a first unit, want T = %s ns"):format(reset_after, emission)
   end
   return nil
end

-- An `algorithm` or `algorithm_text` line: status, problem.
local function algorithm_mismatch(face, text)
   local w, rate, options, status, emission, tolerance, burst
   if text:sub(1, 15) == "algorithm_text " then
      local head
      head, rate = text:match("^(.-)|(.*)$")
      w = words(head)
      options = {}
      status, emission, tolerance, burst = w[3], w[4], w[5], w[6]
   else
      w = words(text)
      rate, options = number_of(w[3]), {}
      status, emission, tolerance, burst = w[6], w[7], w[8], w[9]
      if w[4] ~= "-" then options.period = number_of(w[4]) end
      if w[5] ~= "-" then
         options.burst = integer_of(w[5])
         if options.burst == nil then return status, nil end -- not exact in this Lua
      end
   end
   options.algorithm = w[2] == "-" and "" or w[2]
   local make = function() return face.new(rate, options) end
   if status ~= "OK" then
      return status, raised_status(status, make)
   end
   local ok, lim = pcall(make)
   if not ok then
      return status, "raised " .. tostring(lim) .. ", want OK"
   end
   local info = lim:info()
   if not (integer_match(info.emission_ns, emission) and integer_match(info.tolerance_ns, tolerance)
         and integer_match(info.burst, burst) and info.algorithm == w[2]) then
      return status, ("%s %s %s %s, want %s %s %s %s"):format(tostring(info.emission_ns),
         tostring(info.tolerance_ns), tostring(info.burst), info.algorithm, emission, tolerance, burst, w[2])
   end
   return status, nil
end

-- The arguments of a limits.txt line as cellrate.limiter takes them; nil
-- when its burst is not an exact integer in this Lua.
local function limit_arguments(text)
   local head, rate_text = text:match("^(.-)|(.*)$")
   local w = words(head or text)
   local rate
   local options = {}
   if text:sub(1, 15) == "algorithm_text " then
      return rate_text, { algorithm = w[2] == "-" and "" or w[2] }
   elseif text:sub(1, 10) == "algorithm " then
      options.algorithm = w[2] == "-" and "" or w[2]
      table.remove(w, 2)
   elseif text:sub(1, 5) == "text " then
      return rate_text, w[5] == "1" and { period = 1.0 } or nil
   end
   rate = number_of(w[2])
   if w[3] ~= "-" then options.period = number_of(w[3]) end
   if w[4] ~= "-" then
      options.burst = integer_of(w[4])
      if options.burst == nil then return nil end
   end
   return rate, options
end

-- What a constructor gives, comparable between cellrate.limiter and
-- cellrate.limit_spec: the error's text after its position, or the fields.
local function construction(make, rate, options)
   local ok, got = pcall(make, rate, options)
   if not ok then
      return "error: " .. tostring(got):gsub("^[^\n]-:%d+: ", "", 1)
   end
   local fields = make == cellrate.limit_spec and got or got:info()
   return ("%.17g %.17g %s %s %s %s %s"):format(fields.rate, fields.period, tostring(fields.burst),
      fields.algorithm, tostring(fields.emission_ns), tostring(fields.tolerance_ns),
      (tostring(got):gsub("^cellrate%.Limiter%(", "cellrate.Limit(", 1)))
end

local function run_limit_spec()
   local mismatches, refused, compared = {}, 0, 0
   for _, line in ipairs(lines_of("limits.txt")) do
      local rate, options = limit_arguments(line.text)
      if rate ~= nil then
         local function copy() -- each call gets its own table
            if options == nil then return nil end
            local t = {}
            for k, v in pairs(options) do t[k] = v end
            return t
         end
         local want = construction(cellrate.limiter, rate, copy())
         local got = construction(cellrate.limit_spec, rate, copy())
         compared = compared + 1
         if want:sub(1, 7) == "error: " then refused = refused + 1 end
         if got ~= want then
            mismatches[#mismatches + 1] = ("limits.txt:%d: %q: limit_spec %s, limiter %s")
               :format(line.number, line.text, got, want)
         end
      end
   end
   assert.is_true(refused > 100 and compared - refused > 100, refused .. " of " .. compared)
   assert.are.equal(0, #mismatches, table.concat(mismatches, "\n", 1, math.min(#mismatches, 12)))
end

local function run_limits(face)
   local mismatches, counts, skipped = {}, {}, 0
   for _, line in ipairs(lines_of("limits.txt")) do
      local problem, status
      if line.text:sub(1, 7) == "number " then
         local w = words(line.text)
         local rate = number_of(w[2])
         local options = {}
         if w[3] ~= "-" then options.period = number_of(w[3]) end
         local burst_ok = true
         if w[4] ~= "-" then
            options.burst = integer_of(w[4])
            burst_ok = options.burst ~= nil
         end
         status = w[5]
         if burst_ok then
            problem = limit_mismatch(face, status, w[6], w[7], rate, options)
            if not problem and status == "OK" then
               local info = face.new(rate, options):info()
               if info.rate ~= rate or info.period ~= (options.period or 1) then
                  problem = ("rate %.17g period %.17g, want them as given"):format(info.rate, info.period)
               end
            end
         else
            skipped = skipped + 1
         end
      elseif line.text:sub(1, 9) == "algorithm" then
         status, problem = algorithm_mismatch(face, line.text)
      else
         local head, rate_text = line.text:match("^(.-)|(.*)$")
         local w = words(head)
         status = w[2]
         local options = w[5] == "1" and { period = 1.0 } or nil
         problem = limit_mismatch(face, status, w[3], w[4], rate_text, options)
      end
      counts[status] = (counts[status] or 0) + 1
      if problem then
         mismatches[#mismatches + 1] = ("limits.txt:%d: %q: %s"):format(line.number, line.text, problem)
      end
   end
   if skipped > 0 then
      print(("\nlimits.txt: %d lines skipped (burst not an exact double)"):format(skipped))
   end
   assert.is_true((counts.OK or 0) > 100)
   assert.is_true(skipped <= 0.05 * #lines_of("limits.txt"), skipped .. " limit lines skipped")
   assert.are.equal(0, #mismatches, table.concat(mismatches, "\n", 1, math.min(#mismatches, 12)))
end

---------------------------------------------------------------------------
-- seconds.txt: `now` in seconds to ns, seen through `remaining`.
--
-- With T = 1 ns and burst = 2^62 (the largest tau), a check of cost 2^62 at
-- t = 0 leaves TAT = 2^62; then a cost-0 peek at t answers remaining = t.
-- (Under LuaJIT, remaining above 2^53 compares as a double.)

local function run_seconds(face)
   local max = integer_of("4611686018427387904")
   local lim = face.new(1, { period = seconds_of("1"), burst = max })
   assert.is_true((face.check(lim, max, 0)))
   local mismatches, n = {}, 0
   for _, line in ipairs(lines_of("seconds.txt")) do
      local w = words(line.text)
      local seconds, status, ns = number_of(w[2]), w[3], w[4]
      local problem
      if status == "OK" then
         local ok, allowed, remaining = pcall(face.peek, lim, 0, seconds)
         if not ok then
            problem = "raised " .. tostring(allowed)
         elseif not integer_match(remaining, ns) then
            problem = ("%s ns, want %s"):format(tostring(remaining), ns)
         end
      else
         problem = raised_status(status, function() return face.peek(lim, 0, seconds) end)
      end
      if problem then
         mismatches[#mismatches + 1] = ("seconds.txt:%d: now=%s: %s"):format(line.number, w[2], problem)
      end
      n = n + 1
   end
   assert.is_true(n > 50)
   assert.are.equal(0, #mismatches, table.concat(mismatches, "\n", 1, math.min(#mismatches, 12)))
end

---------------------------------------------------------------------------

describe("conformance vectors", function()
   it("decisions through cellrate.limiter", function()
      report("cellrate.limiter", replay({
         make = function(algorithm, period, burst, max_debt)
            return cellrate.limiter(limit_of(algorithm, period, burst, max_debt))
         end,
         reconfigure = function(lim, algorithm, period, burst, now)
            local rate, opts = limit_of(algorithm, period, burst)
            opts.algorithm = nil
            lim:reconfigure(rate, opts, now)
         end,
         decide = function(lim, commit, cost, now)
            if commit then return lim:check(cost, now) end
            return lim:peek(cost, now)
         end,
         reset = function(lim) lim:reset() end,
         reserve = function(lim, cost, max_wait, now) return lim:reserve(cost, max_wait, now) end,
         refund = function(lim, cost, now) return lim:refund(cost, now) end,
         charge = function(lim, cost, now) return lim:charge(cost, now) end,
         take = function(lim, max_cost, now) return lim:take(max_cost, now) end,
         stats = function(lim) return lim:stats() end,
      }))
   end)

   it("decisions through cellrate.keyed", function()
      report("cellrate.keyed", replay({
         make = function(algorithm, period, burst, max_debt)
            local rate, opts = limit_of(algorithm, period, burst, max_debt)
            opts.capacity = 64
            return cellrate.keyed(rate, opts)
         end,
         reconfigure = function(keyed, algorithm, period, burst, now)
            local rate, opts = limit_of(algorithm, period, burst)
            opts.algorithm = nil
            keyed:reconfigure(rate, opts, now)
         end,
         decide = function(keyed, commit, cost, now)
            if commit then return keyed:check("key", cost, now) end
            return keyed:peek("key", cost, now)
         end,
         reset = function(keyed) keyed:reset("key") end,
         reserve = function(keyed, cost, max_wait, now) return keyed:reserve("key", cost, max_wait, now) end,
         refund = function(keyed, cost, now) return keyed:refund("key", cost, now) end,
         charge = function(keyed, cost, now) return keyed:charge("key", cost, now) end,
         take = function(keyed, max_cost, now) return keyed:take("key", max_cost, now) end,
         stats = function(keyed) return keyed:stats() end,
      }))
   end)

   -- check_headers decides as check(); its fields are tested in headers_spec.
   local function committed_by(check_headers, peek)
      return function(store, commit, cost, now)
         if commit then
            local allowed, remaining, retry_after, reset_after = check_headers(store, cost, now)
            return allowed, remaining, retry_after, reset_after
         end
         return peek(store, cost, now)
      end
   end

   local function keyed_face(decide)
      return {
         make = function(algorithm, period, burst, max_debt)
            local rate, opts = limit_of(algorithm, period, burst, max_debt)
            opts.capacity = 64
            return cellrate.keyed(rate, opts)
         end,
         reconfigure = function(keyed, algorithm, period, burst, now)
            local rate, opts = limit_of(algorithm, period, burst)
            opts.algorithm = nil
            keyed:reconfigure(rate, opts, now)
         end,
         decide = decide,
         reset = function(keyed) keyed:reset("key") end,
         reserve = function(keyed, cost, max_wait, now) return keyed:reserve("key", cost, max_wait, now) end,
         refund = function(keyed, cost, now) return keyed:refund("key", cost, now) end,
         charge = function(keyed, cost, now) return keyed:charge("key", cost, now) end,
         take = function(keyed, max_cost, now) return keyed:take("key", max_cost, now) end,
      }
   end

   local function limiter_face(decide)
      return {
         make = function(algorithm, period, burst, max_debt)
            return cellrate.limiter(limit_of(algorithm, period, burst, max_debt))
         end,
         reconfigure = function(lim, algorithm, period, burst, now)
            local rate, opts = limit_of(algorithm, period, burst)
            opts.algorithm = nil
            lim:reconfigure(rate, opts, now)
         end,
         decide = decide,
         reset = function(lim) lim:reset() end,
         reserve = function(lim, cost, max_wait, now) return lim:reserve(cost, max_wait, now) end,
         refund = function(lim, cost, now) return lim:refund(cost, now) end,
         charge = function(lim, cost, now) return lim:charge(cost, now) end,
         take = function(lim, max_cost, now) return lim:take(max_cost, now) end,
      }
   end

   it("decisions through check_headers", function()
      report("lim:check_headers", replay(limiter_face(committed_by(
         function(lim, cost, now) return lim:check_headers(cost, now) end,
         function(lim, cost, now) return lim:peek(cost, now) end))))
      report("keyed:check_headers", replay(keyed_face(committed_by(
         function(keyed, cost, now) return keyed:check_headers("key", cost, now) end,
         function(keyed, cost, now) return keyed:peek("key", cost, now) end))))
   end)

   local ffi_it = IS_LUAJIT and it or pending
   ffi_it("decisions through cellrate.ffi (LuaJIT)", function()
      local fast = require "cellrate.ffi"
      report("cellrate.ffi limiter", replay(limiter_face(committed_by(
         function(lim, cost, now) return fast.limiter(lim, cost, now) end,
         function(lim, cost, now) return lim:peek(cost, now) end))))
      report("cellrate.ffi keyed", replay(keyed_face(committed_by(
         function(keyed, cost, now) return fast.keyed(keyed, "key", cost, now) end,
         function(keyed, cost, now) return keyed:peek("key", cost, now) end))))
      report("cellrate.ffi limiter_check", replay(limiter_face(committed_by(
         function(lim, cost, now) return fast.limiter_check(lim, cost, now) end,
         function(lim, cost, now) return lim:peek(cost, now) end))))
      report("cellrate.ffi keyed_check", replay(keyed_face(committed_by(
         function(keyed, cost, now) return fast.keyed_check(keyed, "key", cost, now) end,
         function(keyed, cost, now) return keyed:peek("key", cost, now) end))))
   end)

   it("allow() is check()'s first answer", function()
      for i = 1, 40 do
         local seq = SEQUENCES[i]
         local period, burst = seconds_of(seq.emission), integer_of(seq.burst)
         if period and burst then
            local lim = cellrate.limiter(limit_of(seq.algorithms[1], period, burst))
            for _, step in ipairs(seq.steps) do
               if step == "reset" then
                  lim:reset()
               else
                  local now, cost = seconds_of(step.now), step.cost and integer_of(step.cost)
                  if not (now and cost) or step.kind then break end
                  local allowed
                  if step.commit then allowed = lim:allow(cost, now) else allowed = lim:peek(cost, now) end
                  assert.are.equal(step.allowed, allowed, "decisions.txt:" .. step.line)
               end
            end
         end
      end
   end)

   it("limits through cellrate.limiter", function() run_limits(FACES.limiter) end)
   it("limits through cellrate.limit_spec, as cellrate.limiter takes them", run_limit_spec)
   it("limits through cellrate.keyed", function() run_limits(FACES.keyed) end)
   it("seconds through cellrate.limiter", function() run_seconds(FACES.limiter) end)
   it("seconds through cellrate.keyed", function() run_seconds(FACES.keyed) end)
end)
