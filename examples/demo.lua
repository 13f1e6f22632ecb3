-- cellrate in Lua: a burst, a turn-away with its exact retry-after, recovery.
local cellrate = require "cellrate"

local function show(label, allowed, remaining, retry_after, reset_after)
   print(("  %-28s allowed=%-5s remaining=%d retry_after=%.9f s reset_after=%.9f s"):format(
      label, tostring(allowed), remaining, retry_after, reset_after))
   return allowed, remaining, retry_after, reset_after
end

local function sleep(seconds)
   -- Lua has no sleep of its own; the shell's takes fractions.
   os.execute(("sleep %.9f"):format(seconds))
end

print(("cellrate %s (%s)"):format(cellrate._VERSION, jit and jit.version or _VERSION))

print("\n1. '10/second', burst 6, on an explicit clock (exact to the nanosecond):")
local lim = cellrate.limiter("10/second", { burst = 6 })
print("  " .. tostring(lim))
for i = 1, 7 do
   show(("request %d at t=0"):format(i), lim:check(1, 100.0))
end
show("request 8 at t=0.1", lim:check(1, 100.1))

print("\n2. the same on the real clock: wait exactly retry_after, then go:")
lim = cellrate.limiter("5/second", { burst = 3 })
local retry_after
for i = 1, 4 do
   local _, _, r = show(("request %d"):format(i), lim:check())
   retry_after = r
end
sleep(retry_after)
show("after sleeping retry_after", lim:check())

print("\n3. per key, with a cost, and a probe that commits nothing:")
local keyed = cellrate.keyed("300/minute", { burst = 60 })
show("alice spends 50", keyed:check("alice", 50, 10.0))
show("alice asks 20 more", keyed:check("alice", 20, 10.0))
show("bob is untouched", keyed:peek("bob", 1, 10.0))
show("alice asks 61 (never fits)", keyed:check("alice", 61, 10.0))
show("alice, 2 s later, peeks", keyed:peek("alice", 1, 12.0))
print(("  keys tracked: %d"):format(#keyed))
