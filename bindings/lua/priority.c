/*
 * Priorities inside one limit (a part of bindings/cellrate_lua.c;
 * cellrate/priority.h): a store's classes from its options, a decision's
 * class by name, and the rule the nginx helper asks of the core.
 */

/* priorities = { name = reserve, ... } (the table at `idx`) into opts->args:
 * its names stay alive in the options table on the stack. The core judges
 * the classes (count, names, reserves, the algorithm). */
static void read_priorities(lua_State *L, int idx, options *opts)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_status(L, CR_E_PRIORITIES);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            raise_status(L, CR_E_PRIORITIES);
        if (lua_type(L, -1) != LUA_TNUMBER)
            raise_status(L, CR_E_PRIORITIES_RESERVE);
        if (count <= CR_PRIORITIES_MAX) {
            cr_priority_arg *arg = &opts->classes[count];
            arg->name = lua_tolstring(L, -2, &arg->name_len);
            arg->reserve = (double)lua_tonumber(L, -1);
        }
        count++;
        lua_pop(L, 1);
    }
    opts->args.priorities = opts->classes;
    opts->args.npriorities = count <= CR_PRIORITIES_MAX ? count : CR_PRIORITIES_MAX + 1;
    opts->args.has_priorities = true;
}

/* priority: nil for none, else the name of one of `limit`'s classes, as its
 * index (-1: none). */
static int32_t read_priority(lua_State *L, int idx, int top, const cr_limit *limit)
{
    int32_t index = -1;
    if (idx > top || lua_isnil(L, idx))
        return index;
    if (lua_type(L, idx) != LUA_TSTRING)
        raise_status(L, CR_E_PRIORITY);
    size_t len;
    const char *name = lua_tolstring(L, idx, &len);
    const cr_status status = cr_priority_find(limit, name, len, &index);
    if (status != CR_OK)
        raise_status(L, status);
    return index;
}

/* cellrate._check_priority_items(count): nothing, or raises naming priority
 * when `count` limits decided as one would take a class. */
static int check_priority_items(lua_State *L)
{
    int64_t count;
    if (!to_int64(L, 1, &count) || count < 0)
        return raise_status(L, CR_E_PRIORITY_SEVERAL);
    const cr_status status = cr_priority_items((size_t)count);
    if (status != CR_OK)
        return raise_status(L, status);
    return 0;
}
