-- Shared regions and arguments under hostile conditions, from Lua: a dangling
-- link at the path, a full file system, a damaged or held stripe lock, a NUL
-- in the path, shared_mode without shared. Runtime failures return nil, a
-- message and a code; argument mistakes raise. Cases that could hang or kill
-- the interpreter (they did, before they were fixed) run in a child
-- interpreter under `timeout`.
local cellrate = require "cellrate"
local support = dofile("tests/lua/support.lua")(assert)
local pack, fails = support.pack, support.fails

local LOCKS_OFFSET = 320 -- the first stripe lock of a region (docs/design.md §5)
local interpreter = jit and "luajit" or "lua5.4"

local function sh(command)
   local ok, _, code = os.execute(command)
   return ok == true or ok == 0, code
end

local function make_dir()
   local handle = io.popen("mktemp -d /dev/shm/cellrate-lua-hostile-XXXXXX 2>/dev/null || mktemp -d")
   local dir = handle:read("*l")
   handle:close()
   return dir
end


-- Runs `code` in a child interpreter with this module path; returns its
-- output, or fails if it hung or died.
local function in_child(code, seconds)
   local script = os.tmpname()
   local f = assert(io.open(script, "w"))
   f:write(("package.cpath = %q\n"):format(package.cpath), code)
   f:close()
   local handle = io.popen(("timeout %d %s %s 2>&1; echo \"exit=$?\""):format(seconds, interpreter, script))
   local out = handle:read("*a")
   handle:close()
   os.remove(script)
   assert.is_truthy(out:find("exit=0", 1, true), "the child hung or died: " .. out)
   return out
end

local function write_at(path, offset, bytes)
   local f = assert(io.open(path, "r+b"))
   f:seek("set", offset)
   f:write(bytes)
   f:close()
end

describe("hostile shared regions", function()
   local dir
   before_each(function() dir = make_dir() end)
   after_each(function() sh("rm -rf " .. dir) end)

   it("refuses a symbolic link to nothing, with a code, and leaves no file", function()
      local link = dir .. "/r"
      assert.is_true(sh(("ln -s %s/nowhere %s"):format(dir, link)))
      local out = in_child(([[
         local cellrate = require "cellrate"
         local lim, err, code = cellrate.limiter("10/s", { shared = %q })
         print(lim, err, code)
      ]]):format(link), 20)
      assert.is_truthy(out:find("symbolic link", 1, true), out)
      assert.is_truthy(out:find("E_SHARED_DANGLING", 1, true), out)
      local handle = io.popen("ls -A " .. dir)
      assert.are.equal("r\n", handle:read("*a"))
      handle:close()
   end)

   it("returns nil, ENOSPC for a region too big for its file system", function()
      local mount_point = dir .. "/small-fs"
      assert.is_true(sh("mkdir " .. mount_point))
      if not sh(("mount -t tmpfs -o size=1M none %s 2>/dev/null"):format(mount_point)) then
         pending("cannot mount a 1 MB tmpfs here (needs root or CAP_SYS_ADMIN)")
         return
      end
      local ok, err = pcall(function()
         local out = in_child(([[
            local cellrate = require "cellrate"
            local keyed, err, code = cellrate.keyed("10/s", { capacity = 100000, shared = %q })
            print(keyed, err, code)
         ]]):format(mount_point .. "/r"), 20)
         assert.is_truthy(out:find("No space left on device", 1, true), out)
         assert.is_truthy(out:find("E_SHARED_IO", 1, true), out)
         local handle = io.popen("ls -A " .. mount_point)
         assert.are.equal("", handle:read("*a")) -- nothing holds the space
         handle:close()
      end)
      sh("umount " .. mount_point)
      assert(ok, err)
   end)

   it("admits a new key past a damaged stripe lock", function()
      local path = dir .. "/lock"
      local keyed = cellrate.keyed("10/s", { capacity = 1, shared = path })
      keyed:close()
      write_at(path, LOCKS_OFFSET, "\1")
      local out = in_child(([[
         local cellrate = require "cellrate"
         local keyed = assert(cellrate.keyed("10/s", { capacity = 1, shared = %q }))
         print("admitted", keyed:allow("a-new-key", 1, 5))
      ]]):format(path), 20)
      assert.is_truthy(out:find("admitted\ttrue", 1, true), out)
   end)

   it("returns nil, message, code when a living process keeps a lock", function()
      local path = dir .. "/held"
      local keyed = assert(cellrate.keyed("10/s", { capacity = 1, shared = path }))
      local handle = io.popen("sleep 60 & echo $!")
      local pid = tonumber(handle:read("*l"))
      handle:close()
      -- the holder's word: pid in the high half, its complement in the low half
      local low = 0xFFFFFFFF - pid
      local bytes = {}
      for i = 0, 3 do bytes[#bytes + 1] = string.char(math.floor(low / 256 ^ i) % 256) end
      for i = 0, 3 do bytes[#bytes + 1] = string.char(math.floor(pid / 256 ^ i) % 256) end
      write_at(path, LOCKS_OFFSET, table.concat(bytes))
      -- A runtime failure is returned by every method that can meet it (the
      -- first admission of a key claims a slot under the lock), never raised.
      fails("E_SHARED_LOCK", { "lock" }, keyed.allow, keyed, "a-new-key", 1, 5)
      fails("E_SHARED_LOCK", { "lock" }, keyed.check, keyed, "a-new-key", 1, 5)
      fails("E_SHARED_LOCK", { "lock" }, keyed.check_headers, keyed, "a-new-key", 1, 5)
      fails("E_SHARED_LOCK", { "lock" }, keyed.reserve, keyed, "a-new-key", 1, nil, 5)
      fails("E_SHARED_LOCK", { "lock" }, keyed.wait, keyed, "a-new-key", 1, 0)
      fails("E_SHARED_LOCK", { "lock" }, keyed.anchor, keyed, "a-new-key", 1, 5)
      fails("E_SHARED_LOCK", { "lock" }, cellrate.check_all, { { keyed, "a-new-key" } }, 1, 5)
      -- peek writes nothing, and refund has nothing to give back for a key
      -- that holds no slot: neither takes the lock.
      assert.is_true((keyed:peek("a-new-key", 1, 5)))
      assert.are.equal(0, select("#", keyed:refund("a-new-key", 1, 5)))
      sh("kill " .. pid)
      assert.is_true(keyed:allow("a-new-key", 1, 5)) -- its holder is gone: taken over
      keyed:close()
   end)
end)

describe("shared options", function()
   it("refuses a NUL in the path, naming shared", function()
      for _, make in ipairs({ cellrate.limiter, cellrate.keyed }) do
         local ok, err = pcall(make, "10/s", { shared = "/dev/shm/a\0b" })
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find("shared must be the path", 1, true), tostring(err))
      end
   end)

   it("refuses shared_mode without shared", function()
      for _, make in ipairs({ cellrate.limiter, cellrate.keyed }) do
         local ok, err = pcall(make, "10/s", { shared_mode = 384 })
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find("shared_mode is the mode of a region file", 1, true),
            tostring(err))
      end
   end)
end)
