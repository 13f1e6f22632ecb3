-- Calendar quotas (docs/design.md §19) through the Lua face, Lua 5.4 and LuaJIT:
-- the boundaries of tests/vectors/calendar.txt (from Python's zoneinfo) through
-- cellrate.calendar_period, limits of algorithm "calendar" deciding at them, and
-- bad input in the core's words (tests/vectors/status.txt).
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local VECTORS = here .. "../vectors/"


local function status_table()
   local out = {}
   for line in io.lines(VECTORS .. "status.txt") do
      local name, message = line:match("^status %d+ ([%w_]+) %S+ %S+ |(.*)$")
      if name then
         out[name] = message
      end
   end
   return out
end

local STATUS = status_table()

describe("calendar quotas", function()
   it("reads every exact bounds line of calendar.txt through calendar_period", function()
      local checked, zones = 0, {}
      for zone, period, now_s, start, stop, line in
         support.calendar_bounds(VECTORS .. "calendar.txt") do
         local got_start, got_end = cellrate.calendar_period(zone, period, now_s)
         if got_start ~= start or got_end ~= stop then
            error(("%s: got %.0f %.0f"):format(line, got_start, got_end))
         end
         zones[zone] = true
         checked = checked + 1
      end
      assert.is_true(checked > 5000)
      for _, zone in ipairs({ "UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
                               "Asia/Kolkata", "Pacific/Chatham", "America/Santiago" }) do
         assert.is_true(zones[zone], zone)
      end
   end)

   it("resets at local midnight after a 23-hour day", function()
      local zone, now = "Europe/Berlin", 1616889600 + 3600
      local start, stop = cellrate.calendar_period(zone, "day", now)
      assert.are.equal(23 * 3600, stop - start)
      local lim = cellrate.limiter("2/day", { algorithm = "calendar", tz = zone })
      assert.is_true(lim:allow(1, now))
      local allowed, remaining, retry_after, reset_after = lim:check(1, now)
      assert.is_true(allowed)
      assert.are.same({ 0, 0, stop - now }, { remaining, retry_after, reset_after })
      local refused = support.pack(lim:check(1, now))
      assert.is_false(refused[1])
      assert.are.equal(stop - now, refused[3])
      assert.is_true(lim:allow(1, stop))
   end)

   it("composes with a rate as several limits", function()
      local per_minute = cellrate.limiter("2/minute", { algorithm = "fixed_window" })
      local quota = cellrate.limiter("3/month", { algorithm = "calendar", tz = "Asia/Kolkata" })
      local now = 1700000000
      assert.is_true((cellrate.check_all({ per_minute, quota }, nil, now)))
      assert.is_true((cellrate.check_all({ per_minute, quota }, nil, now)))
      local allowed, _, retry_after = cellrate.check_all({ per_minute, quota }, nil, now)
      assert.is_false(allowed)
      assert.are.equal(40, retry_after)
      assert.is_true((cellrate.check_all({ per_minute, quota }, nil, now + 60)))
      local _, month_end = cellrate.calendar_period("Asia/Kolkata", "month", now)
      allowed, _, retry_after = cellrate.check_all({ per_minute, quota }, nil, now + 120)
      assert.is_false(allowed)
      assert.are.equal(month_end - now - 120, retry_after)
   end)

   it("keeps its zone through a live change", function()
      local lim = cellrate.limiter("10/day", { algorithm = "calendar", tz = "Pacific/Chatham" })
      local now = 1700000000
      lim:check(6, now)
      lim:reconfigure("8/day", nil, now)
      local _, remaining, _, reset_after = lim:peek(1, now)
      local _, stop = cellrate.calendar_period("Pacific/Chatham", "day", now)
      assert.are.same({ 1, stop - now }, { remaining, reset_after })
      assert.are.equal("cellrate.Limiter(rate='8/day', algorithm='calendar', tz='Pacific/Chatham')",
         tostring(lim))
   end)

   it("refuses bad input with the core's words", function()
      local cases = {
         { "3/day", { algorithm = "calendar", tz = "Mars/Olympus_Mons" }, "E_TZ" },
         { "3/day", { algorithm = "calendar", tz = "../../etc/passwd" }, "E_TZ" },
         { "3/minute", { algorithm = "calendar" }, "E_CALENDAR_PERIOD" },
         { "3/11years", { algorithm = "calendar" }, "E_CALENDAR_PERIOD" },
         { "0/day", { algorithm = "calendar" }, "E_CALENDAR_AMOUNT" },
         { "2.5/day", { algorithm = "calendar" }, "E_CALENDAR_AMOUNT" },
         { 3, { algorithm = "calendar" }, "E_CALENDAR_PERIOD" },
         { "3/month", nil, "E_RATE_CALENDAR_ALGORITHM" },
         { "3/second", { tz = "UTC" }, "E_TZ_ALONE" },
         { "3/day", { algorithm = "calendar", burst = 3 }, "E_BURST_WINDOW" },
      }
      for _, case in ipairs(cases) do
         local message = STATUS[case[3]]
         local param = message:match("^[%w_]+")
         local text = support.raises(param, cellrate.limiter, case[1], case[2])
         assert.are.equal(message, text)
      end
      assert.are.equal(STATUS.E_TZ, support.raises("tz", cellrate.calendar_period, "No/Where", "day"))
      assert.are.equal(STATUS.E_CALENDAR_PERIOD,
         support.raises("rate", cellrate.calendar_period, "UTC", "fortnight"))
   end)
end)

describe("calendar quotas in a shared region", function()
   local now = 1700000000 -- Berlin's month ends at 1701385200 (2023-12-01 00:00 CET)

   it("counts a key's month across the objects that open the region", function()
      local path = support.fresh_path("calendar")
      local opts = { algorithm = "calendar", tz = "Europe/Berlin", capacity = 16, shared = path }
      local a, b = cellrate.keyed("5/month", opts), cellrate.keyed("5/month", opts)
      assert.is_true((a:check("k", 3, now)))
      local allowed, remaining, _, reset_after = b:check("k", 2, now)
      assert.are.same({ true, 0, 1701385200 - now }, { allowed, remaining, reset_after })
      assert.is_false((a:check("k", 1, 1701385200 - 1)))
      assert.is_true((b:check("k", 5, 1701385200)))
      local one = cellrate.limiter("2/day", { algorithm = "calendar", shared = path .. "-one" })
      assert.is_true((one:check(2, now)))
      assert.is_false((cellrate.limiter("2/day", { algorithm = "calendar",
                                                   shared = path .. "-one" }):check(1, now)))
      a:close(); b:close(); one:close()
      os.remove(path); os.remove(path .. "-one")
   end)

   it("takes sync (seconds between the region's msyncs), judged by the core", function()
      local path = support.fresh_path("calendar-sync")
      local keyed = cellrate.keyed("5/month", { algorithm = "calendar", shared = path, sync = 0.5 })
      assert.is_true((keyed:check("k", 2, now)))
      keyed:close()
      assert.are.equal(STATUS.E_SYNC, support.raises("sync", cellrate.keyed, "5/month",
         { algorithm = "calendar", shared = path, sync = 0 }))
      assert.are.equal(STATUS.E_SYNC, support.raises("sync", cellrate.limiter, "5/month",
         { algorithm = "calendar", shared = path .. "-one", sync = "1s" }))
      assert.are.equal(STATUS.E_SYNC_SHARED, support.raises("sync", cellrate.limiter, 10, { sync = 1 }))
      local _, remaining = cellrate.keyed("5/month", { algorithm = "calendar", shared = path }):peek("k", 0, now)
      assert.are.equal(3, remaining)
      os.remove(path); os.remove(path .. "-one")
   end)

   it("takes another zone as a live change, or refuses it", function()
      local path = support.fresh_path("calendar-zone")
      local berlin = cellrate.limiter("10/month", { algorithm = "calendar", tz = "Europe/Berlin",
                                                    shared = path })
      berlin:check(4)
      local lim, err, code = cellrate.limiter("10/month", { algorithm = "calendar",
         tz = "Asia/Kolkata", shared = path, on_change = "refuse" })
      assert.is_nil(lim)
      assert.are.equal(STATUS.E_SHARED_ZONE .. ": " .. path, err)
      assert.are.equal("E_SHARED_ZONE", code)
      local kolkata = cellrate.limiter("10/month", { algorithm = "calendar", tz = "Asia/Kolkata",
                                                     shared = path })
      local _, remaining = kolkata:peek(0)
      assert.are.equal(6, remaining) -- the count moved to Kolkata's month holding now
      assert.are.equal(6, select(2, berlin:peek(0))) -- it follows from its next decision
      assert.truthy(tostring(berlin):find("Asia/Kolkata", 1, true))
      berlin:close(); kolkata:close()
      os.remove(path)
   end)
end)

describe("a rate string of rates and calendar quotas (cellrate.nginx.limits)", function()
   -- cellrate.nginx loads outside nginx where the FFI is (LuaJIT), with a stub ngx
   package.path = "lua/?.lua;" .. package.path
   local had_ngx = rawget(_G, "ngx")
   _G.ngx = had_ngx or {}
   local loaded, nginx = pcall(require, "cellrate.nginx")
   _G.ngx = had_ngx
   local run = loaded and it or pending

   run("makes a calendar quota of a part per month (and per day with tz)", function()
      local limits = nginx.limits("100/minute;1000000/month", { tz = "Europe/Berlin" })
      assert.are.equal(2, #limits)
      assert.truthy(tostring(limits[2]):find("algorithm='calendar', tz='Europe/Berlin'", 1, true))
      assert.falsy(tostring(limits[1]):find("calendar", 1, true))
      local allowed = cellrate.check_all({ { limits[1], "k" }, { limits[2], "k" } }, 50, 1700000000)
      assert.is_true(allowed)
      local _, left, _, reset = limits[2]:peek("k", 1, 1700000000)
      assert.are.same({ 999949, 1385200 }, { left, reset })
      local daily = nginx.limits("10/second;5000/day;1000/24h", { tz = "Asia/Kolkata" })
      assert.truthy(tostring(daily[2]):find("calendar", 1, true))
      assert.falsy(tostring(daily[3]):find("calendar", 1, true))
      assert.truthy(tostring(nginx.limits("5000/day;1/year")[2]):find("tz='UTC'", 1, true))
   end)

   run("names the parameter of a mix it cannot build", function()
      assert.are.equal(STATUS.E_TZ_RATES,
         support.raises("tz", nginx.limits, "100/minute;1000/24h", { tz = "Europe/Berlin" }))
      assert.are.equal(STATUS.E_CALENDAR_AMOUNT,
         support.raises("rate", nginx.limits, "100/minute;1.5/month"))
      assert.are.equal(STATUS.E_TZ,
         support.raises("tz", nginx.limits, "1/month", { tz = "Mars/Olympus_Mons" }))
   end)

   run("gives sync to every part's region (judged by the core)", function()
      local path = support.fresh_path("nginx-sync")
      local limits = nginx.limits("100/minute;5/month", { shared = path, sync = 3600 })
      assert.is_true((cellrate.check_all({ { limits[1], "k" }, { limits[2], "k" } }, 2)))
      for _, limit in ipairs(limits) do limit:close() end
      assert.are.equal(STATUS.E_SYNC,
         support.raises("sync", nginx.limits, "100/minute;5/month", { shared = path, sync = 0 }))
      assert.are.equal(STATUS.E_SYNC_SHARED,
         support.raises("sync", nginx.limits, "100/minute", { sync = 60 }))
      local _, remaining = cellrate.keyed("5/month", { algorithm = "calendar",
                                                      shared = path .. "#1" }):peek("k", 0)
      assert.are.equal(3, remaining)
      os.remove(path); os.remove(path .. "#1")
   end)
end)
