-- cellrate.headers: the HTTP fields of a decision, from the same C formatter
-- as Python's Decision.headers (docs/design.md §10). Expected texts are
-- worked out by hand: T = period / rate, w = ceil(burst * T), every time
-- rounded up to whole seconds, Retry-After at least 1.
local cellrate = require "cellrate"
-- cellrate.ffi from this tree (tests/lua/run.sh runs at the root)
package.path = "lua/?.lua;" .. package.path

-- Whole seconds, rounded up, of a time that is exact to the ns.
local function ceil_seconds(seconds)
   local ns = math.floor(seconds * 1e9 + 0.5)
   return math.floor((ns + 999999999) / 1e9)
end

describe("cellrate.headers", function()
   it("describes an admission: policy and RateLimit, no Retry-After", function()
      -- 300/minute, burst 60: T = 0.2 s, w = 12 s; one request: r = 59, t = 0.2 -> 1
      local keyed = cellrate.keyed("300/minute", { burst = 60 })
      local h = cellrate.headers(keyed, keyed:check("k", 1, 100))
      assert.same({ ["RateLimit-Policy"] = '"default";q=60;w=12',
                    ["RateLimit"] = '"default";r=59;t=1' }, h)
   end)

   it("rounds Retry-After up, never to 0, and adds the legacy trio", function()
      -- 10/s, burst 1: second request 99.9 ms later is refused 0.1 ms early
      local lim = cellrate.limiter(10, { burst = 1 })
      lim:check(1, 10)
      local allowed, remaining, retry_after, reset_after = lim:check(1, 10.0999)
      assert.is_false(allowed)
      local h = cellrate.headers(lim, allowed, remaining, retry_after, reset_after, "api", true)
      assert.same({ ["RateLimit-Policy"] = '"api";q=1;w=1',
                    ["RateLimit"] = '"api";r=0;t=1',
                    ["Retry-After"] = "1",
                    ["X-RateLimit-Limit"] = "1",
                    ["X-RateLimit-Remaining"] = "0",
                    ["X-RateLimit-Reset"] = "1" }, h)
   end)

   it("gives an unfittable cost no Retry-After", function()
      local lim = cellrate.limiter("1/hour", { burst = 2 })
      local h = cellrate.headers(lim, lim:check(3, 5))
      assert.is_nil(h["Retry-After"])
      assert.equal('"default";q=2;w=7200', h["RateLimit-Policy"])
   end)

   it("agrees with check() over a run of decisions", function()
      local lim = cellrate.limiter("10/minute", { burst = 4 })  -- T = 6 s, w = 24
      local t = 1000
      for step = 1, 40 do
         t = t + ({ 0, 0.05, 1.7, 6, 0.3 })[(step - 1) % 5 + 1]
         local allowed, remaining, retry_after, reset_after = lim:check(1, t)
         local h = cellrate.headers(lim, allowed, remaining, retry_after, reset_after)
         assert.equal('"default";q=4;w=24', h["RateLimit-Policy"])
         assert.equal(('"default";r=%d;t=%d'):format(remaining, ceil_seconds(reset_after)),
                      h["RateLimit"])
         if allowed then
            assert.is_nil(h["Retry-After"])
         else
            assert.equal(tostring(math.max(1, ceil_seconds(retry_after))), h["Retry-After"])
         end
      end
   end)

   it("raises on bad arguments, naming the parameter", function()
      local lim = cellrate.limiter(1)
      assert.has_error(function() cellrate.headers({}, true, 0, 0, 0) end)
      assert.has_error(function() cellrate.headers(lim, true, -1, 0, 0) end)
      assert.has_error(function() cellrate.headers(lim, true, 0, "soon", 0) end)
      assert.has_error(function() cellrate.headers(lim, true, 0, 0, 0 / 0) end)
      local ok, err = pcall(cellrate.headers, lim, true, 0, 0, 0, "")
      assert.is_false(ok)
      assert.truthy(err:find("name must be", 1, true))
      ok, err = pcall(cellrate.headers, lim, true, 0, 0, 0, 42)
      assert.truthy(err:find("name must be", 1, true))
      ok, err = pcall(cellrate.headers, lim, true, -1, 0, 0)
      assert.truthy(err:find("decision:", 1, true))
   end)
end)

-- The same fields as name, value pairs in the formatter's order, no table.
local function as_table(...)
   local fields, count = {}, select("#", ...)
   assert.equal(0, count % 2, "name, value pairs")
   for i = 1, count, 2 do
      local name, value = select(i, ...)
      assert.is_nil(fields[name], "each field once")
      fields[name] = value
   end
   return fields
end

describe("cellrate.header_fields and check_headers", function()
   it("give cellrate.headers' fields, policy and RateLimit first", function()
      local lim = cellrate.limiter(10, { burst = 1 })
      lim:check(1, 10)
      local allowed, remaining, retry_after, reset_after = lim:peek(1, 10.0999)
      for _, legacy in ipairs({ false, true }) do
         local name1, _, name2 = cellrate.header_fields(lim, allowed, remaining, retry_after,
                                                        reset_after, "api", legacy)
         assert.equal("RateLimit-Policy", name1)
         assert.equal("RateLimit", name2)
         assert.same(cellrate.headers(lim, allowed, remaining, retry_after, reset_after, "api",
                                      legacy),
                     as_table(cellrate.header_fields(lim, allowed, remaining, retry_after,
                                                     reset_after, "api", legacy)))
      end
   end)

   it("check_headers returns check()'s decision and its fields, for both types", function()
      local lim = cellrate.limiter("10/minute", { burst = 4 })
      local twin = cellrate.limiter("10/minute", { burst = 4 })
      local keyed = cellrate.keyed("10/minute", { burst = 4 })
      local t = 1000
      for step = 1, 40 do
         t = t + ({ 0, 0.05, 1.7, 6, 0.3 })[(step - 1) % 5 + 1]
         local name = step % 2 == 0 and "p" or nil
         local legacy = step % 3 == 0
         local expected = { twin:check(2, t) }
         local got = { lim:check_headers(2, t, name, legacy) }
         local got_keyed = { keyed:check_headers("k", 2, t, name, legacy) }
         assert.same(expected, { got[1], got[2], got[3], got[4] })
         assert.same(got, got_keyed)
         assert.same(cellrate.headers(lim, expected[1], expected[2], expected[3], expected[4],
                                      name, legacy),
                     as_table(select(5, (table.unpack or unpack)(got))))
      end
   end)

   it("raise on a bad name as cellrate.headers does, before deciding", function()
      local lim = cellrate.limiter(1, { burst = 1 })
      local ok, err = pcall(lim.check_headers, lim, 1, nil, "")
      assert.is_false(ok)
      assert.truthy(err:find("name must be", 1, true))
      assert.is_true((lim:peek(1))) -- nothing was spent
      local keyed = cellrate.keyed(1, { burst = 1 })
      ok, err = pcall(keyed.check_headers, keyed, "k", 1, nil, "a\0b")
      assert.is_false(ok)
      assert.truthy(err:find("name must be", 1, true))
      assert.is_true((keyed:peek("k", 1)))
      ok, err = pcall(cellrate.header_fields, lim, true, 0, 0, 0, 42)
      assert.is_false(ok)
      assert.truthy(err:find("name must be", 1, true))
   end)
end)

describe("cellrate.ffi (LuaJIT)", function()
   local ffi_it = type(jit) == "table" and it or pending
   local fast = type(jit) == "table" and require "cellrate.ffi"

   -- check_headers' answer as every = false gives it: an admission's decision alone.
   local function refusal_fields(allowed, remaining, retry_after, reset_after, ...)
      if allowed then
         return { allowed, remaining, retry_after, reset_after }
      end
      return { allowed, remaining, retry_after, reset_after, ... }
   end

   ffi_it("gives the methods' answers, fields and all, for both types", function()
      local lim = cellrate.limiter("10/minute", { burst = 4 })
      local twin = cellrate.limiter("10/minute", { burst = 4 })
      local keyed = cellrate.keyed("10/minute", { burst = 4 })
      local keyed_twin = cellrate.keyed("10/minute", { burst = 4 })
      local t = 1000
      for step = 1, 60 do
         t = t + ({ 0, 0.05, 1.7, 6, 0.3 })[(step - 1) % 5 + 1]
         local name = ({ nil, "p", 'a"b\\c' })[step % 3 + 1]
         local legacy = step % 4 == 0
         local cost = step % 7 == 0 and 9 or 2 -- 9 never fits: no Retry-After
         assert.same({ twin:check_headers(cost, t, name, legacy) },
                     { fast.limiter(lim, cost, t, name, legacy) })
         assert.same({ keyed_twin:check_headers("k", cost, t, name, legacy) },
                     { fast.keyed(keyed, "k", cost, t, name, legacy) })
         assert.same({ twin:check(cost, t + 0.5) }, { fast.limiter_check(lim, cost, t + 0.5) })
         assert.same({ keyed_twin:check("k", cost, t + 0.5) },
                     { fast.keyed_check(keyed, "k", cost, t + 0.5) })
         -- every = false: a refusal's fields only; an admission is its decision alone
         assert.same(refusal_fields(twin:check_headers(cost, t + 0.7, name, legacy)),
                     { fast.limiter(lim, cost, t + 0.7, name, legacy, false) })
         assert.same(refusal_fields(keyed_twin:check_headers("k", cost, t + 0.7, name, legacy)),
                     { fast.keyed(keyed, "k", cost, t + 0.7, name, legacy, false) })
      end
      -- on the clock, and the default cost through the method
      local allowed, remaining = fast.limiter(cellrate.limiter(1, { burst = 2 }), 1)
      assert.same({ true, 1 }, { allowed, remaining })
      allowed, remaining = fast.keyed(cellrate.keyed(1, { burst = 2 }), "k", nil)
      assert.same({ true, 1 }, { allowed, remaining })
   end)

   ffi_it("decides without calling the method", function()
      local keyed = cellrate.keyed(10, { burst = 2 })
      local methods = getmetatable(keyed).__index
      local check, check_headers = methods.check, methods.check_headers
      methods.check = function() error("the method was called") end
      methods.check_headers = methods.check
      local ok, allowed = pcall(fast.keyed, keyed, "k", 1)
      local ok_check, allowed_check = pcall(fast.keyed_check, keyed, "k", 1)
      methods.check, methods.check_headers = check, check_headers
      assert.is_true(ok, allowed)
      assert.is_true(allowed)
      assert.is_true(ok_check, allowed_check)
      assert.is_true(allowed_check)
   end)

   ffi_it("raises and fails as the method does", function()
      local lim = cellrate.limiter(1)
      for _, args in ipairs({ { 1.5 }, { -1 }, { 1, -1 }, { 1, 0 / 0 }, { "1" } }) do
         local _, want = pcall(lim.check_headers, lim, args[1], args[2])
         local ok, err = pcall(fast.limiter, lim, args[1], args[2])
         assert.is_false(ok)
         assert.equal(want:gsub("^.-:%d+: ", ""), tostring(err):gsub("^.-:%d+: ", ""))
         ok, err = pcall(fast.limiter_check, lim, args[1], args[2])
         assert.is_false(ok)
         assert.equal(want:gsub("^.-:%d+: ", ""), tostring(err):gsub("^.-:%d+: ", ""))
      end
      local ok, err = pcall(fast.limiter, lim, 1, nil, "")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("name must be", 1, true))
      assert.is_true((lim:peek(1))) -- nothing was spent
      local keyed = cellrate.keyed(1)
      ok, err = pcall(fast.keyed, keyed, 42, 1)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("key", 1, true))
      keyed:close()
      ok, err = pcall(fast.keyed, keyed, "k", 1)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("is closed", 1, true))
      ok, err = pcall(fast.keyed_check, keyed, "k", 1)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("is closed", 1, true))
   end)

   ffi_it("raises an argument mistake at its caller's line", function()
      local lim, keyed = cellrate.limiter(1), cellrate.keyed(1)
      local line = debug.getinfo(1, "l").currentline
      local calls = {
         function() local a = fast.limiter(lim, -1) return a end, -- line + 2, ...
         function() local a = fast.limiter(lim, 1, nil, "") return a end,
         function() local a = fast.limiter(lim, "x") return a end,
         function() local a = fast.keyed(keyed, 42, 1) return a end,
         function() local a = fast.keyed(keyed, "k", 1, nil, "a\nb", false, true) return a end,
         function() local a = fast.limiter_check(lim, 1.5) return a end,
         function() local a = fast.keyed_check(keyed, {}, 1) return a end,
      }
      for i, call in ipairs(calls) do
         -- (each call above is not a tail call, so its line is the caller's)
         local ok, err = pcall(call)
         assert.is_false(ok)
         assert.truthy(tostring(err):find("headers_spec.lua:" .. line + 1 + i .. ":", 1, true),
                       tostring(err))
      end
   end)

   ffi_it("raises at the level given, for a helper above it", function()
      local lim, keyed = cellrate.limiter(1), cellrate.keyed(1)
      local shut = cellrate.keyed(1)
      shut:close()
      -- A helper that passes level 2: a mistake names its caller's line.
      local function helper(f, ...)
         local a = f(...)
         return a
      end
      local line = debug.getinfo(1, "l").currentline
      local calls = {
         function() local a = helper(fast.limiter, lim, -1, nil, nil, nil, nil, 2) return a end,
         function() local a = helper(fast.limiter, lim, 1, nil, "", nil, true, 2) return a end,
         function() local a = helper(fast.limiter, lim, "x", nil, nil, nil, nil, 2) return a end,
         function() local a = helper(fast.keyed, keyed, 42, 1, nil, nil, nil, nil, 2) return a end,
         function() local a = helper(fast.keyed, shut, "k", 1, nil, nil, nil, nil, 2) return a end,
         function() local a = helper(fast.limiter_check, lim, 1.5, nil, 2) return a end,
         function() local a = helper(fast.keyed_check, shut, "k", 1, nil, 2) return a end,
      }
      for i, call in ipairs(calls) do
         local ok, err = pcall(call)
         assert.is_false(ok)
         assert.truthy(tostring(err):find("headers_spec.lua:" .. line + 1 + i .. ":", 1, true),
                       tostring(err))
         assert.is_nil(tostring(err):find("ffi.lua", 1, true), tostring(err))
      end
      -- and answers as without a level
      assert.same({ lim:peek(0) }, { fast.limiter_check(lim, 0, nil, 2) })
   end)

   ffi_it("refuses a module whose table has another layout", function()
      local ffi = require "ffi"
      local real = cellrate._ffi_api
      local layout = ffi.cast("const int *", real)[0]
      assert.equal(2, layout) -- FFI_API_LAYOUT of bindings/lua/ffi.c
      -- The module as it would be with the next layout: the same table but
      -- for its first member.
      local size = ffi.sizeof("cellrate_ffi_api")
      local copy = ffi.new("uint8_t[?]", size)
      ffi.copy(copy, real, size)
      ffi.cast("int *", copy)[0] = layout + 1
      local fake = setmetatable({ _ffi_api = ffi.cast("void *", copy) }, { __index = cellrate })
      local saved_module, saved_ffi = package.loaded.cellrate, package.loaded["cellrate.ffi"]
      package.loaded.cellrate, package.loaded["cellrate.ffi"] = fake, nil
      local ok, err = pcall(require, "cellrate.ffi")
      package.loaded.cellrate, package.loaded["cellrate.ffi"] = saved_module, saved_ffi
      assert.is_false(ok)
      assert.truthy(tostring(err):find(("the module's table has layout %d, this file declares layout %d")
         :format(layout + 1, layout), 1, true), tostring(err))
      -- the real one is still taken
      package.loaded["cellrate.ffi"] = nil
      assert.is_table(require "cellrate.ffi")
      package.loaded["cellrate.ffi"] = saved_ffi
   end)
end)
