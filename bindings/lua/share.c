/*
 * The fleet share's member rules (a part of bindings/cellrate_lua.c;
 * core/cellrate/share.h), lent to cellrate.share, which does the heartbeat's
 * I/O and keeps the member's state. Private: each function takes what the
 * share already holds (its fleet, a limit_spec; its share; its counters'
 * table) and translates the core's answer.
 */

/* cellrate._share_limit(fleet, share) -> rate, period, burst: the local limit. */
static int share_limit(lua_State *L)
{
    const cr_limit *fleet = check_limit_box(L, 1);
    cr_limit local;
    const cr_status status = cr_share_local_limit(fleet, luaL_checknumber(L, 2), &local);
    if (status != CR_OK)
        return raise_status(L, status);
    lua_pushnumber(L, local.rate);
    lua_pushnumber(L, local.period_s);
    compat_pushint64(L, local.burst);
    return 3;
}

/* cellrate._share_of(fleet, rate, period) -> the share a local limit is. */
static int share_of(lua_State *L)
{
    const cr_limit *fleet = check_limit_box(L, 1);
    lua_pushnumber(L, cr_share_of_rate(fleet, luaL_checknumber(L, 2), luaL_checknumber(L, 3)));
    return 1;
}

/* A count >= 0 at `idx` (an integer, or an integral float), else an argument error. */
static uint64_t share_count(lua_State *L, int idx, const char *what)
{
    int64_t value;
    if (!to_int64(L, idx, &value) || value < 0)
        luaL_error(L, "%s must be an integer >= 0", what);
    return (uint64_t)value;
}

/* cellrate._share_asked(stats, baseline) -> asked, counted: the units asked
 * since `baseline`, from a stats() table, and the next baseline. */
static int share_asked(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const fields[3] = {"units_admitted", "units_refused", "units_refunded"};
    uint64_t counts[3];
    for (int i = 0; i < 3; i++) {
        lua_getfield(L, 1, fields[i]);
        counts[i] = share_count(L, -1, fields[i]);
        lua_pop(L, 1);
    }
    const cr_stats stats = {
        .units_admitted = counts[0], .units_refused = counts[1], .units_refunded = counts[2]};
    uint64_t counted;
    const uint64_t asked = cr_share_asked(&stats, share_count(L, 2, "baseline"), &counted);
    compat_pushint64(L, asked);
    compat_pushint64(L, counted);
    return 2;
}

/* cellrate._share_report(fleet, asked, elapsed, known, share, joined) ->
 * demand, held, fleet_rate: a heartbeat's numbers. */
static int share_report(lua_State *L)
{
    const cr_limit *fleet = check_limit_box(L, 1);
    const cr_share_report report = cr_share_report_of(fleet, luaL_checknumber(L, 2),
                                                      luaL_checknumber(L, 3), lua_toboolean(L, 4),
                                                      luaL_checknumber(L, 5), lua_toboolean(L, 6));
    lua_pushnumber(L, report.demand);
    lua_pushnumber(L, report.held);
    lua_pushnumber(L, report.fleet_rate);
    return 3;
}

/* cellrate._share_reply(reply) -> share, members, target: the script's reply
 * read; nil, the core's words and "E_SHARE_REPLY" for anything else. */
static int share_reply(lua_State *L)
{
    cr_share_reply read;
    cr_status status = CR_E_SHARE_REPLY;
    if (lua_type(L, 1) == LUA_TTABLE && compat_rawlen(L, 1) == 3) {
        lua_rawgeti(L, 1, 1);
        lua_rawgeti(L, 1, 2);
        lua_rawgeti(L, 1, 3);
        int64_t members = 0;
        if (lua_type(L, -3) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING &&
            to_int64(L, -2, &members)) {
            size_t share_len, target_len;
            const char *share = lua_tolstring(L, -3, &share_len);
            const char *target = lua_tolstring(L, -1, &target_len);
            status = cr_share_read_reply(share, share_len, members, target, target_len, &read);
        }
        lua_pop(L, 3);
    }
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    lua_pushnumber(L, read.share);
    compat_pushint64(L, read.members);
    lua_pushnumber(L, read.target);
    return 3;
}

/* cellrate._share_after(outcome, share, joined, held, answered) -> share,
 * apply, confirm: what the member does after a heartbeat's outcome (a name of
 * cr_share_outcome_name). */
static int share_after(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    int outcome = 0;
    while (outcome < CR_SHARE_OUTCOMES &&
           strcmp(cr_share_outcome_name((cr_share_outcome)outcome), name) != 0)
        outcome++;
    if (outcome == CR_SHARE_OUTCOMES)
        return luaL_error(L, "outcome must be a name of an outcome, not '%s'", name);
    const cr_share_step step = cr_share_after((cr_share_outcome)outcome, luaL_checknumber(L, 2),
                                              lua_toboolean(L, 3), luaL_checknumber(L, 4),
                                              luaL_checknumber(L, 5));
    lua_pushnumber(L, step.share);
    lua_pushboolean(L, step.apply);
    lua_pushboolean(L, step.confirm);
    return 3;
}

/* The constants of the share, on the module table at the top. */
static void share_set_constants(lua_State *L)
{
    lua_pushinteger(L, CR_SHARE_FLOOR_DIVISOR);
    lua_setfield(L, -2, "_SHARE_FLOOR_DIVISOR");
    lua_pushnumber(L, CR_SHARE_COLD_START);
    lua_setfield(L, -2, "_SHARE_COLD_START");
}
