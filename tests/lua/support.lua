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

   return support
end
