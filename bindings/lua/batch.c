/*
 * Redis batches (a part of bindings/cellrate_lua.c, after redis.c;
 * core/cellrate/redis.h, cr_redis_batch): several decisions in one script
 * call, lent to cellrate.redis, which does the transport (docs/design/redis.md,
 * "Batches"). Argument mistakes raise here; the module raises them again at
 * its caller's line.
 */

/*
 * cellrate._redis_batch(now, calls): the words after EVALSHA and the batch
 * script's SHA (a table of strings, numkeys first) of the decisions `calls`,
 * a list of { mode, cost, limit, prefix, name, key, ... } tables (as
 * _redis_request's arguments, a penalty last with PENALTY or'ed into the
 * mode), each at `now`.
 */

/* Whether the call table at `idx` has PENALTY or'ed into its mode. */
static bool batch_penalized(lua_State *L, int idx)
{
    lua_rawgeti(L, idx, 1);
    const bool penalized = lua_type(L, -1) == LUA_TNUMBER &&
                           ((lua_Integer)lua_tointeger(L, -1) & CR_REDIS_PENALTY) != 0;
    lua_pop(L, 1);
    return penalized;
}

static int redis_batch(lua_State *L)
{
    const int64_t now_ns = read_now(L, 1, lua_gettop(L));
    luaL_checktype(L, 2, LUA_TTABLE);
    const size_t ncalls = (size_t)compat_rawlen(L, 2);
    size_t nitems = 0;
    for (size_t i = 0; i < ncalls; i++) {
        lua_rawgeti(L, 2, (int)i + 1);
        size_t n = lua_type(L, -1) == LUA_TTABLE ? (size_t)compat_rawlen(L, -1) : 0;
        if (n > 0 && batch_penalized(L, lua_gettop(L)))
            n--; /* its penalty */
        if (n < 6 || (n - 2) % 4 != 0)
            return luaL_error(L, "_redis_batch: a call is { mode, cost, limit, prefix, name, "
                                 "key, ... }");
        nitems += (n - 2) / 4;
        lua_pop(L, 1);
    }
    cr_redis_call *calls = compat_newuserdata(L, (ncalls > 0 ? ncalls : 1) * sizeof *calls);
    cr_redis_item *items = compat_newuserdata(L, (nitems > 0 ? nitems : 1) * sizeof *items);
    size_t at = 0;
    for (size_t i = 0; i < ncalls; i++) {
        lua_rawgeti(L, 2, (int)i + 1);
        const int call = lua_gettop(L);
        const bool penalized = batch_penalized(L, call);
        const size_t n = (size_t)compat_rawlen(L, call) - (penalized ? 1 : 0);
        const cr_penalty *penalty = NULL;
        if (penalized) {
            lua_rawgeti(L, call, (int)n + 1); /* referenced by the call's table */
            penalty = check_redis_penalty(L, lua_gettop(L));
        }
        lua_rawgeti(L, call, 1);
        bool unused; /* (penalized, above) */
        const bool marked = redis_request_mode_at(L, lua_gettop(L), &unused);
        const cr_redis_mode mode = redis_mode_at(L, lua_gettop(L));
        lua_rawgeti(L, call, 2);
        calls[i].cost = redis_cost_at(L, lua_gettop(L), mode);
        calls[i].mode = (cr_redis_mode)((unsigned)mode | (marked ? CR_REDIS_WIPE_MARKER : 0u));
        calls[i].items = items + at;
        calls[i].nitems = (n - 2) / 4;
        lua_settop(L, call);
        for (size_t j = 0; j < calls[i].nitems; j++, at++) {
            /* the strings stay referenced by the call's table, the limits by theirs */
            for (int k = 0; k < 4; k++)
                lua_rawgeti(L, call, 3 + 4 * (int)j + k);
            const int group = call + 1;
            items[at].limit = check_limit_box(L, group);
            items[at].prefix = luaL_checklstring(L, group + 1, &items[at].prefix_len);
            items[at].name = luaL_checklstring(L, group + 2, &items[at].name_len);
            items[at].key = check_key(L, group + 3, &items[at].key_len);
            items[at].priority = -1;
            items[at].penalty = j == 0 ? penalty : NULL;
            lua_settop(L, call);
        }
        lua_pop(L, 1);
    }
    const size_t size = cr_redis_batch_size(calls, ncalls);
    if (size == SIZE_MAX)
        return report_status(L, CR_E_NOMEM, NULL);
    char *buf = compat_newuserdata(L, size > 0 ? size : 1);
    cr_redis_word *words = compat_newuserdata(L, CR_REDIS_BATCH_WORDS(ncalls, nitems) *
                                                     sizeof(cr_redis_word));
    size_t count = 0;
    const cr_status status = cr_redis_batch(calls, ncalls, now_ns, buf, size, words, &count, NULL);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushlstring(L, buf + words[i].offset, words[i].len);
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

/* cellrate._redis_batch_reply(ncalls, reply): true when `reply` is a batch's
 * reply to `ncalls` decisions (a list of one element each), else nil, the
 * core's message and its code. */
static int redis_batch_reply(lua_State *L)
{
    const lua_Integer ncalls = luaL_checkinteger(L, 1);
    const bool is_list = lua_type(L, 2) == LUA_TTABLE;
    const cr_status status = cr_redis_batch_reply(ncalls > 0 ? (size_t)ncalls : 0, is_list,
                                                  is_list ? (size_t)compat_rawlen(L, 2) : 0);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    lua_pushboolean(L, true);
    return 1;
}
