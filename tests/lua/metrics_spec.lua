-- The metrics every exporter publishes (docs/design.md §17): cellrate.metrics()
-- is tests/vectors/metrics.txt, the list the core (tests/c/test_metrics.c) and
-- the Python face (tests/python/test_metrics_table.py) are held to as well.
local cellrate = require "cellrate"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local VECTORS = here .. "../../tests/vectors/"

-- metrics.txt in the shape of cellrate.metrics()
local function vector_metrics()
   local metrics = {}
   for line in io.lines(VECTORS .. "metrics.txt") do
      local kind, rest = line:match("^(%a+) (.*)$")
      if kind == "metric" then
         local head, help = rest:match("^(.-) |(.*)$")
         local w = {}
         for word in head:gmatch("%S+") do
            w[#w + 1] = word
         end
         metrics[#metrics + 1] = {
            name = w[1], prometheus_name = w[2], type = w[3], instrument = w[4], unit = w[5],
            stats = w[6], help = help, labels = {}, samples = {},
            label = w[7] ~= "-" and { name = w[7], attribute = w[8] } or nil,
         }
      elseif kind == "by" then
         local name, attribute = rest:match("^(%S+) (%S+)$")
         metrics[#metrics].by = { name = name, attribute = attribute }
      elseif kind == "label" then
         local name, attribute = rest:match("^(%S+) (%S+)$")
         local labels = metrics[#metrics].labels
         labels[#labels + 1] = { name = name, attribute = attribute }
      elseif kind == "sample" then
         local field, value = rest:match("^(%S+) (%S+)$")
         local samples = metrics[#metrics].samples
         samples[#samples + 1] = { field = field, value = value ~= "-" and value or nil }
      end
   end
   assert(#metrics > 0, "cannot read metrics.txt")
   return metrics
end

describe("cellrate.metrics()", function()
   it("is tests/vectors/metrics.txt", function()
      assert.same(vector_metrics(), cellrate.metrics())
   end)

   it("reads counters that stats() has", function()
      local rate = cellrate.keyed(1):stats()
      local concurrency = cellrate.concurrency(1, { peak = true }):stats()
      local by = cellrate.keyed(1, { plans = { pro = 2 }, priorities = { a = 0 } }):stats_by()
      for _, metric in ipairs(cellrate.metrics()) do
         local stats = metric.stats == "rate" and rate or concurrency
         if metric.by then -- a row of stats_by() under the label's name
            assert.equal(metric.by.name, metric.stats)
            stats = by[metric.by.name][1]
         end
         for _, sample in ipairs(metric.samples) do
            assert.is_not_nil(stats[sample.field], metric.name .. " " .. sample.field)
         end
      end
   end)

   it("counts by plan and by class (stats_by): rows that sum to stats()", function()
      local keyed = cellrate.keyed(10, {
         period = 3600, burst = 10, capacity = 16,
         plans = { pro = { 40, period = 3600, burst = 40 } },
         priorities = { critical = 0, bulk = 0.5 },
      })
      for _ = 1, 25 do
         assert.is_true((keyed:check("a", 1, nil, nil, "pro")))
      end
      local bulk = 0
      for _ = 1, 12 do
         if keyed:check("b", 1, nil, "bulk") then bulk = bulk + 1 end
      end
      assert.equal(5, bulk) -- bulk keeps half of the burst back
      keyed:_would_refuse(1, nil, "bulk") -- a dry run let the last refusal through
      local by = keyed:stats_by()
      assert.same({ { name = "default", admitted = 5, refused = 6 },
                    { name = "pro", admitted = 25, refused = 0 } }, by.plan)
      assert.same({ { name = "bulk", admitted = 5, refused = 6 },
                    { name = "critical", admitted = 25, refused = 0 } }, by.priority)
      local stats = keyed:stats()
      assert.equal(30, stats.admitted)
      assert.equal(6, stats.refused)
      assert.equal(1, stats.would_refuse)
      assert.same({ plan = {}, priority = {} }, cellrate.keyed(1):stats_by())
   end)
end)
