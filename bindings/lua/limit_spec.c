/*
 * Limits (a part of bindings/cellrate_lua.c): a limit's text, as Python's
 * repr(), and cellrate.limit_spec, a limit validated by the core with no store
 * (docs/design.md §3), the userdata `cellrate.Limit`.
 */

/* cr_limit_describe's text: the same as Python's repr(). `capacity` < 0:
 * none. */
static void push_limit_text(lua_State *L, const char *type_name, const cr_limit *limit,
                            int64_t capacity)
{
    char text[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit_describe(text, sizeof text, type_name, limit, capacity);
    lua_pushstring(L, text);
}

/* A validated limit (cellrate.limit_spec), the core's cr_limit: immutable. */
typedef struct limit_box {
    const char *tag; /* limit_tag */
    cr_limit limit;
} limit_box;

/* The limit of the limit_spec at `idx`, or NULL. */
static const cr_limit *limit_box_at(lua_State *L, int idx)
{
    const limit_box *box = lua_touserdata(L, idx);
    if (box != NULL && compat_rawlen(L, idx) == sizeof(limit_box) && box->tag == limit_tag)
        return &box->limit;
    return NULL;
}

static const cr_limit *check_limit_box(lua_State *L, int idx)
{
    const cr_limit *limit = limit_box_at(L, idx);
    if (limit != NULL)
        return limit;
    luaL_argerror(L, idx,
                  lua_pushfstring(L, "%s expected, got %s", limit_tag, luaL_typename(L, idx)));
    return NULL;
}

/*
 * cellrate.limit_spec(rate [, opts]): the limit a limiter of these arguments
 * would have (opts: period, burst, algorithm, max_debt), validated by the
 * core and refused in its words, with no store made: fields rate, period,
 * burst, algorithm, window (seconds), emission_ns, tolerance_ns, max_debt;
 * __tostring as Python's repr(cellrate.Limit(...)); == by those parameters.
 */
static int limit_spec_new(lua_State *L)
{
    options opts;
    memset(&opts, 0, sizeof opts);
    read_rate(L, 1, &opts.args);
    read_options(L, 2, "Limit", &opts);
    cr_limit limit;
    const cr_status status = cr_limit_init(&limit, &opts.args);
    if (status != CR_OK)
        return raise_status(L, status);
    limit_box *box = compat_newuserdata(L, sizeof *box);
    box->tag = limit_tag;
    box->limit = limit;
    luaL_getmetatable(L, limit_tag);
    lua_setmetatable(L, -2);
    return 1;
}

static int limit_index(lua_State *L)
{
    const cr_limit *limit = check_limit_box(L, 1);
    const char *field = lua_tostring(L, 2);
    if (field == NULL)
        lua_pushnil(L);
    else if (strcmp(field, "rate") == 0)
        lua_pushnumber(L, limit->rate);
    else if (strcmp(field, "period") == 0)
        lua_pushnumber(L, limit->period_s);
    else if (strcmp(field, "burst") == 0)
        compat_pushint64(L, limit->burst);
    else if (strcmp(field, "algorithm") == 0)
        lua_pushstring(L, cr_algorithm_name(limit->algorithm));
    else if (strcmp(field, "window") == 0)
        lua_pushnumber(L, cr_ns_to_seconds(cr_limit_window_ns(limit)));
    else if (strcmp(field, "emission_ns") == 0)
        compat_pushint64(L, limit->emission_ns);
    else if (strcmp(field, "tolerance_ns") == 0)
        compat_pushint64(L, limit->tolerance_ns);
    else if (strcmp(field, "max_debt") == 0)
        compat_pushint64(L, limit->max_debt);
    else
        lua_pushnil(L);
    return 1;
}

static int limit_tostring(lua_State *L)
{
    push_limit_text(L, limit_tag, check_limit_box(L, 1), -1);
    return 1;
}

static int limit_eq(lua_State *L)
{
    const cr_limit *a = check_limit_box(L, 1);
    const cr_limit *b = check_limit_box(L, 2);
    lua_pushboolean(L, a->algorithm == b->algorithm && a->rate == b->rate &&
                           a->period_s == b->period_s && a->burst == b->burst &&
                           a->emission_ns == b->emission_ns && a->tolerance_ns == b->tolerance_ns &&
                           a->max_debt == b->max_debt);
    return 1;
}

static const luaL_Reg limit_metamethods[] = {
    {"__index", limit_index},
    {"__tostring", limit_tostring},
    {"__eq", limit_eq},
    {NULL, NULL},
};
