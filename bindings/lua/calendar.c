/*
 * cellrate.calendar_period(tz, period [, now]) (a part of
 * bindings/cellrate_lua.c; docs/design.md §19): the start and end, in seconds
 * of the realtime clock, of the calendar period of the zone that holds now.
 */

static int calendar_period(lua_State *L)
{
    const int top = lua_gettop(L);
    if (lua_type(L, 1) != LUA_TSTRING)
        return raise_status(L, CR_E_TZ);
    if (lua_type(L, 2) != LUA_TSTRING)
        return raise_status(L, CR_E_CALENDAR_PERIOD);
    size_t tz_len, period_len;
    const char *tz = lua_tolstring(L, 1, &tz_len);
    const char *period_text = lua_tolstring(L, 2, &period_len);
    const cr_zone *zone;
    cr_period period;
    cr_status status = cr_zone_open(tz, tz_len, NULL, 0, &zone);
    if (status == CR_OK)
        status = cr_parse_period(period_text, period_len, &period);
    if (status != CR_OK)
        return raise_status(L, status);
    int64_t now_ns = read_now(L, 3, top), start_ns, end_ns;
    if (now_ns == CR_CLOCK)
        now_ns = cr_realtime_ns();
    status = cr_period_bounds(zone, period, now_ns, &start_ns, &end_ns);
    if (status != CR_OK)
        return raise_status(L, status);
    lua_pushnumber(L, (lua_Number)cr_ns_to_seconds(start_ns));
    lua_pushnumber(L, (lua_Number)cr_ns_to_seconds(end_ns));
    return 2;
}
