-- The fleet share's member rules (tests/vectors/share.txt) through the Lua face,
-- under Lua 5.4 and LuaJIT alike (tests/lua/share_vectors.lua reads them; so
-- does nginx, tests/nginx/share.conf.in).
local cellrate = require "cellrate"
local check = dofile("tests/lua/share_vectors.lua")

describe("the share's member rules (share.txt)", function()
   it("answers every line as the reference model", function()
      local result = check(cellrate, "tests/vectors/share.txt")
      assert.same({}, result.failures)
      assert.is_true(result.checked > 300, tostring(result.checked))
      -- LuaJIT skips the lines whose integers no double holds (beyond 2^53): the
      -- fleets near the ceilings (the C tests and the other faces check them)
      local most = type(jit) == "table" and result.checked / 10 or 0
      assert.is_true(result.skipped <= most, tostring(result.skipped))
   end)

   it("reads the script's reply words from the core's table", function()
      local _, message, code = cellrate._share_reply({ "1.5", 2, "0.5" })
      local status = io.open("tests/vectors/status.txt"):read("a")
      assert.equal(status:match("E_SHARE_REPLY [^|]*|([^\n]*)"), message)
      assert.equal("E_SHARE_REPLY", code)
   end)

   it("pins the server script's FLOOR_DIVISOR to the core's", function()
      local file = assert(io.open("redis/share.lua", "rb"))
      local script = file:read("*a")
      file:close()
      assert.equal(cellrate._SHARE_FLOOR_DIVISOR,
                   tonumber(script:match("\nlocal FLOOR_DIVISOR = (%d+)\n")))
   end)
end)
