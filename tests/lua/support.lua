-- What several specs check the same way. busted gives each spec its own
-- `assert`, so a spec passes it in:
--   local support = dofile("tests/lua/support.lua")(assert)
-- (busted runs from the repository's root).
return function(assert)
   local support = {}

   -- Calls fn(...) and returns the error it must raise without the caller's
   -- position, checking that the error is a string whose text after that
   -- position starts with `param`.
   function support.raises(param, fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok, "expected an error about " .. param)
      assert.is_string(err)
      local text = err:gsub("^[^\n]-:%d+: ", "", 1)
      assert.is_truthy(text:find(param, 1, true) == 1,
         ("error %q does not start with %q"):format(err, param))
      return text
   end

   -- A region path of this run that no file holds: `name`, the time and a
   -- serial, under $CELLRATE_TEST_DIR (run.sh makes one per run) or /tmp.
   local serial = 0
   function support.fresh_path(name)
      serial = serial + 1
      local path = ("%s/cellrate-lua-%s-%s-%d"):format(os.getenv("CELLRATE_TEST_DIR") or "/tmp",
                                                      name, tostring(os.time()), serial)
      os.remove(path)
      return path
   end

   -- Seconds of a text of ns where a double carries them exactly (a multiple
   -- of 0.5 s), else nil; split so that no integer passes 2^53 (the calendar
   -- vectors' instants).
   function support.seconds_of(ns)
      local whole, fraction = ns:sub(1, -10), tonumber(ns:sub(-9))
      if fraction % 500000000 ~= 0 then
         return nil
      end
      return tonumber(whole ~= "" and whole or "0") + fraction / 1e9
   end

   -- The exact bounds lines of tests/vectors/calendar.txt (from Python's
   -- zoneinfo), each as zone, period ("month", "2 weeks"), now in seconds,
   -- and the period's start and end in seconds; a line whose instant a
   -- float does not carry exactly is skipped.
   function support.calendar_bounds(path)
      return coroutine.wrap(function()
         for line in io.lines(path) do
            local zone, unit, count, now, start, stop =
               line:match("^bounds (%S+) (%a+) (%d+) (%d+) (%d+) (%d+)$")
            local now_s = now and support.seconds_of(now)
            if now_s then
               local period = count == "1" and unit or (count .. " " .. unit .. "s")
               coroutine.yield(zone, period, now_s, support.seconds_of(start),
                  support.seconds_of(stop), line)
            end
         end
      end)
   end

   function support.pack(...)
      return { n = select("#", ...), ... }
   end

   -- fn(...) must return exactly nil, a message holding each of `needles`, and `code`.
   function support.fails(code, needles, fn, ...)
      local results = support.pack(fn(...))
      assert.are.equal(3, results.n)
      local lim, err, got_code = results[1], results[2], results[3]
      assert.is_nil(lim)
      assert.is_string(err)
      for _, needle in ipairs(needles) do
         assert.is_truthy(err:find(needle, 1, true), ("error %q lacks %q"):format(err, needle))
      end
      assert.are.equal(code, got_code)
   end

   -- The parameter and message of a status of the core's table
   -- (tests/vectors/status.txt): the words every face must use.
   function support.status(name)
      local file = assert(io.open("tests/vectors/status.txt", "r"))
      local text = file:read("*a")
      file:close()
      local param, message = text:match("\nstatus %d+ " .. name .. " %S+ (%S+) |([^\n]*)")
      assert(message, "no status " .. name .. " in tests/vectors/status.txt")
      return { param = param, message = message }
   end

   -- A real redis-server on a free loopback port (the Redis specs), killed by stop_redis.
   local has_redis = os.execute("command -v redis-server >/dev/null 2>&1")
   support.has_redis = has_redis == true or has_redis == 0

   function support.free_port()
      local socket = require("socket")
      local server = assert(socket.bind("127.0.0.1", 0))
      local _, port = server:getsockname()
      server:close()
      return tonumber(port)
   end

   -- Every slot's wipe marker ("cellrate{TTTT}"), found an age ago: a Redis in service
   -- for long, whose keys have their burst (on_wipe = "refuse" reads an empty one as
   -- wiped). The markers are the core's, of keys enough to meet every slot.
   local markers
   function support.in_service(port)
      if not markers then
         local cellrate = require("cellrate")
         local flag = cellrate._redis_protocol().WIPE_MARKER
         local limit, seen, n = cellrate.limit_spec(10), {}, 0
         markers = {}
         local i = 0
         while n < 16384 do
            i = i + 1
            local marker = cellrate._redis_request(1 + flag, 1, nil, limit, "", "n", tostring(i))[3]
            if not seen[marker] then
               seen[marker], n = true, n + 1
               markers[n] = marker
            end
         end
      end
      -- sent as one buffer of SETs on a socket of its own, the 16,384 replies read
      local commands = {}
      for i, marker in ipairs(markers) do
         commands[i] = ("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$10\r\n1000000000\r\n")
            :format(#marker, marker)
      end
      local conn = assert(require("socket").connect("127.0.0.1", port))
      conn:settimeout(30)
      assert(conn:send(table.concat(commands)))
      for _ = 1, #markers do
         assert(assert(conn:receive("*l")) == "+OK")
      end
      conn:close()
   end

   function support.start_redis(port)
      local socket = require("socket")
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. dir))
      local handle = assert(io.popen(("redis-server --port %d --bind 127.0.0.1 --save '' "
         .. "--appendonly no --dir %s >/dev/null 2>&1 & echo $!"):format(port, dir)))
      local pid = handle:read("*l")
      handle:close()
      for _ = 1, 200 do
         local conn = socket.connect("127.0.0.1", port)
         if conn then
            conn:close()
            support.in_service(port) -- (an empty Redis would read as wiped)
            return { pid = pid, dir = dir, port = port }
         end
         socket.sleep(0.02)
      end
      error("redis-server did not start")
   end

   function support.stop_redis(server)
      if server then
         os.execute("kill -9 " .. server.pid .. " 2>/dev/null; sleep 0.1; rm -rf " .. server.dir)
      end
   end

   -- The Redis specs' frame: describe(name) against a redis-server of its own,
   -- started in setup and killed in teardown, its database flushed and left in
   -- service (keys have their burst) before each test; pending where
   -- redis-server is not installed. body(redis) adds the tests: redis.store is
   -- cellrate.redis, redis.connect Debian's redis-lua connect, and from setup
   -- on redis.server (its port) and redis.client (connected to it).
   function support.describe_redis(name, body)
      -- busted's functions (the spec's environment has them; this file's has not)
      local busted = require("busted")
      local describe, pending, setup, teardown, before_each =
         busted.describe, busted.pending, busted.setup, busted.teardown, busted.before_each
      if not support.has_redis then
         describe(name, function()
            pending("redis-server is installed by tests/install-deps.sh")
         end)
         return
      end
      describe(name, function()
         local redis = { store = require("cellrate.redis"), connect = require("redis").connect }
         setup(function()
            redis.server = support.start_redis(support.free_port())
            redis.client = redis.connect("127.0.0.1", redis.server.port)
         end)
         teardown(function()
            support.stop_redis(redis.server)
         end)
         before_each(function()
            redis.client:flushall()
            support.in_service(redis.server.port)
         end)
         body(redis)
      end)
   end

   return support
end
