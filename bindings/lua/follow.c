/*
 * Following a provider (a part of bindings/cellrate_lua.c; docs/design.md
 * §18): lim:follow, keyed:follow and cellrate.read_signal. The core reads the
 * response's fields (cr_signal_read) and pulls the store into line.
 */

/* The fields of a response at `idx`: a table of name = value (a value may be
 * a list of strings: a repeated field, as ngx.resp.get_headers() gives it)
 * and of {name, value} pairs in its array part (kept in order). The strings
 * stay alive while the table is on the stack; the list is a userdata pushed
 * on the stack (collected with it). */
static cr_field *read_fields(lua_State *L, int idx, size_t *count)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_status(L, CR_E_HEADERS);
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        cr_field *fields = NULL;
        if (pass == 1)
            fields = compat_newuserdata(L, (n > 0 ? n : 1) * sizeof *fields);
        size_t i = 0;
        /* the array part first, in order; then the names */
        const size_t length = compat_rawlen(L, idx);
        for (size_t k = 1; k <= length; k++) {
            lua_rawgeti(L, idx, (int)k);
            if (lua_type(L, -1) != LUA_TTABLE)
                raise_status(L, CR_E_HEADERS);
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_HEADERS);
            if (fields != NULL) {
                fields[i].name = lua_tolstring(L, -2, &fields[i].name_len);
                fields[i].value = lua_tolstring(L, -1, &fields[i].value_len);
            }
            i++;
            lua_pop(L, 3);
        }
        lua_pushnil(L);
        while (lua_next(L, idx) != 0) {
            if (lua_type(L, -2) == LUA_TNUMBER) { /* the array part, read above */
                lua_pop(L, 1);
                continue;
            }
            if (lua_type(L, -2) != LUA_TSTRING)
                raise_status(L, CR_E_HEADERS);
            const int values = lua_type(L, -1) == LUA_TTABLE ? (int)compat_rawlen(L, -1) : 1;
            if (lua_type(L, -1) != LUA_TTABLE && lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_HEADERS);
            for (int v = 1; v <= values; v++) {
                if (lua_type(L, -1) == LUA_TTABLE)
                    lua_rawgeti(L, -1, v);
                else
                    lua_pushvalue(L, -1);
                if (lua_type(L, -1) != LUA_TSTRING)
                    raise_status(L, CR_E_HEADERS);
                if (fields != NULL) {
                    /* both strings are anchored in the table, which stays on the stack */
                    fields[i].name = lua_tolstring(L, -3, &fields[i].name_len);
                    fields[i].value = lua_tolstring(L, -1, &fields[i].value_len);
                }
                i++;
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        if (pass == 1) {
            *count = n;
            return fields;
        }
        n = i;
    }
    return NULL;
}

/* What follow() and read_signal() take besides the fields: status (nil:
 * unknown) at `status_idx`, and an options table at `opts_idx` with quota,
 * now, and for follow pending and share (and a KeyedLimiter's plan, a name
 * of `keyed`'s plans). */
typedef struct {
    int64_t status;
    cr_quota quota;
    int64_t pending;
    double share;
    int64_t now_ns;
    int32_t plan;
} follow_args;

static void read_follow_args(lua_State *L, int status_idx, int opts_idx, bool store,
                             cr_keyed *keyed, follow_args *args)
{
    args->status = 0;
    args->plan = CR_PLAN_DEFAULT;
    args->quota = CR_QUOTA_REQUESTS;
    args->pending = 0;
    args->share = 1.0;
    args->now_ns = CR_CLOCK;
    if (!lua_isnoneornil(L, status_idx) && !to_int64(L, status_idx, &args->status))
        raise_status(L, CR_E_STATUS_CODE);
    if (lua_isnoneornil(L, opts_idx))
        return;
    if (lua_type(L, opts_idx) != LUA_TTABLE)
        luaL_error(L, store
                          ? "opts must be a table with the fields quota, pending, share, now, plan"
                          : "opts must be a table with the fields quota, now");
    lua_pushnil(L);
    while (lua_next(L, opts_idx) != 0) {
        const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(name, "quota") == 0) {
            size_t len;
            const char *quota = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
            if (quota == NULL || cr_parse_quota(quota, len, &args->quota) != CR_OK)
                raise_status(L, CR_E_QUOTA);
        } else if (strcmp(name, "now") == 0) {
            lua_pushvalue(L, -1);
            args->now_ns = read_now(L, lua_gettop(L), lua_gettop(L));
            lua_pop(L, 1);
        } else if (store && strcmp(name, "pending") == 0) {
            if (!to_int64(L, -1, &args->pending))
                raise_status(L, CR_E_PENDING);
        } else if (store && strcmp(name, "share") == 0) {
            if (lua_type(L, -1) != LUA_TNUMBER)
                raise_status(L, CR_E_SHARE);
            args->share = lua_tonumber(L, -1);
        } else if (store && strcmp(name, "plan") == 0) {
            lua_pushvalue(L, -1);
            args->plan = read_plan(L, lua_gettop(L), lua_gettop(L), keyed);
            lua_pop(L, 1);
        } else if (lua_type(L, -2) == LUA_TSTRING) {
            luaL_error(L, "unknown option '%s'", name);
        } else {
            luaL_error(L, "unknown option (a %s key)", luaL_typename(L, -2));
        }
        lua_pop(L, 1);
    }
}

/* lim:follow(headers, status, opts), keyed:follow(key, headers, status,
 * opts): whether the response pulled the limit into line; opts.quota
 * ('requests' or 'tokens'), opts.pending, opts.share, opts.now, and a
 * KeyedLimiter's opts.plan. */
static int store_follow(lua_State *L, const char *tag)
{
    const call_head head = read_call_head(L, tag);
    follow_args args;
    read_follow_args(L, head.next + 1, head.next + 2, true, head.keyed ? head.box->keyed : NULL,
                     &args);
    size_t count;
    const cr_field *fields = read_fields(L, head.next, &count);
    cr_signal signal;
    cr_status status = cr_signal_read(&signal, fields, count, args.status, args.quota, CR_CLOCK);
    bool pulled = false;
    if (status == CR_OK)
        status = head.keyed ? cr_keyed_follow(head.box->keyed, head.key, head.key_len, args.now_ns,
                                              args.plan, &signal, args.pending, args.share, &pulled)
                            : cr_limiter_follow(head.box->limiter, args.now_ns, &signal,
                                                args.pending, args.share, &pulled);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_pushboolean(L, pulled);
    return 1;
}

static int limiter_follow(lua_State *L) { return store_follow(L, limiter_tag); }
static int keyed_follow(lua_State *L) { return store_follow(L, keyed_tag); }

/* cellrate.read_signal(headers, status, opts): the bounds the response says,
 * a list of {remaining, within} (seconds); opts.quota, opts.now (the Unix
 * time in seconds for absolute times; nil: the clock). */
static int read_signal(lua_State *L)
{
    follow_args args;
    read_follow_args(L, 2, 3, false, NULL, &args);
    size_t count;
    const cr_field *fields = read_fields(L, 1, &count);
    cr_signal signal;
    const cr_status status = cr_signal_read(&signal, fields, count, args.status, args.quota,
                                            args.now_ns);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_createtable(L, signal.count, 0);
    for (int i = 0; i < signal.count; i++) {
        lua_createtable(L, 2, 0);
        compat_pushint64(L, signal.bound[i].remaining);
        lua_rawseti(L, -2, 1);
        lua_pushnumber(L, cr_ns_to_seconds(signal.bound[i].within_ns));
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}
