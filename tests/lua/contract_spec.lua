-- The cross-face contract (docs/contract.md) through the Lua face: each
-- scenario of tests/vectors/contract.txt decided by cellrate.limiter,
-- cellrate.keyed and cellrate.check_all on an explicit clock, its fields
-- formatted by cellrate.header_fields. The Lua face has no HTTP status; what
-- a response carries is the rule cellrate.nginx applies (a refusal: every
-- field; an admission: the fields only with admitted_headers; a dry run:
-- never Retry-After), which tests/nginx/test_contract.py runs in nginx.
local cellrate = require "cellrate"
local scenarios = dofile("tests/lua/contract.lua")("tests/vectors/contract.txt")

local START = 1000 -- the scenario's 0 on the explicit clock
local KEYED_MT = getmetatable(cellrate.keyed(1, { capacity = 1 }))

local function limit_of(kind, rate, burst)
   return (kind == "keyed" and cellrate.keyed or cellrate.limiter)(rate, { burst = burst })
end

-- allowed, remaining, retry_after, reset_after, and the limit that decided.
local function decide(limits, cost, now)
   if #limits == 1 then
      local limit = limits[1]
      if getmetatable(limit) == KEYED_MT then
         local allowed, remaining, retry_after, reset_after = limit:check("client", cost, now)
         return allowed, remaining, retry_after, reset_after, limit
      end
      local allowed, remaining, retry_after, reset_after = limit:check(cost, now)
      return allowed, remaining, retry_after, reset_after, limit
   end
   local items = {}
   for i, limit in ipairs(limits) do
      items[i] = { limit, "client" }
   end
   local allowed, remaining, retry_after, reset_after, index =
      cellrate.check_all(items, cost, now)
   return allowed, remaining, retry_after, reset_after, limits[index]
end

describe("the contract (tests/vectors/contract.txt) in the Lua face", function()
   for _, scenario in ipairs(scenarios) do
      it(scenario.name, function()
         local limits = {}
         for i, limit in ipairs(scenario.limits) do
            limits[i] = limit_of(limit[1], limit[2], limit[3])
         end
         local opts = scenario.options
         for index, request in ipairs(scenario.requests) do
            local allowed, remaining, retry_after, reset_after, decider =
               decide(limits, request.cost, START + request.now)
            local where = scenario.name .. " request " .. index
            assert.are.equal(request.allowed, allowed, where)
            local sent = {}
            if not allowed or opts.admitted_headers then
               sent = cellrate.headers(decider, allowed, remaining, retry_after, reset_after,
                                       opts.name, opts.legacy_headers)
               if opts.dry_run then
                  sent["Retry-After"] = nil
               end
            end
            assert.are.same(request.fields, sent, where)
            local refused = not allowed and not opts.dry_run
            assert.are.equal(refused and (opts.status or 429) or 200, request.status, where)
         end
      end)
   end
end)
