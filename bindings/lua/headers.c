/*
 * HTTP header fields (a part of bindings/cellrate_lua.c; docs/design.md §10):
 * the fields of a decision from the core's formatter, for cellrate.headers,
 * cellrate.header_fields and the stores' check_headers.
 */

/* The limit of a Limiter or a KeyedLimiter (open or closed: only its limit is
 * read) or of a limit_spec (a store kept elsewhere: cellrate.redis) at `idx`. */
static const cr_limit *check_limit_of(lua_State *L, int idx)
{
    const store_box *box = box_at(L, idx, limiter_tag);
    if (box == NULL)
        box = box_at(L, idx, keyed_tag);
    if (box != NULL)
        return box_limit(box);
    const cr_limit *limit = limit_box_at(L, idx);
    if (limit != NULL)
        return limit;
    luaL_argerror(L, idx,
                  lua_pushfstring(L, "%s, %s or %s expected, got %s", limiter_tag, keyed_tag,
                                  limit_tag, luaL_typename(L, idx)));
    return NULL;
}

/* A decision's time in seconds (math.huge: never) as ns. */
static int64_t read_duration(lua_State *L, int idx)
{
    int64_t ns = 0;
    if (lua_type(L, idx) != LUA_TNUMBER ||
        cr_duration_from_seconds(lua_tonumber(L, idx), &ns) != CR_OK)
        raise_status(L, CR_E_HEADER_VALUE);
    return ns;
}

/* The policy name at `idx`: nil (none) is NULL, the core's default. */
static const char *read_header_name(lua_State *L, int idx, int top, size_t *name_len)
{
    *name_len = 0;
    if (idx > top || lua_isnil(L, idx))
        return NULL;
    if (lua_type(L, idx) != LUA_TSTRING)
        raise_status(L, CR_E_HEADER_NAME);
    return lua_tolstring(L, idx, name_len);
}

/* The fields of `decision` under the limit of `box`, from cr_headers_format;
 * argument mistakes raise. */
static void format_fields(lua_State *L, cr_headers *fields, const cr_limit *limit,
                          const cr_decision *decision, int name_idx, int top)
{
    size_t name_len;
    const char *name = read_header_name(L, name_idx, top, &name_len);
    const bool legacy = name_idx + 1 <= top && lua_toboolean(L, name_idx + 1);
    const cr_status status = cr_headers_format(fields, decision, cr_limit_window_ns(limit), name,
                                               name_len, legacy);
    if (status != CR_OK)
        raise_status(L, status);
}

/* The fields as name, value, name, value, ... in the formatter's order. */
static int push_fields(lua_State *L, const cr_headers *fields)
{
    luaL_checkstack(L, 2 * fields->count, NULL);
    for (int i = 0; i < fields->count; i++) {
        lua_pushstring(L, fields->field[i].name);
        lua_pushlstring(L, fields->field[i].value, fields->field[i].value_len);
    }
    return 2 * fields->count;
}

/* The fields for the arguments of cellrate.headers and cellrate.header_fields:
 * (lim, allowed, remaining, retry_after, reset_after [, name [, legacy [,
 * plan]]]); a KeyedLimiter's decision under `plan` (nil: "default") is
 * described with that plan's limit. */
static void format_given_decision(lua_State *L, cr_headers *fields)
{
    const int top = lua_gettop(L);
    const cr_limit *limit = check_limit_of(L, 1);
    if (top >= 8 && !lua_isnil(L, 8)) {
        const store_box *box = box_at(L, 1, keyed_tag);
        const int32_t plan = read_plan(L, 8, top, box != NULL ? box->keyed : NULL);
        if (box != NULL && box->keyed != NULL && plan != CR_PLAN_DEFAULT)
            limit = cr_keyed_plan_limit(box->keyed, plan);
    }
    cr_decision decision;
    decision.allowed = lua_toboolean(L, 2);
    decision.limit = limit->burst;
    if (!to_int64(L, 3, &decision.remaining))
        raise_status(L, CR_E_HEADER_VALUE);
    decision.retry_after_ns = read_duration(L, 4);
    decision.reset_after_ns = read_duration(L, 5);
    format_fields(L, fields, limit, &decision, 6, top);
}

static int format_fields_and_push(lua_State *L, const cr_limit *limit, const cr_decision *decision,
                                  int name_idx, int top)
{
    cr_headers fields;
    format_fields(L, &fields, limit, decision, name_idx, top);
    return push_fields(L, &fields);
}

/* cellrate.headers(...): the fields as a table, name -> value. */
static int headers(lua_State *L)
{
    cr_headers fields;
    format_given_decision(L, &fields);
    lua_createtable(L, 0, fields.count);
    for (int i = 0; i < fields.count; i++) {
        lua_pushlstring(L, fields.field[i].value, fields.field[i].value_len);
        lua_setfield(L, -2, fields.field[i].name);
    }
    return 1;
}

/* cellrate.header_fields(...): the fields as name, value, name, value, ...,
 * no table: for a caller that sets each field once (cellrate.nginx). */
static int header_fields(lua_State *L)
{
    cr_headers fields;
    format_given_decision(L, &fields);
    return push_fields(L, &fields);
}

/* cellrate.check_policy_name(name): raises the core's error unless
 * cr_headers_format takes `name` as a policy name (nil: the core's default);
 * nothing when it does. */
static int check_policy_name(lua_State *L)
{
    size_t name_len;
    const char *name = read_header_name(L, 1, lua_gettop(L), &name_len);
    if (cr_headers_check_name(name, name_len) != CR_OK)
        return raise_status(L, CR_E_HEADER_NAME);
    return 0;
}
