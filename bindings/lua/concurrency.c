/*
 * Concurrency and Slot (a part of bindings/cellrate_lua.c; docs/design.md
 * §15): units in flight, a slot the receipt of a holding; and
 * cellrate._check_hold, the same checks for a limit held elsewhere
 * (cellrate.redis).
 */

typedef struct {
    cr_gauge *gauge; /* NULL once closed */
    int64_t limit;
    bool shared; /* in a shared region (info().shared) */
} concurrency_box;

/* A holding: the receipt c:release(slot) hands back to the limit that gave
 * it (`owner`; a slot of another limit releases nothing). */
typedef struct {
    const concurrency_box *owner;
    cr_holding holding;
} slot_box;

static concurrency_box *check_concurrency(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    if (box->gauge == NULL)
        luaL_error(L, "%s is closed", CONCURRENCY_METATABLE);
    return box;
}

/* cellrate.concurrency(limit [, opts]): opts capacity, shared, shared_mode,
 * lease, peak. The object, or nil, a message and a code for a region it cannot use. */
static int concurrency_new(lua_State *L)
{
    int64_t limit;
    if (!to_int64(L, 1, &limit))
        return raise_status(L, CR_E_LIMIT);
    options opts = {.shared_mode = CR_SHARED_DEFAULT_MODE};
    read_options(L, 2, "Concurrency", &opts);
    concurrency_box *box = compat_newuserdata(L, sizeof *box);
    memset(box, 0, sizeof *box);
    luaL_getmetatable(L, CONCURRENCY_METATABLE);
    lua_setmetatable(L, -2);
    cr_status status = cr_gauge_open(&box->gauge, limit, opts.capacity_given, opts.capacity,
                                     opts.lease_ns, opts.peak, opts.shared, opts.shared_mode);
    if (status != CR_OK)
        return report_status(L, status, opts.shared);
    box->limit = limit;
    box->shared = opts.shared != NULL;
    return 1;
}

/* c:acquire([key [, cost]]): a slot, or nil and "rejected" when the units
 * are not free (nil, message, code for a region's lock held too long). */
static int concurrency_acquire(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    size_t key_len;
    const char *key = optional_key(L, 2, &key_len);
    int64_t cost = CR_DEFAULT_COST;
    if (!lua_isnoneornil(L, 3) && !to_int64(L, 3, &cost))
        return raise_status(L, CR_E_HOLD_COST);
    slot_box *slot = compat_newuserdata(L, sizeof *slot);
    memset(slot, 0, sizeof *slot);
    bool acquired;
    cr_status status = cr_gauge_acquire(box->gauge, key, key_len, cost, &acquired, &slot->holding);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (!acquired) {
        lua_pushnil(L);
        lua_pushliteral(L, "rejected");
        return 2;
    }
    slot->owner = box;
    luaL_getmetatable(L, SLOT_METATABLE);
    lua_setmetatable(L, -2);
    return 1;
}

/* c:release(slot): true when its units came back; false when they had
 * already (released before, reclaimed, or a slot of another limit). */
static int concurrency_release(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    slot_box *slot = luaL_testudata(L, 2, SLOT_METATABLE);
    if (slot == NULL)
        return raise_status(L, CR_E_SLOT);
    lua_pushboolean(L, slot->owner == box && cr_gauge_release(box->gauge, &slot->holding) > 0);
    return 1;
}

/* c:in_flight([key]): units held now. */
static int concurrency_in_flight(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    size_t key_len;
    const char *key = optional_key(L, 2, &key_len);
    int64_t in_flight;
    cr_status status = cr_gauge_in_flight(box->gauge, key, key_len, &in_flight);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    compat_pushint64(L, in_flight);
    return 1;
}

/* c:info(): { limit =, capacity = (nil: no keys), lease = (nil: none), shared = (true in a
 * shared region), peak = (true when tracked) }. */
static int concurrency_info(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    lua_createtable(L, 0, 4);
    compat_pushint64(L, box->limit);
    lua_setfield(L, -2, "limit");
    if (cr_gauge_capacity(box->gauge) > 0) {
        compat_pushint64(L, cr_gauge_capacity(box->gauge));
        lua_setfield(L, -2, "capacity");
    }
    if (cr_gauge_lease_ns(box->gauge) > 0) {
        lua_pushnumber(L, cr_ns_to_seconds(cr_gauge_lease_ns(box->gauge)));
        lua_setfield(L, -2, "lease");
    }
    if (box->shared) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "shared");
    }
    if (cr_gauge_tracks_peak(box->gauge)) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "peak");
    }
    return 1;
}

/* c:stats(): the counters. */
static int concurrency_stats(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    cr_gauge_stats stats;
    cr_gauge_stats_read(box->gauge, &stats);
    push_gauge_stats(L, &stats);
    return 1;
}

/* c:reset_stats(): true, or nil, message, code. */
static int concurrency_reset_stats(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    cr_status status = cr_gauge_reset_stats(box->gauge);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

static int concurrency_close(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    cr_gauge_free(box->gauge);
    box->gauge = NULL;
    return 0;
}

static int concurrency_tostring(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    if (box->gauge == NULL) {
        lua_pushfstring(L, "%s(closed)", CONCURRENCY_METATABLE);
        return 1;
    }
    char text[128];
    cr_gauge_describe(text, sizeof text, box->limit, cr_gauge_capacity(box->gauge),
                      cr_gauge_lease_ns(box->gauge), cr_gauge_tracks_peak(box->gauge));
    lua_pushstring(L, text);
    return 1;
}

static int slot_tostring(lua_State *L)
{
    slot_box *slot = luaL_checkudata(L, 1, SLOT_METATABLE);
    lua_pushfstring(L, "%s(cost=%d)", SLOT_METATABLE, (int)slot->holding.cost);
    return 1;
}

static const luaL_Reg concurrency_methods[] = {
    {"acquire", concurrency_acquire},     {"release", concurrency_release},
    {"in_flight", concurrency_in_flight}, {"info", concurrency_info},
    {"stats", concurrency_stats},         {"reset_stats", concurrency_reset_stats},
    {"close", concurrency_close},         {NULL, NULL},
};

static const luaL_Reg concurrency_metamethods[] = {
    {"__gc", concurrency_close},
    {"__close", concurrency_close},
    {"__tostring", concurrency_tostring},
    {NULL, NULL},
};

static const luaL_Reg slot_metamethods[] = {
    {"__tostring", slot_tostring},
    {NULL, NULL},
};

/* cellrate._check_hold(limit, key, cost, lease): raises what a concurrency
 * limit would of its limit and lease and of a holding's key (nil: none) and
 * cost (nil: 1), in the core's words (the Redis store holds units
 * elsewhere); the lease as decimal ns, or nil when `lease` is nil. */
static int check_hold(lua_State *L)
{
    int64_t limit, cost = CR_DEFAULT_COST, lease_ns;
    if (!to_int64(L, 1, &limit))
        return raise_status(L, CR_E_LIMIT);
    size_t key_len;
    (void)optional_key(L, 2, &key_len);
    if (!lua_isnoneornil(L, 3) && !to_int64(L, 3, &cost))
        return raise_status(L, CR_E_HOLD_COST);
    const cr_status status = cr_gauge_check(limit, cost);
    if (status != CR_OK)
        return raise_status(L, status);
    if (lua_isnoneornil(L, 4))
        return 0;
    if (lua_type(L, 4) != LUA_TNUMBER ||
        cr_lease_from_seconds(lua_tonumber(L, 4), &lease_ns) != CR_OK)
        return raise_status(L, CR_E_LEASE);
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, lease_ns);
    lua_pushstring(L, text);
    return 1;
}
