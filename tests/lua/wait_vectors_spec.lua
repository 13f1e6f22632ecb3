-- The wait plan (tests/vectors/wait.txt) through the Lua face, under Lua 5.4
-- and LuaJIT alike (tests/lua/wait_vectors.lua reads them; so does nginx,
-- tests/nginx/wait.conf.in).
local cellrate = require "cellrate"
local check = dofile("tests/lua/wait_vectors.lua")

describe("the wait plan (wait.txt)", function()
   it("answers every line as the reference model", function()
      local result = check(cellrate, "tests/vectors/wait.txt")
      assert.same({}, result.failures)
      assert.is_true(result.checked > 400, tostring(result.checked))
   end)
end)
