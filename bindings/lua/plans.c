/*
 * Plans, a limit per key (a part of bindings/cellrate_lua.c;
 * cellrate/plans.h): a keyed table's plans from its options and a
 * decision's plan by name. The core judges the table (count, names,
 * algorithms) and the names.
 */

/* plans = { name = rate or { rate, period = ..., burst = ... }, ... } (the
 * table at `idx`) into `table`, `limit` its default: a rate takes the
 * table's other options (`base`: algorithm, clock, max_cost, max_debt, tz),
 * not its period, burst or classes. Raises naming plans. */
static void read_plans(lua_State *L, int idx, const cr_limit *limit, const cr_limit_args *base,
                       cr_plan_table *table)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_status(L, CR_E_PLANS);
    cr_plan_arg plans[CR_PLANS_MAX];
    cr_limit limits[CR_PLANS_MAX];
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            raise_status(L, CR_E_PLANS);
        if (count >= CR_PLANS_MAX - 1)
            raise_status(L, CR_E_PLANS);
        cr_limit_args args = *base;
        args.rate = 0;
        args.rate_text = NULL;
        args.rate_text_len = 0;
        args.has_period = args.has_burst = args.has_priorities = false;
        args.priorities = NULL;
        args.npriorities = 0;
        const int value = lua_gettop(L);
        if (lua_type(L, value) == LUA_TTABLE) {
            lua_rawgeti(L, value, 1);
            read_rate(L, lua_gettop(L), &args);
            lua_getfield(L, value, "period");
            if (!lua_isnil(L, -1)) {
                if (lua_type(L, -1) != LUA_TNUMBER)
                    raise_status(L, CR_E_PERIOD);
                args.period_s = lua_tonumber(L, -1);
                args.has_period = true;
            }
            lua_getfield(L, value, "burst");
            if (!lua_isnil(L, -1)) {
                if (!to_int64(L, -1, &args.burst))
                    raise_status(L, CR_E_BURST);
                args.has_burst = true;
            }
        } else if (lua_type(L, value) == LUA_TSTRING || lua_type(L, value) == LUA_TNUMBER) {
            read_rate(L, value, &args);
        } else {
            raise_status(L, CR_E_PLANS);
        }
        const cr_status status = cr_limit_init(&limits[count], &args);
        if (status != CR_OK)
            raise_status(L, status);
        lua_settop(L, value - 1);
        plans[count].name = lua_tolstring(L, -1, &plans[count].name_len);
        plans[count].limit = &limits[count];
        count++;
    }
    /* the names stay alive in the plans table, on the stack */
    const cr_status status = cr_plans_set(table, limit, plans, count);
    if (status != CR_OK)
        raise_status(L, status);
}

/* plan: nil for "default", else the name of one of the keyed table's plans
 * (`keyed` NULL: "default" alone), as its index. */
static int32_t read_plan(lua_State *L, int idx, int top, cr_keyed *keyed)
{
    int32_t index = CR_PLAN_DEFAULT;
    if (idx > top || lua_isnil(L, idx))
        return index;
    if (lua_type(L, idx) != LUA_TSTRING)
        raise_status(L, CR_E_PLAN);
    size_t len;
    const char *name = lua_tolstring(L, idx, &len);
    const cr_status status = keyed ? cr_keyed_plan_find(keyed, name, len, &index)
                                   : cr_plan_find(NULL, name, len, &index);
    if (status != CR_OK)
        raise_status(L, status);
    return index;
}

/* cellrate._check_plan_items(count, keyed, named): nothing, or raises naming
 * plan (`named`: a request names a plan) or plans (a plan table is given)
 * when `count` limits decided as one, with keys or not, cannot take it. */
static int check_plan_items(lua_State *L)
{
    int64_t count;
    const bool keyed = lua_toboolean(L, 2), named = lua_toboolean(L, 3);
    if (!to_int64(L, 1, &count) || count < 0)
        return raise_status(L, named ? CR_E_PLAN_SEVERAL : CR_E_PLANS_KEYED);
    const cr_status status = cr_plan_items((size_t)count, keyed, named);
    if (status != CR_OK)
        return raise_status(L, status);
    return 0;
}
