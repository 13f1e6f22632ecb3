/*
 * Limiter and KeyedLimiter (a part of bindings/cellrate_lua.c; docs/design.md
 * §4): one implementation of every method, `tag` the type, and each type's
 * entry points (STORE_TYPE), which pass their tag as a constant.
 */

/*
 * cellrate.limiter(rate [, opts]) and cellrate.keyed(rate [, opts]). Returns
 * the object, or nil, a message and a code when a shared region cannot be
 * used or memory is short.
 */
static int store_new(lua_State *L, const char *tag)
{
    const bool keyed = tag == keyed_tag;
    options opts = {.capacity = CR_KEYED_DEFAULT_CAPACITY, .shared_mode = CR_SHARED_DEFAULT_MODE};
    read_rate(L, 1, &opts.args);
    read_options(L, 2, keyed ? "KeyedLimiter" : "Limiter", &opts);
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &opts.args);
    if (status != CR_OK)
        return raise_status(L, status);

    /* The userdata first, so that a memory error leaves nothing to free. */
    store_box *box = compat_newuserdata(L, sizeof *box);
    memset(box, 0, sizeof *box);
    box->tag = tag;
    box->closed_limit = limit;
    box->capacity = opts.capacity;
    box->max_cost = opts.args.max_cost;
    box->has_max_cost = opts.args.has_max_cost;
    box->max_debt = opts.args.max_debt;
    box->has_max_debt = opts.args.has_max_debt;
    box->shared = opts.shared != NULL;
    luaL_getmetatable(L, tag);
    lua_setmetatable(L, -2);
    const int box_idx = lua_gettop(L);
    cr_plan_table *table = NULL;
    if (keyed && lua_type(L, 2) == LUA_TTABLE) {
        lua_getfield(L, 2, "plans");
        if (!lua_isnil(L, -1)) {
            table = compat_newuserdata(L, sizeof *table); /* collected with the stack */
            read_plans(L, lua_gettop(L) - 1, &limit, &opts.args, table);
        }
    }
    status = keyed ? cr_keyed_open_plans(&box->keyed, &limit, table, opts.capacity, opts.shared,
                                         opts.shared_mode, opts.on_change)
                   : cr_limiter_open(&box->limiter, &limit, opts.shared, opts.shared_mode,
                                     opts.on_change);
    if (status == CR_OK && opts.has_sync)
        status = keyed ? cr_keyed_set_sync(box->keyed, opts.sync)
                       : cr_limiter_set_sync(box->limiter, opts.sync);
    if (status == CR_OK && opts.has_penalty)
        status = keyed ? cr_keyed_set_penalty(box->keyed, &opts.penalty)
                       : cr_limiter_set_penalty(box->limiter, &opts.penalty);
    lua_settop(L, box_idx); /* the plans were copied */
    if (status != CR_OK)
        return report_status(L, status, opts.shared);
    const cr_limit *replaced = keyed ? cr_keyed_replaced(box->keyed)
                                     : cr_limiter_replaced(box->limiter);
    if (replaced != NULL) {
        /* Lua has no warning channel every host shows; nginx logs stderr */
        char text[CR_CHANGE_DESCRIPTION_MAX + 512];
        cr_change_describe(text, sizeof text, tag, opts.shared, replaced, &limit,
                           keyed ? opts.capacity : -1);
        fprintf(stderr, "cellrate: %s\n", text);
    }
    return 1;
}

/* What every call on a store starts with: self, then (KeyedLimiter) the key;
 * the call's own arguments start at `next`. */
typedef struct {
    const store_box *box;
    bool keyed;
    const char *key;
    size_t key_len;
    int next;
} call_head;

static ALWAYS_INLINE call_head read_call_head(lua_State *L, const char *tag)
{
    call_head head = {.box = check_open(L, tag), .keyed = tag == keyed_tag, .next = 2};
    if (head.keyed)
        head.key = check_key(L, head.next++, &head.key_len);
    return head;
}

/* A KeyedLimiter call's plan at idx (nil or absent: "default"); a
 * Limiter's is always "default". */
static int32_t read_call_plan(lua_State *L, const call_head *head, int idx, int top)
{
    return head->keyed && idx <= top ? read_plan(L, idx, top, head->box->keyed) : CR_PLAN_DEFAULT;
}

/* One decision into `decision`, or, with `decision` NULL (allow), only
 * whether it is admitted, into *allowed; `plan_limit` (may be NULL) gets the
 * limit of the plan that decided. Argument mistakes raise; a runtime
 * failure (a region's lock held past its bound) is returned for the caller
 * to report. */
static ALWAYS_INLINE cr_status decide(lua_State *L, const char *tag, bool commit, int priority_at,
                                      cr_decision *decision, bool *allowed,
                                      const cr_limit **plan_limit)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    const int priority_idx = head.next + priority_at;
    const int32_t priority = priority_idx <= top
                                 ? read_priority(L, priority_idx, top, box_limit(head.box))
                                 : -1;
    const int32_t plan = head.keyed && priority_idx + 1 <= top
                             ? read_plan(L, priority_idx + 1, top, head.box->keyed)
                             : CR_PLAN_DEFAULT;
    cr_status status;
    if (plan_limit != NULL)
        *plan_limit = plan != CR_PLAN_DEFAULT ? cr_keyed_plan_limit(head.box->keyed, plan)
                                              : box_limit(head.box);
    if (head.keyed && __builtin_expect(plan != CR_PLAN_DEFAULT, 0))
        status = cr_keyed_check_plan(head.box->keyed, head.key, head.key_len, now_ns, cost, plan,
                                     priority, commit, decision, allowed);
    else if (__builtin_expect(priority >= 0, 0))
        status = head.keyed
                     ? cr_keyed_check_priority(head.box->keyed, head.key, head.key_len, now_ns,
                                               cost, priority, commit, decision, allowed)
                 : decision != NULL ? cr_limiter_check_priority(head.box->limiter, now_ns, cost,
                                                                priority, commit, decision, allowed)
                                    : cr_limiter_allow_priority(head.box->limiter, now_ns, cost,
                                                                priority, allowed);
    else if (head.keyed)
        status = decision != NULL ? cr_keyed_check(head.box->keyed, head.key, head.key_len, now_ns,
                                                   cost, commit, decision)
                                  : cr_keyed_allow(head.box->keyed, head.key, head.key_len, now_ns,
                                                   cost, allowed);
    else
        status = decision != NULL
                     ? cr_limiter_check(head.box->limiter, now_ns, cost, commit, decision)
                     : cr_limiter_allow(head.box->limiter, now_ns, cost, allowed);
    if (status != CR_OK && cr_status_class_of(status) == CR_STATUS_ARGUMENT)
        raise_status(L, status);
    return status;
}

/* allow(), check() and peek(): lim:allow(cost, now, priority), keyed:allow(key,
 * cost, now, priority) */
static ALWAYS_INLINE int store_allow(lua_State *L, const char *tag)
{
    bool allowed = false;
    cr_status status = decide(L, tag, true, 2, NULL, &allowed, NULL);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    lua_pushboolean(L, allowed);
    return 1;
}

static ALWAYS_INLINE int store_check(lua_State *L, const char *tag, bool commit)
{
    cr_decision decision;
    cr_status status = decide(L, tag, commit, 2, &decision, NULL, NULL);
    return status != CR_OK ? push_failure(L, status, NULL) : push_decision(L, &decision);
}

/* lim:check_headers(cost, now, name, legacy, priority), keyed:check_headers(key,
 * cost, now, name, legacy, priority): check()'s four values, then the decision's header
 * fields as name, value, ... (cellrate.header_fields): one call where the
 * decision is sent on a response. */
static ALWAYS_INLINE int store_check_headers(lua_State *L, const char *tag)
{
    cr_decision decision;
    const int top = lua_gettop(L);
    const int name_idx = tag == keyed_tag ? 5 : 4;
    size_t name_len;
    const char *name = read_header_name(L, name_idx, top, &name_len);
    if (cr_headers_check_name(name, name_len) != CR_OK)
        raise_status(L, CR_E_HEADER_NAME);
    const cr_limit *limit = NULL;
    const cr_status status = decide(L, tag, true, 4, &decision, NULL, &limit);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    push_decision(L, &decision);
    /* the window of the plan that decided (its burst is the decision's) */
    return 4 + format_fields_and_push(L, limit, &decision, name_idx, top);
}

/* lim:reserve(cost, timeout, now), keyed:reserve(key, cost, timeout, now,
 * plan): the delay in seconds (0: now), or nil when nothing was reserved. */
static int store_reserve(lua_State *L, const char *tag)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t max_wait_ns = read_wait_limit(L, head.next + 1, top, CR_E_TIMEOUT);
    const int64_t now_ns = read_now(L, head.next + 2, top);
    const int32_t plan = read_call_plan(L, &head, head.next + 3, top);
    int64_t delay_ns = 0;
    bool reserved = false;
    const cr_status status = head.keyed
                                 ? cr_keyed_reserve(head.box->keyed, head.key, head.key_len, now_ns,
                                                    plan, cost, max_wait_ns, &reserved, &delay_ns)
                                 : cr_limiter_reserve(head.box->limiter, now_ns, cost, max_wait_ns,
                                                      &reserved, &delay_ns);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (!reserved)
        lua_pushnil(L);
    else
        lua_pushnumber(L, cr_ns_to_seconds(delay_ns));
    return 1;
}

/*
 * lim:wait(cost, timeout), keyed:wait(key, cost, timeout, plan): blocks until the
 * units are admitted, at most `timeout` seconds (nil: any), as Python's
 * wait(): the core's wait plan slept in C (cr_wait, docs/design/waiting.md). The seconds slept (0: none), or
 * nil, "timeout" at once, nothing spent, when they cannot be had in time (an
 * unfittable cost never can).
 */
static int store_wait(lua_State *L, const char *tag)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t timeout_ns = read_wait_limit(L, head.next + 1, top, CR_E_TIMEOUT);
    const cr_item item = {.limiter = head.keyed ? NULL : head.box->limiter,
                          .keyed = head.keyed ? head.box->keyed : NULL,
                          .key = head.key,
                          .key_len = head.key_len,
                          .plan = read_call_plan(L, &head, head.next + 2, top)};
    bool admitted = false;
    int64_t slept_ns = 0;
    const cr_status status = cr_wait(&item, cost, timeout_ns, &admitted, &slept_ns, NULL);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (!admitted) {
        lua_pushnil(L);
        lua_pushliteral(L, "timeout");
        return 2;
    }
    lua_pushnumber(L, cr_ns_to_seconds(slept_ns));
    return 1;
}

/* lim:refund(cost, now), keyed:refund(key, cost, now, plan); with `anchor`,
 * lim:anchor(cost, now), keyed:anchor(key, cost, now, plan) (units reserved
 * earlier that start only now: docs/design.md §9). */
static int store_refund(lua_State *L, const char *tag, bool anchor)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    const int32_t plan = read_call_plan(L, &head, head.next + 2, top);
    cr_status status;
    if (anchor)
        status = head.keyed
                     ? cr_keyed_anchor(head.box->keyed, head.key, head.key_len, now_ns, plan, cost)
                     : cr_limiter_anchor(head.box->limiter, now_ns, cost);
    else
        status = head.keyed
                     ? cr_keyed_refund(head.box->keyed, head.key, head.key_len, now_ns, plan, cost)
                     : cr_limiter_refund(head.box->limiter, now_ns, cost);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    return 0;
}

/* lim:charge(cost, now), keyed:charge(key, cost, now, plan) (docs/design.md
 * §9): check()'s four values, then clipped (the debt met its bound); with
 * `take`, lim:take(max_cost, now), keyed:take(key, max_cost, now, plan): the
 * units taken. */
static int store_after_fact(lua_State *L, const char *tag, bool take)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t units = read_units(L, head.next, top, take ? CR_E_MAX_COST : CR_E_COST);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    const int32_t plan = read_call_plan(L, &head, head.next + 2, top);
    cr_decision decision;
    int64_t taken = 0;
    cr_status status;
    if (take)
        status = head.keyed ? cr_keyed_take(head.box->keyed, head.key, head.key_len, now_ns, plan,
                                            units, &taken)
                            : cr_limiter_take(head.box->limiter, now_ns, units, &taken);
    else
        status = head.keyed ? cr_keyed_charge(head.box->keyed, head.key, head.key_len, now_ns, plan,
                                              units, &decision)
                            : cr_limiter_charge(head.box->limiter, now_ns, units, &decision);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (take) {
        compat_pushint64(L, taken);
        return 1;
    }
    push_decision(L, &decision);
    lua_pushboolean(L, decision.clipped);
    return 5;
}

/* lim:reset(), keyed:reset(key) */
static int store_reset(lua_State *L, const char *tag)
{
    const call_head head = read_call_head(L, tag);
    if (head.keyed)
        cr_keyed_reset(head.box->keyed, head.key, head.key_len);
    else
        cr_limiter_reset(head.box->limiter);
    return 0;
}

/* lim:stats(), keyed:stats(): the counters, a table of integers. */
static int store_stats(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    cr_stats stats;
    if (is_keyed(box))
        cr_keyed_stats(box->keyed, &stats);
    else
        cr_limiter_stats(box->limiter, &stats);
    push_stats(L, &stats);
    return 1;
}

/* lim:reset_stats(): true, or nil, message, code (a region's lock held too long). */
static int store_reset_stats(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    cr_status status = is_keyed(box) ? cr_keyed_reset_stats(box->keyed)
                                     : cr_limiter_reset_stats(box->limiter);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* lim:stats_by(), keyed:stats_by(): the requests by plan and by class. */
static int store_stats_by(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    cr_stats_by by;
    if (is_keyed(box))
        cr_keyed_stats_by(box->keyed, &by);
    else
        cr_limiter_stats_by(box->limiter, &by);
    push_stats_by(L, &by);
    return 1;
}

/* lim:_would_refuse(cost [, plan [, priority]]): a dry run let a refusal of
 * `cost` units through, decided under `plan` (a keyed table's) in class
 * `priority`. */
static int store_would_refuse(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    const int64_t cost = (int64_t)luaL_checkinteger(L, 2);
    const int top = lua_gettop(L);
    const int32_t plan = is_keyed(box) ? read_plan(L, 3, top, box->keyed) : CR_PLAN_DEFAULT;
    const int32_t priority = read_priority(L, 4, top, box_limit(box));
    if (is_keyed(box))
        cr_keyed_would_refuse(box->keyed, cost, plan, priority);
    else
        cr_limiter_would_refuse(box->limiter, cost, priority);
    return 0;
}

/* lim:reconfigure(rate [, opts [, now]]) and keyed:reconfigure(...): the limit
 * changes live, keeping what was used (docs/design.md §4); opts: period,
 * burst, algorithm (the store's when absent), max_debt (the one given before
 * when absent: the default follows the burst); max_cost stays the store's. */
static int store_reconfigure(lua_State *L, const char *tag)
{
    const bool keyed = tag == keyed_tag;
    store_box *box = check_open(L, tag);
    const int top = lua_gettop(L);
    options opts = {.capacity = CR_KEYED_DEFAULT_CAPACITY, .shared_mode = CR_SHARED_DEFAULT_MODE};
    read_rate(L, 2, &opts.args);
    read_options(L, 3, "reconfigure", &opts);
    if (opts.args.algorithm == NULL) {
        opts.args.algorithm = cr_algorithm_name(box_limit(box)->algorithm);
        opts.args.algorithm_len = strlen(opts.args.algorithm);
    }
    if (opts.args.zone == NULL) /* a calendar quota keeps its zone unless another is given */
        opts.args.zone = box_limit(box)->zone;
    opts.args.max_cost = box->max_cost;
    opts.args.has_max_cost = box->has_max_cost;
    if (!opts.args.has_max_debt) {
        opts.args.max_debt = box->max_debt;
        opts.args.has_max_debt = box->has_max_debt;
    }
    const int64_t now_ns = read_now(L, 4, top);
    int32_t plan = CR_PLAN_DEFAULT;
    if (lua_type(L, 3) == LUA_TTABLE) { /* opts.plan: the plan that changes (keyed) */
        lua_getfield(L, 3, "plan");
        plan = read_plan(L, lua_gettop(L), lua_gettop(L), keyed ? box->keyed : NULL);
        lua_pop(L, 1);
    }
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &opts.args);
    if (status == CR_OK)
        status = keyed ? cr_keyed_reconfigure_plan(box->keyed, plan, &limit, now_ns)
                       : cr_limiter_reconfigure(box->limiter, &limit, now_ns);
    if (status != CR_OK)
        return raise_status(L, status);
    box->max_debt = opts.args.max_debt;
    box->has_max_debt = opts.args.has_max_debt;
    return 0;
}

/* rate, period, burst, clock, algorithm, emission_ns, tolerance_ns, max_debt
 * (max_cost when given); a KeyedLimiter's
 * capacity and evictions; shared = true in a shared region. */
static int store_info(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    const cr_limit *limit = box_limit(box);
    lua_newtable(L);
    lua_pushnumber(L, limit->rate);
    lua_setfield(L, -2, "rate");
    lua_pushnumber(L, limit->period_s);
    lua_setfield(L, -2, "period");
    compat_pushint64(L, limit->burst);
    lua_setfield(L, -2, "burst");
    lua_pushstring(L, cr_clock_name(limit));
    lua_setfield(L, -2, "clock");
    lua_pushstring(L, cr_algorithm_name(limit->algorithm));
    lua_setfield(L, -2, "algorithm");
    compat_pushint64(L, limit->emission_ns);
    lua_setfield(L, -2, "emission_ns");
    compat_pushint64(L, limit->tolerance_ns);
    lua_setfield(L, -2, "tolerance_ns");
    compat_pushint64(L, limit->max_debt);
    lua_setfield(L, -2, "max_debt");
    if (box->has_max_cost) {
        compat_pushint64(L, box->max_cost);
        lua_setfield(L, -2, "max_cost");
    }
    if (is_keyed(box)) {
        compat_pushint64(L, box->capacity);
        lua_setfield(L, -2, "capacity");
        compat_pushint64(L, (int64_t)cr_keyed_evictions(box->keyed));
        lua_setfield(L, -2, "evictions");
    }
    if (box->shared) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "shared");
    }
    return 1;
}

/* close(), __close and __gc: safe to call any number of times. */
static int store_close(lua_State *L, const char *tag)
{
    store_box *box = check_self(L, tag);
    box->closed_limit = *box_limit(box);
    cr_limiter_free(box->limiter);
    cr_keyed_free(box->keyed);
    box->limiter = NULL;
    box->keyed = NULL;
    return 0;
}

static int store_tostring(lua_State *L, const char *tag)
{
    const store_box *box = check_self(L, tag);
    if (box->limiter == NULL && box->keyed == NULL)
        lua_pushfstring(L, "%s(closed)", tag);
    else
        push_limit_text(L, tag, box_limit(box), is_keyed(box) ? box->capacity : -1);
    return 1;
}

/*
 * A type's constructor, methods and metamethods: entry points that pass the
 * type's tag to the one implementation above.
 */
#define STORE_TYPE(type, tag)                                                             \
    static int type##_new(lua_State *L) { return store_new(L, tag); }                     \
    static int type##_allow(lua_State *L) { return store_allow(L, tag); }                 \
    static int type##_check(lua_State *L) { return store_check(L, tag, true); }           \
    static int type##_peek(lua_State *L) { return store_check(L, tag, false); }           \
    static int type##_check_headers(lua_State *L) { return store_check_headers(L, tag); } \
    static int type##_reserve(lua_State *L) { return store_reserve(L, tag); }             \
    static int type##_wait(lua_State *L) { return store_wait(L, tag); }                   \
    static int type##_refund(lua_State *L) { return store_refund(L, tag, false); }        \
    static int type##_anchor(lua_State *L) { return store_refund(L, tag, true); }         \
    static int type##_charge(lua_State *L) { return store_after_fact(L, tag, false); }    \
    static int type##_take(lua_State *L) { return store_after_fact(L, tag, true); }       \
    static int type##_reset(lua_State *L) { return store_reset(L, tag); }                 \
    static int type##_reconfigure(lua_State *L) { return store_reconfigure(L, tag); }     \
    static int type##_info(lua_State *L) { return store_info(L, tag); }                   \
    static int type##_stats(lua_State *L) { return store_stats(L, tag); }                 \
    static int type##_reset_stats(lua_State *L) { return store_reset_stats(L, tag); }     \
    static int type##_stats_by(lua_State *L) { return store_stats_by(L, tag); }           \
    static int type##_would_refuse(lua_State *L) { return store_would_refuse(L, tag); }   \
    static int type##_close(lua_State *L) { return store_close(L, tag); }                 \
    static int type##_tostring(lua_State *L) { return store_tostring(L, tag); }           \
    static const luaL_Reg type##_methods[] = {                                            \
        {"allow", type##_allow},                                                          \
        {"check", type##_check},                                                          \
        {"peek", type##_peek},                                                            \
        {"reserve", type##_reserve},                                                      \
        {"wait", type##_wait},                                                            \
        {"refund", type##_refund},                                                        \
        {"anchor", type##_anchor},                                                        \
        {"reset", type##_reset},                                                          \
        {"info", type##_info},                                                            \
        {"close", type##_close},                                                          \
        {"reconfigure", type##_reconfigure},                                              \
        {"check_headers", type##_check_headers},                                          \
        {"charge", type##_charge},                                                        \
        {"take", type##_take},                                                            \
        {"stats", type##_stats},                                                          \
        {"stats_by", type##_stats_by},                                                    \
        {"reset_stats", type##_reset_stats},                                              \
        {"_would_refuse", type##_would_refuse},                                           \
        {NULL, NULL},                                                                     \
    };                                                                                    \
    /* __close is only called by Lua 5.4; an extra field is harmless before. */           \
    static const luaL_Reg type##_metamethods[] = {                                        \
        {"__gc", type##_close},                                                           \
        {"__close", type##_close},                                                        \
        {"__tostring", type##_tostring},                                                  \
        {NULL, NULL},                                                                     \
    };

STORE_TYPE(limiter, limiter_tag)
STORE_TYPE(keyed, keyed_tag)

static int keyed_len(lua_State *L)
{
    compat_pushint64(L, (int64_t)cr_keyed_len(check_open(L, keyed_tag)->keyed));
    return 1;
}

/* keyed:clear(): every key forgotten */
static int keyed_clear(lua_State *L)
{
    cr_keyed_clear(check_open(L, keyed_tag)->keyed);
    return 0;
}

static const luaL_Reg keyed_length[] = {
    {"__len", keyed_len},
    {NULL, NULL},
};
