/*
 * Version shims for the Lua module: one source builds against Lua 5.4 (and
 * 5.2/5.3) and against Lua 5.1 / LuaJIT 2.1. Every difference between those
 * APIs that cellrate_lua.c relies on is resolved here, by LUA_VERSION_NUM.
 */
#ifndef CELLRATE_LUA_COMPAT_H
#define CELLRATE_LUA_COMPAT_H

#include <lauxlib.h>
#include <lua.h>

#if LUA_VERSION_NUM >= 504
/* Full userdata, no user values. */
#define compat_newuserdata(L, size) lua_newuserdatauv((L), (size), 0)
#else
#define compat_newuserdata(L, size) lua_newuserdata((L), (size))
#endif

#if LUA_VERSION_NUM >= 503
/* Lua 5.3+ numbers have an integer subtype; 5.1 and LuaJIT have doubles only. */
#define COMPAT_HAS_INTEGERS 1
#define compat_isinteger(L, idx) lua_isinteger((L), (idx))
#else
#define COMPAT_HAS_INTEGERS 0
#define compat_isinteger(L, idx) 0
#endif

/* The to-be-closed variables of Lua 5.4 (`local x <close>`) call __close. */
#if LUA_VERSION_NUM >= 504
#define COMPAT_HAS_CLOSE 1
#else
#define COMPAT_HAS_CLOSE 0
#endif

#if LUA_VERSION_NUM >= 502
#define compat_setfuncs(L, funcs, nup) luaL_setfuncs((L), (funcs), (nup))
#else
/* luaL_setfuncs arrived in 5.2 (LuaJIT has it, plain 5.1 does not): sets
 * each function of `funcs` into the table below `nup` upvalues on the stack,
 * sharing those upvalues, then pops them. */
static inline void compat_setfuncs(lua_State *L, const luaL_Reg *funcs, int nup)
{
    luaL_checkstack(L, nup + 1, "too many upvalues");
    for (; funcs->name != NULL; funcs++) {
        for (int i = 0; i < nup; i++)
            lua_pushvalue(L, -nup);
        lua_pushcclosure(L, funcs->func, nup);
        lua_setfield(L, -(nup + 2), funcs->name);
    }
    lua_pop(L, nup);
}
#endif

#endif /* CELLRATE_LUA_COMPAT_H */
