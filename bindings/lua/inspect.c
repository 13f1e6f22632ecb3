/* Shared regions, read (a part of bindings/cellrate_lua.c; docs/design.md §5). */

/* The keys banned now in the region at `path` (cr_inspect_box) as a list of
 * tables (key: its first bytes, key_length, ban_left in seconds, level),
 * pushed on top of the room it read into (an empty list when the look
 * fails: its status returned). */
static cr_status push_banned(lua_State *L, const char *path)
{
    size_t count = 0, room = 0;
    cr_penalty_entry *entries = NULL;
    cr_status status;
    for (;;) { /* a ban may start between the count and the reading: read again */
        status = cr_inspect_box(path, entries, room, &count);
        if (status != CR_OK || count <= room)
            break;
        room = count + 8;
        entries = compat_newuserdata(
            L, room * sizeof *entries); /* on the stack: the caller's settop */
    }
    lua_createtable(L, (int)(status == CR_OK ? count : 0), 0);
    for (size_t i = 0; status == CR_OK && i < count; i++) {
        lua_createtable(L, 0, 4);
        lua_pushlstring(L, (const char *)entries[i].key, entries[i].key_kept);
        lua_setfield(L, -2, "key");
        compat_pushint64(L, (int64_t)entries[i].key_len);
        lua_setfield(L, -2, "key_length");
        lua_pushnumber(L, cr_ns_to_seconds(entries[i].ban_left_ns));
        lua_setfield(L, -2, "ban_left");
        compat_pushint64(L, entries[i].level);
        lua_setfield(L, -2, "level");
        lua_rawseti(L, -2, (int)i + 1);
    }
    return status;
}

/* A plan's limit as inspect shows it: {rate =, period =, burst =}. */
static void push_plan_limit(lua_State *L, const cr_limit *limit)
{
    lua_createtable(L, 0, 3);
    lua_pushnumber(L, limit->rate);
    lua_setfield(L, -2, "rate");
    lua_pushnumber(L, limit->period_s);
    lua_setfield(L, -2, "period");
    compat_pushint64(L, limit->burst);
    lua_setfield(L, -2, "burst");
}

/* cellrate.inspect_key(path, key): `key` of the keyed region at `path`, read
 * without changing it (cr_inspect_key): {key =, plan =, limit =, used =,
 * remaining =, reset_after =} (plan nil and used 0: the key holds no slot),
 * or nil, message, code. */
static int inspect_key(lua_State *L)
{
    size_t path_len, key_len;
    const char *path = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &path_len) : NULL;
    if (path == NULL || strlen(path) != path_len)
        return raise_status(L, CR_E_SHARED_PATH);
    if (lua_type(L, 2) != LUA_TSTRING)
        return raise_status(L, CR_E_KEY);
    const char *key = lua_tolstring(L, 2, &key_len);
    cr_key_info info;
    const cr_status status = cr_inspect_key(path, key, key_len, &info);
    if (status == CR_E_INSPECT_KEY)
        return raise_status(L, status);
    if (status != CR_OK)
        return report_status(L, status, path);
    lua_createtable(L, 0, 6);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "key");
    compat_pushint64(L, info.used);
    lua_setfield(L, -2, "used");
    if (!info.found)
        return 1;
    lua_pushstring(L, info.plan_name);
    lua_setfield(L, -2, "plan");
    push_plan_limit(L, &info.limit);
    lua_setfield(L, -2, "limit");
    compat_pushint64(L, info.remaining);
    lua_setfield(L, -2, "remaining");
    lua_pushnumber(L, cr_ns_to_seconds(info.reset_after_ns));
    lua_setfield(L, -2, "reset_after");
    return 1;
}

/* cellrate.inspect_region(path): a table of what the region file holds, read
 * without changing it (cr_inspect_region), or nil, message, code. */
static int inspect_region(lua_State *L)
{
    size_t path_len;
    const char *path = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &path_len) : NULL;
    if (path == NULL || strlen(path) != path_len)
        return raise_status(L, CR_E_SHARED_PATH);
    cr_region_info info;
    const cr_status status = cr_inspect_region(path, &info);
    if (status != CR_OK)
        return report_status(L, status, path);
    const bool rate = info.algorithm != NULL;
    lua_createtable(L, 0, 16);
    compat_pushint64(L, info.layout_version);
    lua_setfield(L, -2, "layout_version");
    lua_pushstring(L, info.kind);
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, info.description);
    lua_setfield(L, -2, "limit");
    if (rate) {
        lua_pushstring(L, info.algorithm);
        lua_setfield(L, -2, "algorithm");
        lua_pushnumber(L, info.limit.rate);
        lua_setfield(L, -2, "rate");
        lua_pushnumber(L, info.limit.period_s);
        lua_setfield(L, -2, "period");
        compat_pushint64(L, info.limit.burst);
        lua_setfield(L, -2, "burst");
    } else {
        compat_pushint64(L, info.max_in_flight);
        lua_setfield(L, -2, "max_in_flight");
        lua_pushboolean(L, info.gauge_stats.peak_tracked);
        lua_setfield(L, -2, "peak");
    }
    if (info.lease_ns > 0) {
        lua_pushnumber(L, cr_ns_to_seconds(info.lease_ns));
        lua_setfield(L, -2, "lease");
    }
    if (info.capacity > 0) {
        compat_pushint64(L, info.capacity);
        lua_setfield(L, -2, "capacity");
    }
    compat_pushint64(L, (int64_t)info.live_keys);
    lua_setfield(L, -2, "live_keys");
    compat_pushint64(L, (int64_t)info.generation);
    lua_setfield(L, -2, "generation");
    compat_pushint64(L, (int64_t)info.size);
    lua_setfield(L, -2, "size");
    lua_pushboolean(L, info.this_boot);
    lua_setfield(L, -2, "this_boot");
    if (rate && info.has_penalty) {
        lua_createtable(L, 0, 4);
        compat_pushint64(L, info.penalty.after);
        lua_setfield(L, -2, "after");
        lua_pushnumber(L, cr_ns_to_seconds(info.penalty.within_ns));
        lua_setfield(L, -2, "within");
        lua_pushnumber(L, cr_ns_to_seconds(info.penalty.ban_ns));
        lua_setfield(L, -2, "ban");
        lua_pushnumber(L, cr_ns_to_seconds(info.penalty.max_ban_ns));
        lua_setfield(L, -2, "max_ban");
        lua_setfield(L, -2, "penalty");
    }
    if (rate) {
        const int table = lua_gettop(L);
        if (push_banned(L, path) == CR_OK) /* (the region went away meanwhile: no list) */
            lua_setfield(L, table, "banned");
        lua_settop(L, table);
    }
    if (info.plan_count > 1) { /* {name = {rate =, period =, burst =}} */
        lua_createtable(L, 0, info.plan_count);
        for (int32_t p = 0; p < info.plan_count; p++) {
            push_plan_limit(L, &info.plans[p].limit);
            lua_setfield(L, -2, info.plans[p].name);
        }
        lua_setfield(L, -2, "plans");
    }
    if (rate)
        push_stats(L, &info.stats);
    else
        push_gauge_stats(L, &info.gauge_stats);
    lua_setfield(L, -2, "stats");
    return 1;
}
