/*
 * The reference points of the Lua scenarios: the cheapest C function Lua can
 * call (noop); the same plus the clock read that cellrate's lim:allow() makes,
 * read by the core's own inlined reader (fast_clock_ns: the default clock;
 * monotonic_clock_ns: clock = "monotonic"); the default's as a method of a
 * userdata (object():fast_clock_ns()), the call shape of lim:allow(); and
 * clock_ns, one clock_gettime(CLOCK_MONOTONIC) (the plain-Lua GCRA's clock and
 * the loops' timer). One source for Lua 5.4 and LuaJIT: it uses only calls
 * both have. Linked with build/libcellrate.a (bench/run.sh).
 */
#include <time.h>

#include "fastclock.h"

#include <lauxlib.h>
#include <lua.h>

#if defined(__GNUC__)
#define BASELINE_EXPORT __attribute__((visibility("default")))
#else
#define BASELINE_EXPORT
#endif

BASELINE_EXPORT int luaopen_cellrate_bench_baseline(lua_State *L);

static int noop(lua_State *L)
{
    (void)L;
    return 0;
}

/* CLOCK_MONOTONIC in nanoseconds (exact in a double for ~104 days of uptime
 * under LuaJIT, an integer under Lua 5.4). */
static int clock_ns(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
    return 1;
}

/* cellrate's default clock ("fast"), as lim:allow() reads it. */
static int fast_clock_ns(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)cr_fast_clock_now());
    return 1;
}

/* clock = "monotonic", as lim:allow() reads it on such a limiter. */
static int monotonic_clock_ns(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)cr_monotonic_now());
    return 1;
}

/* A userdata whose metatable's __index holds noop and fast_clock_ns. */
static int object(lua_State *L)
{
    lua_newuserdata(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, -2);
    return 1;
}

int luaopen_cellrate_bench_baseline(lua_State *L)
{
    lua_newtable(L); /* metatable of object() */
    lua_newtable(L); /* its __index */
    lua_pushcfunction(L, noop);
    lua_setfield(L, -2, "noop");
    lua_pushcfunction(L, fast_clock_ns);
    lua_setfield(L, -2, "fast_clock_ns");
    lua_setfield(L, -2, "__index");
    lua_pushcclosure(L, object, 1);

    lua_newtable(L);
    lua_insert(L, -2);
    lua_setfield(L, -2, "object");
    lua_pushcfunction(L, noop);
    lua_setfield(L, -2, "noop");
    lua_pushcfunction(L, clock_ns);
    lua_setfield(L, -2, "clock_ns");
    lua_pushcfunction(L, fast_clock_ns);
    lua_setfield(L, -2, "fast_clock_ns");
    lua_pushcfunction(L, monotonic_clock_ns);
    lua_setfield(L, -2, "monotonic_clock_ns");
    return 1;
}
