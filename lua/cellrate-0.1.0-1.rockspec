-- Builds the Lua module from the repository root:
--   luarocks make lua/cellrate-0.1.0-1.rockspec
-- The module is the binding plus the C core compiled in: no other library.
-- The version here must match CR_VERSION_* in core/cellrate.h (a test checks).
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
   -- Through the Makefile, so that the module gets the flags of every other
   -- build (core/flags.mk: -mcx16 on x86-64, hidden visibility, ...).
   type = "make",
   build_target = "rock",
   build_variables = {
      CFLAGS = "$(CFLAGS)",
      LUA_INCDIR = "$(LUA_INCDIR)",
   },
   install_target = "rock-install",
   install_variables = {
      LIBDIR = "$(LIBDIR)",
      LUADIR = "$(LUADIR)", -- cellrate.nginx, cellrate.ffi, cellrate.redis and its server-side scripts
   },
}
