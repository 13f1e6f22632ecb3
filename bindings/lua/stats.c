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

/* An array of { name =, admitted =, refused = }: rows of cr_stats_by. */
static void push_stats_rows(lua_State *L, const cr_stats_row *rows, size_t count)
{
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, rows[i].name);
        lua_setfield(L, -2, "name");
        compat_pushint64(L, (int64_t)rows[i].admitted);
        lua_setfield(L, -2, "admitted");
        compat_pushint64(L, (int64_t)rows[i].refused);
        lua_setfield(L, -2, "refused");
        lua_rawseti(L, -2, (int)i + 1);
    }
}

/* stats_by(): { plan = rows, priority = rows }, the metrics' label names
 * (each row in the core's order: "default" first, classes by name). */
static void push_stats_by(lua_State *L, const cr_stats_by *by)
{
    lua_createtable(L, 0, 2);
    push_stats_rows(L, by->plans, by->nplans);
    lua_setfield(L, -2, "plan");
    push_stats_rows(L, by->priorities, by->npriorities);
    lua_setfield(L, -2, "priority");
}
