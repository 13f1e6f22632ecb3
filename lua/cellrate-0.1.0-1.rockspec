-- Builds the Lua module from the repository root:
--   luarocks make lua/cellrate-0.1.0-1.rockspec
-- The module is the binding plus the C core compiled in: no other library.
rockspec_format = "3.0"
package = "cellrate"
version = "0.1.0-1"

source = {
   url = "git+https://example.invalid/cellrate.git",
   tag = "v0.1.0",
}

description = {
   summary = "GCRA rate limiter: one C11 core, lock-free, in integer nanoseconds",
   detailed = [[
cellrate admits or turns away requests with the Generic Cell Rate Algorithm:
one 64-bit theoretical arrival time per key, updated by compare-and-swap.
cellrate.limiter(rate, opts) limits one stream; cellrate.keyed(rate, opts)
limits many keys in a table of bounded size.
]],
   license = "MIT",
   labels = { "rate-limiting", "gcra" },
}

dependencies = {
   "lua >= 5.1",
}

build = {
   type = "builtin",
   modules = {
      ["cellrate.nginx"] = "lua/cellrate/nginx.lua",
      cellrate = {
         sources = {
            "bindings/cellrate_lua.c",
            "core/clock.c",
            "core/decide.c",
            "core/fastclock.c",
            "core/keyed.c",
            "core/limit.c",
            "core/limiter.c",
            "core/region.c",
            "core/sleep.c",
         },
         incdirs = { "core" },
         defines = { "_GNU_SOURCE" },
         -- Without -mcx16 in CFLAGS the core's 16-byte compare-and-swap goes
         -- through libatomic.
         libraries = { "m", "pthread", "atomic" },
      },
   },
}
