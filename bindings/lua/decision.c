/*
 * Decisions (a part of bindings/cellrate_lua.c): a decision as the four values
 * every deciding method returns; cellrate.check_all, several limits decided
 * as one (docs/design.md §8); cellrate._check_request, the same checks for a
 * store that decides elsewhere (cellrate.redis).
 */

/* allowed, remaining, retry_after, reset_after (seconds; never fits: math.huge). */
static int push_decision(lua_State *L, const cr_decision *decision)
{
    lua_pushboolean(L, decision->allowed);
    compat_pushint64(L, decision->remaining);
    lua_pushnumber(L, cr_ns_to_seconds(decision->retry_after_ns));
    lua_pushnumber(L, cr_ns_to_seconds(decision->reset_after_ns));
    return 4;
}

/* The open store at `idx` if it is a box of the type `tag`, else NULL. */
static const store_box *open_box_at(lua_State *L, int idx, const char *tag)
{
    const store_box *box = box_at(L, idx, tag);
    if (box != NULL && box->limiter == NULL && box->keyed == NULL)
        luaL_error(L, "%s is closed", tag);
    return box;
}

/*
 * cellrate.check_all(items, cost, now) -> allowed, remaining, retry_after,
 * reset_after, index (of the item whose decision it is): `items` an array of
 * limiters and {keyed, key} or {keyed, key, plan} tables (plan as a
 * decision's: nil for "default"), decided as one (docs/design.md §8). The
 * keys stay alive in `items`, on the stack.
 */
static int module_check_all(lua_State *L)
{
    const int top = lua_gettop(L);
    if (lua_type(L, 1) != LUA_TTABLE)
        return raise_status(L, CR_E_ITEMS);
    const int64_t cost = read_cost(L, 2, top);
    const int64_t now_ns = read_now(L, 3, top);
    const size_t count = (size_t)compat_rawlen(L, 1);
    if (count == 0 || count > SIZE_MAX / sizeof(cr_item))
        return raise_status(L, CR_E_ITEMS);
    /* A few items on the C stack (an error's longjmp leaves nothing to free);
     * more in a userdata that is collected with the call. */
    cr_item few[8];
    cr_item *items = count <= 8 ? few : compat_newuserdata(L, count * sizeof *items);
    memset(items, 0, count * sizeof *items);
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, 1, (lua_Integer)(i + 1));
        const store_box *box = open_box_at(L, -1, limiter_tag);
        if (box != NULL) {
            items[i].limiter = box->limiter;
        } else if (lua_type(L, -1) == LUA_TTABLE &&
                   (compat_rawlen(L, -1) == 2 || compat_rawlen(L, -1) == 3)) {
            lua_rawgeti(L, -1, 1);
            box = open_box_at(L, -1, keyed_tag);
            lua_pop(L, 1);
            if (box == NULL)
                return raise_status(L, CR_E_ITEMS);
            lua_rawgeti(L, -1, 2);
            items[i].key = check_key(L, -1, &items[i].key_len);
            lua_pop(L, 1);
            items[i].keyed = box->keyed;
            lua_rawgeti(L, -1, 3);
            items[i].plan = read_plan(L, lua_gettop(L), lua_gettop(L), box->keyed);
            lua_pop(L, 1);
        } else {
            return raise_status(L, CR_E_ITEMS);
        }
        lua_pop(L, 1);
    }
    cr_decision decision;
    size_t index = 0;
    const cr_status status = cr_check_all(items, count, now_ns, cost, &decision, &index);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    push_decision(L, &decision);
    compat_pushint64(L, (int64_t)index + 1);
    return 5;
}

/* cellrate._check_request(key, cost, now): raises what a decision of `cost`
 * units of `key` at `now` would (the Redis store decides by the core's rules
 * elsewhere); `now` as the decimal ns the core decides at (rounded by the
 * core), or nil when `now` is nil. */
static int check_request(lua_State *L)
{
    const int top = lua_gettop(L);
    size_t key_len;
    (void)check_key(L, 1, &key_len);
    const int64_t cost = read_cost(L, 2, top);
    const int64_t now = read_now(L, 3, top);
    const cr_status status = cr_check_call(now, cost);
    if (status != CR_OK)
        return raise_status(L, status);
    if (now == CR_CLOCK)
        return 0;
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, now);
    lua_pushstring(L, text);
    return 1;
}
