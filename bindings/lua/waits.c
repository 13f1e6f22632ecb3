/*
 * The wait plan (core/plan.c, cr_wait_step; docs/design/waiting.md) for Lua
 * code that sleeps by itself: lim:_wait_plan(cost, timeout, now) and
 * keyed:_wait_plan(key, cost, timeout, now, plan) begin a wait; plan:step(now)
 * says "go", "sleep" and the seconds, or "refused" / "timeout" and the
 * retry_after (math.huge: never). cellrate.nginx sleeps each sleep on
 * ngx.sleep. Lua's own lim:wait is cr_wait, the same steps slept in C.
 * Part of cellrate_lua.c's unity build.
 */

#define WAIT_PLAN_METATABLE "cellrate.wait_plan"

typedef struct {
    const char *tag; /* the store's type */
    int store_ref;   /* the store and its key, kept alive (registry references) */
    int key_ref;
    const char *key;
    size_t key_len;
    int32_t key_plan; /* the plan the key waits under */
    cr_wait_plan plan;
} wait_plan_box;

/* lim:_wait_plan(cost, timeout, now), keyed:_wait_plan(key, cost, timeout,
 * now, plan) */
static int store_wait_plan(lua_State *L, const char *tag)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t timeout_ns = read_wait_limit(L, head.next + 1, top, CR_E_TIMEOUT);
    const int64_t now_ns = read_now(L, head.next + 2, top);
    const int32_t key_plan = read_call_plan(L, &head, head.next + 3, top);
    wait_plan_box *box = compat_newuserdata(L, sizeof *box);
    memset(box, 0, sizeof *box);
    box->store_ref = box->key_ref = LUA_NOREF;
    box->plan.turn_ns = CR_NO_TURN;
    const int64_t begun_ns = now_ns != CR_CLOCK       ? now_ns
                             : timeout_ns == CR_NEVER ? 0 /* no deadline: no read */
                                                      : cr_clock_ns();
    const cr_status status = cr_wait_begin(&box->plan, cost, timeout_ns, begun_ns);
    if (status != CR_OK)
        return raise_status(L, status);
    box->tag = tag;
    lua_pushvalue(L, 1);
    box->store_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (head.keyed) {
        lua_pushvalue(L, 2);
        box->key_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        box->key = head.key;
        box->key_len = head.key_len;
        box->key_plan = key_plan;
    }
    luaL_getmetatable(L, WAIT_PLAN_METATABLE);
    lua_setmetatable(L, -2);
    return 1;
}

/* The plan's item, its store still open; NULL (a closed store) otherwise. */
static bool wait_plan_item(lua_State *L, const wait_plan_box *box, cr_item *item)
{
    memset(item, 0, sizeof *item);
    if (box->store_ref == LUA_NOREF)
        return false;
    lua_rawgeti(L, LUA_REGISTRYINDEX, box->store_ref);
    const store_box *store = box_at(L, -1, box->tag);
    lua_pop(L, 1); /* the registry holds it */
    if (store == NULL || (store->limiter == NULL && store->keyed == NULL))
        return false;
    item->limiter = store->limiter;
    item->keyed = store->keyed;
    item->key = box->key;
    item->key_len = box->key_len;
    item->plan = box->key_plan;
    return true;
}

/* `now` at idx (seconds; nil: the clocks now): the deadline's (read only
 * for a plan that has one), the store's. */
static void wait_plan_now(lua_State *L, int idx, const cr_wait_plan *plan, int64_t *now_ns,
                          int64_t *store_ns)
{
    *store_ns = read_now(L, idx, lua_gettop(L));
    *now_ns = *store_ns != CR_CLOCK ? *store_ns : plan->deadline_ns == CR_NEVER ? 0 : cr_clock_ns();
}

static const char *const wait_plan_actions[] = {"go", "sleep", "refused", "timeout"};

/* plan:step(now): "go"; "sleep", seconds; "refused" or "timeout", retry_after. */
static int wait_plan_step(lua_State *L)
{
    wait_plan_box *box = luaL_checkudata(L, 1, WAIT_PLAN_METATABLE);
    int64_t now_ns, store_ns, sleep_ns = 0;
    wait_plan_now(L, 2, &box->plan, &now_ns, &store_ns);
    cr_item item;
    if (!wait_plan_item(L, box, &item))
        return luaL_error(L, "%s is closed", box->tag ? box->tag : "the store");
    cr_wait_action action;
    cr_decision refusal;
    const cr_status status = cr_wait_step(&item, &box->plan, now_ns, store_ns, &action, &sleep_ns,
                                          &refusal);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_pushstring(L, wait_plan_actions[action]);
    if (action == CR_WAIT_GO)
        return 1;
    lua_pushnumber(L,
                   cr_ns_to_seconds(action == CR_WAIT_SLEEP ? sleep_ns : refusal.retry_after_ns));
    return 2;
}

/* plan:leave(now): a waiter that stops gives its place back. */
static int wait_plan_leave(lua_State *L)
{
    wait_plan_box *box = luaL_checkudata(L, 1, WAIT_PLAN_METATABLE);
    int64_t now_ns, store_ns;
    wait_plan_now(L, 2, &box->plan, &now_ns, &store_ns);
    cr_item item;
    if (wait_plan_item(L, box, &item))
        (void)cr_wait_leave(&item, &box->plan, store_ns);
    box->plan.turn_ns = CR_NO_TURN;
    return 0;
}

/* plan:answer(wait, now): the pure rule (cr_wait_answer) for units that fit
 * `wait` seconds after `now` (math.huge: never): the action and the sleep. */
static int wait_plan_answer(lua_State *L)
{
    wait_plan_box *box = luaL_checkudata(L, 1, WAIT_PLAN_METATABLE);
    int64_t wait_ns, now_ns, store_ns, sleep_ns;
    if (cr_wait_from_seconds(luaL_checknumber(L, 2), CR_E_TIMEOUT, &wait_ns) != CR_OK)
        return raise_status(L, CR_E_TIMEOUT);
    wait_plan_now(L, 3, &box->plan, &now_ns, &store_ns);
    lua_pushstring(L, wait_plan_actions[cr_wait_answer(&box->plan, now_ns, wait_ns, &sleep_ns)]);
    lua_pushnumber(L, cr_ns_to_seconds(sleep_ns));
    return 2;
}

/* __gc: a plan dropped mid-wait (an aborted request) gives its place back. */
static int wait_plan_gc(lua_State *L)
{
    wait_plan_box *box = luaL_checkudata(L, 1, WAIT_PLAN_METATABLE);
    cr_item item;
    if (box->plan.turn_ns != CR_NO_TURN && wait_plan_item(L, box, &item))
        (void)cr_wait_leave(&item, &box->plan, CR_CLOCK);
    luaL_unref(L, LUA_REGISTRYINDEX, box->store_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, box->key_ref);
    box->store_ref = box->key_ref = LUA_NOREF;
    return 0;
}

static const luaL_Reg wait_plan_metamethods[] = {
    {"__gc", wait_plan_gc},
    {NULL, NULL},
};

static const luaL_Reg wait_plan_methods[] = {
    {"step", wait_plan_step},
    {"leave", wait_plan_leave},
    {"answer", wait_plan_answer},
    {NULL, NULL},
};

static int limiter_wait_plan(lua_State *L) { return store_wait_plan(L, limiter_tag); }
static int keyed_wait_plan(lua_State *L) { return store_wait_plan(L, keyed_tag); }

/* The metatable of plans, and _wait_plan on both store types. */
static void register_wait_plans(lua_State *L)
{
    luaL_newmetatable(L, WAIT_PLAN_METATABLE);
    compat_setfuncs(L, wait_plan_metamethods, 0);
    lua_newtable(L);
    compat_setfuncs(L, wait_plan_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_getmetatable(L, limiter_tag);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, limiter_wait_plan);
    lua_setfield(L, -2, "_wait_plan");
    lua_pop(L, 2);
    luaL_getmetatable(L, keyed_tag);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, keyed_wait_plan);
    lua_setfield(L, -2, "_wait_plan");
    lua_pop(L, 2);
}
