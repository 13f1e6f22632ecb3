/*
 * The penalty box (a part of bindings/cellrate_lua.c; docs/design.md §15):
 * the `penalty` option, a table { after = "5/minute", ban = 10, max_ban = 60 },
 * read into the core's cr_penalty, judged by cr_penalty_init.
 */

/* The penalty table at `idx` into opts->penalty; a mistake raised, naming
 * its parameter. */
static void read_penalty(lua_State *L, int idx, options *opts)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_status(L, CR_E_PENALTY);
    lua_getfield(L, idx, "after");
    lua_getfield(L, idx, "ban");
    lua_getfield(L, idx, "max_ban");
    const int top = lua_gettop(L);
    if (lua_type(L, top - 2) != LUA_TSTRING)
        raise_status(L, CR_E_PENALTY_AFTER);
    if (lua_type(L, top - 1) != LUA_TNUMBER)
        raise_status(L, CR_E_PENALTY_BAN);
    const bool has_max_ban = !lua_isnil(L, top);
    if (has_max_ban && lua_type(L, top) != LUA_TNUMBER)
        raise_status(L, CR_E_PENALTY_MAX_BAN);
    size_t len;
    const char *after = lua_tolstring(L, top - 2, &len);
    const cr_status status = cr_penalty_init(
        &opts->penalty, after, len, (double)lua_tonumber(L, top - 1),
        has_max_ban ? (double)lua_tonumber(L, top) : 0, has_max_ban);
    lua_pop(L, 3);
    if (status != CR_OK)
        raise_status(L, status);
    opts->has_penalty = true;
}
