/*
 * Counters (a part of bindings/cellrate_lua.c): a store's and a concurrency
 * limit's counters as a table of integers, one field per counter of the
 * core's lists (CR_STATS_LIST, CR_GAUGE_STATS_LIST).
 */

#define STATS_FIELD_(name)                    \
    compat_pushint64(L, (int64_t)stats.name); \
    lua_setfield(L, -2, #name);

/* A store's counters, a table of integers. */
static void push_stats(lua_State *L, const cr_stats *counts)
{
    const cr_stats stats = *counts;
    lua_createtable(L, 0, 7);
    CR_STATS_LIST(STATS_FIELD_)
}

/* A concurrency limit's counters, a table of integers (peak nil when not tracked). */
static void push_gauge_stats(lua_State *L, const cr_gauge_stats *counts)
{
    const cr_gauge_stats stats = *counts;
    lua_createtable(L, 0, 9);
    CR_GAUGE_STATS_LIST(STATS_FIELD_)
    if (!stats.peak_tracked) {
        lua_pushnil(L);
        lua_setfield(L, -2, "peak");
    }
}

#undef STATS_FIELD_
