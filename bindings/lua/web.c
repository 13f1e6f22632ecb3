/*
 * The web rules (a part of bindings/cellrate_lua.c; cellrate/web.h,
 * docs/design.md §10), for cellrate.nginx: the client's address as a key, a
 * refusal's status and the prefix lengths, the fields a dry run leaves out,
 * and a count's settlement. Translation only: the rules are the core's.
 */

/* An optional prefix length at `idx` (absent or nil: `fallback`), judged by
 * `check`; a mistake raises the core's words. */
static int read_prefix(lua_State *L, int idx, int fallback, cr_status wrong,
                       cr_status (*check)(int64_t))
{
    if (lua_isnoneornil(L, idx))
        return fallback;
    int64_t prefix;
    if (!to_int64(L, idx, &prefix) || check(prefix) != CR_OK)
        raise_status(L, wrong);
    return (int)prefix;
}

static int push_key(lua_State *L, const cr_address *address)
{
    const int ipv4 = read_prefix(L, 2, CR_IPV4_PREFIX_DEFAULT, CR_E_IPV4_PREFIX,
                                 cr_ipv4_prefix_check);
    const int ipv6 = read_prefix(L, 3, CR_IPV6_PREFIX_DEFAULT, CR_E_IPV6_PREFIX,
                                 cr_ipv6_prefix_check);
    char key[CR_ADDRESS_KEY_MAX];
    const size_t len = cr_address_key(key, address, ipv4, ipv6);
    lua_pushlstring(L, key, len);
    return 1;
}

/* cellrate.address_key(address, ipv4_prefix, ipv6_prefix): the key of an
 * address given as text (prefixes default 32 and 64); "unknown" for what is
 * no address, a non-string included. */
static int address_key(lua_State *L)
{
    cr_address address;
    size_t len;
    const char *text = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    if (text == NULL || !cr_address_parse(&address, text, len))
        memset(&address, 0, sizeof address);
    return push_key(L, &address);
}

/* cellrate.binary_address_key(bytes, ipv4_prefix, ipv6_prefix): the same key
 * of an address as 4 or 16 bytes (nginx's $binary_remote_addr); "unknown"
 * for anything else ("unix:", nil). */
static int binary_address_key(lua_State *L)
{
    cr_address address;
    size_t len;
    const char *bytes = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    if (bytes == NULL || !cr_address_from_bytes(&address, bytes, len))
        memset(&address, 0, sizeof address);
    return push_key(L, &address);
}

/* An integer argument judged by `check`; a mistake raises the core's words. */
static int64_t check_integer_rule(lua_State *L, int idx, cr_status wrong,
                                  cr_status (*check)(int64_t))
{
    int64_t value;
    if (!to_int64(L, idx, &value))
        raise_status(L, wrong);
    const cr_status status = check(value);
    if (status != CR_OK)
        raise_status(L, status);
    return value;
}

/* cellrate.check_refusal_status(status): the status (400 to 599), or raises. */
static int check_refusal_status(lua_State *L)
{
    compat_pushint64(L, check_integer_rule(L, 1, CR_E_STATUS, cr_refusal_status_check));
    return 1;
}

/* cellrate.check_address_prefix(name, prefix): the prefix length of the
 * option `name` ("ipv4_prefix", "ipv6_prefix"), or raises. */
static int check_address_prefix(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strcmp(name, "ipv4_prefix") == 0)
        compat_pushint64(L, check_integer_rule(L, 2, CR_E_IPV4_PREFIX, cr_ipv4_prefix_check));
    else if (strcmp(name, "ipv6_prefix") == 0)
        compat_pushint64(L, check_integer_rule(L, 2, CR_E_IPV6_PREFIX, cr_ipv6_prefix_check));
    else
        return luaL_argerror(L, 1, "'ipv4_prefix' or 'ipv6_prefix' expected");
    return 1;
}

/* cellrate.dry_run_removed(): the names of the fields a dry run leaves out of
 * a refusal's answer, a list. */
static int dry_run_removed(lua_State *L)
{
    size_t count = 0;
    const char *const *names = cr_dry_run_removed(&count);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

/* cellrate.settle(charged, count, max_cost): total, units, clipped of settling
 * a request charged `charged` units by the `count` it was reported to cost
 * (decimal digits as a string, or a number: integral, beyond int64
 * saturating), at most max_cost (nil: no bound); nil and the core's message
 * for a figure that is no count (nothing settled). */
static int settle(lua_State *L)
{
    const int top = lua_gettop(L);
    const int64_t charged = read_units(L, 1, top, CR_E_COST);
    int64_t max_cost = -1;
    if (!lua_isnoneornil(L, 3))
        max_cost = read_units(L, 3, top, CR_E_MAX_COST);
    if (charged < 0)
        raise_status(L, CR_E_COST);
    int64_t count = -1;
    if (lua_type(L, 2) == LUA_TSTRING) {
        size_t len;
        const char *text = lua_tolstring(L, 2, &len);
        if (cr_count_parse(text, len, &count) != CR_OK)
            count = -1;
    } else if (!to_int64(L, 2, &count)) {
        count = -1;
    }
    cr_settlement settled;
    if (cr_settle(&settled, charged, count, max_cost) != CR_OK) {
        lua_pushnil(L);
        lua_pushstring(L, cr_strerror(CR_E_CHARGE_COUNT));
        return 2;
    }
    compat_pushint64(L, settled.total);
    compat_pushint64(L, settled.units);
    lua_pushboolean(L, settled.clipped);
    return 3;
}
