/*
 * Version shims for the Lua module: one source builds against Lua 5.4 (and
 * 5.2/5.3) and against Lua 5.1 / LuaJIT 2.1. Every difference between those
 * APIs that the binding (bindings/cellrate_lua.c and its parts in
 * bindings/lua/) relies on is resolved here, by LUA_VERSION_NUM.
 *
 * Not a shim: __close is set on the metatables in every version; before 5.4
 * it is an inert field, and close() / __gc do the same work.
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
/* Lua 5.3+ numbers have a 64-bit integer subtype. */
#define compat_isinteger(L, idx) lua_isinteger((L), (idx))
#define compat_pushint64(L, value) lua_pushinteger((L), (lua_Integer)(value))
#else
/* 5.1 and LuaJIT numbers are doubles only; lua_pushinteger takes a ptrdiff_t,
 * which is 32 bits on 32-bit targets, so an int64 goes in as a double. */
#define compat_isinteger(L, idx) ((void)(L), (void)(idx), 0)
#define compat_pushint64(L, value) lua_pushnumber((L), (lua_Number)(value))
#endif

#if LUA_VERSION_NUM >= 502
#define compat_rawlen(L, idx) lua_rawlen((L), (idx))
#else
#define compat_rawlen(L, idx) lua_objlen((L), (idx))
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
