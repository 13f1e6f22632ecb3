-- A plain-Lua GCRA, the yardstick of the Lua scenarios: what a Lua user could
-- write without a C module (bar the clock, passed in as a function). Same
-- decision as docs/design.md §1 for cost 1, without the reporting fields.

local gcra = {}

local Limiter = {}
Limiter.__index = Limiter

function gcra.limiter(rate, period, burst, clock)
  local emission = period * 1e9 / rate
  return setmetatable({ tat = 0, emission = emission, tolerance = emission * burst,
                        clock = clock }, Limiter)
end

function Limiter:allow()
  local now = self.clock()
  local tat = self.tat
  if tat < now then tat = now end
  local new_tat = tat + self.emission
  if now >= new_tat - self.tolerance then
    self.tat = new_tat
    return true
  end
  return false
end

local Keyed = {}
Keyed.__index = Keyed

function gcra.keyed(rate, period, burst, clock)
  local emission = period * 1e9 / rate
  return setmetatable({ tats = {}, emission = emission, tolerance = emission * burst,
                        clock = clock }, Keyed)
end

function Keyed:allow(key)
  local now = self.clock()
  local tat = self.tats[key] or 0
  if tat < now then tat = now end
  local new_tat = tat + self.emission
  if now >= new_tat - self.tolerance then
    self.tats[key] = new_tat
    return true
  end
  return false
end

return gcra
