/*
 * The Redis store's protocol (a part of bindings/cellrate_lua.c;
 * core/cellrate/redis.h), lent to cellrate.redis, which does the transport
 * (the client's evalsha, eval and script calls, the back-off gate): a
 * request's words, the reading of a reply and of an error reply, on_error's
 * answers, the back-off, a key's name (docs/design.md §11). Argument mistakes
 * raise here, at the module's line; the module raises them again at its
 * caller's.
 */

/* Requests of up to this many bytes, and limits, are built on the C stack;
 * more in a userdata collected with the call (an error's longjmp leaves
 * nothing to free). */
#define REDIS_STACK_BYTES 1024
#define REDIS_STACK_ITEMS 8

/* A penalty as the Redis requests send it (cellrate._redis_penalty): a
 * userdata tagged by its address. */
static const char redis_penalty_tag[] = "cellrate.RedisPenalty";
typedef struct {
    const char *tag; /* redis_penalty_tag */
    cr_penalty penalty;
} redis_penalty_box;

static const cr_penalty *check_redis_penalty(lua_State *L, int idx)
{
    const redis_penalty_box *box = lua_touserdata(L, idx);
    if (box == NULL || compat_rawlen(L, idx) != sizeof *box || box->tag != redis_penalty_tag)
        luaL_argerror(L, idx, "a penalty of _redis_penalty expected");
    return &box->penalty;
}

/* cellrate._redis_penalty(penalty): the penalty option's table judged by the
 * core (cr_penalty_init, then cr_redis_check_penalty: what the script
 * carries), as _redis_request takes it. */
static int redis_penalty(lua_State *L)
{
    options opts;
    memset(&opts, 0, sizeof opts);
    read_penalty(L, 1, &opts);
    const cr_status status = cr_redis_check_penalty(&opts.penalty);
    if (status != CR_OK)
        return raise_status(L, status);
    redis_penalty_box *box = compat_newuserdata(L, sizeof *box);
    box->tag = redis_penalty_tag;
    box->penalty = opts.penalty;
    return 1;
}

/* cellrate._redis_penalty_key(prefix, name, key): the key of `key`'s strikes,
 * in its Cluster slot. */
static int redis_penalty_key(lua_State *L)
{
    size_t prefix_len, name_len, key_len = 0;
    const char *prefix = luaL_checklstring(L, 1, &prefix_len);
    const char *name = luaL_checklstring(L, 2, &name_len);
    const char *key = check_key(L, 3, &key_len);
    const size_t len = cr_redis_penalty_key(NULL, 0, prefix, prefix_len, name, name_len, key,
                                            key_len);
    char *out = compat_newuserdata(L, len);
    cr_redis_penalty_key(out, len, prefix, prefix_len, name, name_len, key, key_len);
    lua_pushlstring(L, out, len);
    return 1;
}

/* A mode of the script (its digit); an internal argument, checked. */
static cr_redis_mode redis_mode_at(lua_State *L, int idx)
{
    const lua_Integer mode = luaL_checkinteger(L, idx);
    luaL_argcheck(L, mode >= CR_REDIS_PEEK && mode <= CR_REDIS_ALLOW_CLASS, idx,
                  "a mode from 0 to 8");
    return (cr_redis_mode)mode;
}

/* A request's mode at `idx`, or it with CR_REDIS_WIPE_MARKER (on_wipe="refuse")
 * or CR_REDIS_PENALTY (the penalty last) or'ed in: whether it has the marker,
 * *penalized whether it has the penalty, the mode alone left at `idx`. */
static bool redis_request_mode_at(lua_State *L, int idx, bool *penalized)
{
    const lua_Integer raw = luaL_checkinteger(L, idx);
    luaL_argcheck(L,
                  raw >= 0 && (raw & ~(lua_Integer)(CR_REDIS_WIPE_MARKER | CR_REDIS_PENALTY |
                                                    CR_REDIS_MODE_BITS)) == 0,
                  idx, "a mode from 0 to 8, or it with WIPE_MARKER or PENALTY");
    lua_pushinteger(L, raw & CR_REDIS_MODE_BITS);
    lua_replace(L, idx);
    *penalized = (raw & CR_REDIS_PENALTY) != 0;
    return (raw & CR_REDIS_WIPE_MARKER) != 0;
}

/* A decision's cost: a charge's and a take's are required (a take's is its
 * max_cost), the others default to 1. */
static int64_t redis_cost_at(lua_State *L, int idx, cr_redis_mode mode)
{
    const int top = lua_gettop(L);
    if (mode == CR_REDIS_TAKE)
        return read_units(L, idx, top, CR_E_MAX_COST);
    if (mode == CR_REDIS_CHARGE)
        return read_units(L, idx, top, CR_E_COST);
    return read_cost(L, idx, top);
}

/*
 * cellrate._redis_request(mode, cost, now, limit, prefix, name, key, ...):
 * the words after EVALSHA and the SHA (a table of strings, numkeys first) of
 * a request of `mode`, one (limit, prefix, name, key) group per limit; a
 * class's mode (PEEK_CLASS, CHECK_CLASS, ALLOW_CLASS) ends with the class's
 * name; a mode with PENALTY or'ed in ends with the limit's penalty
 * (_redis_penalty's: the core sends it where it applies).
 */
static int redis_request(lua_State *L)
{
    const int top = lua_gettop(L);
    bool penalized;
    const bool marked = redis_request_mode_at(L, 1, &penalized);
    const cr_redis_mode mode = redis_mode_at(L, 1);
    const bool in_class = mode >= CR_REDIS_PEEK_CLASS;
    const int ngroups = top - 3 - (in_class ? 1 : 0) - (penalized ? 1 : 0);
    if (ngroups < 4 || ngroups % 4 != 0)
        return luaL_error(L, "_redis_request(mode, cost, now, limit, prefix, name, key, ...)");
    const size_t nitems = (size_t)ngroups / 4;
    cr_redis_item few[REDIS_STACK_ITEMS];
    cr_redis_item *items = nitems <= REDIS_STACK_ITEMS
                               ? few
                               : compat_newuserdata(L, nitems * sizeof *items);
    for (size_t i = 0; i < nitems; i++) {
        const int group = 4 + 4 * (int)i;
        items[i].limit = check_limit_box(L, group);
        items[i].prefix = luaL_checklstring(L, group + 1, &items[i].prefix_len);
        items[i].name = luaL_checklstring(L, group + 2, &items[i].name_len);
        items[i].key = check_key(L, group + 3, &items[i].key_len);
        items[i].priority = -1;
        items[i].penalty = NULL;
    }
    if (penalized)
        items[0].penalty = check_redis_penalty(L, top);
    if (in_class && nitems == 1)
        items[0].priority = read_priority(L, top - (penalized ? 1 : 0), top, items[0].limit);
    /* the keys, then the cost, then now: a decision's order (_check_request) */
    const int64_t cost = redis_cost_at(L, 2, mode);
    const int64_t now_ns = read_now(L, 3, top);
    const size_t size = cr_redis_request_size(items, nitems);
    char stack[REDIS_STACK_BYTES];
    char *buf = size <= sizeof stack ? stack : compat_newuserdata(L, size);
    cr_redis_word few_words[CR_REDIS_REQUEST_WORDS(REDIS_STACK_ITEMS)];
    cr_redis_word *words = nitems <= REDIS_STACK_ITEMS
                               ? few_words
                               : compat_newuserdata(L, CR_REDIS_REQUEST_WORDS(nitems) *
                                                           sizeof(cr_redis_word));
    size_t count = 0;
    const cr_status status = cr_redis_request(
        (cr_redis_mode)((unsigned)mode | (marked ? CR_REDIS_WIPE_MARKER : 0u)), cost, now_ns, items,
        nitems, buf, size, words, &count);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushlstring(L, buf + words[i].offset, words[i].len);
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

/* A reply's field: an integral number, or a decimal string. */
static cr_status redis_field_at(lua_State *L, int idx, int64_t *value)
{
    if (lua_type(L, idx) == LUA_TNUMBER)
        return to_int64(L, idx, value) ? CR_OK : CR_E_REDIS_REPLY;
    if (lua_type(L, idx) == LUA_TSTRING) {
        size_t len;
        const char *text = lua_tolstring(L, idx, &len);
        return cr_redis_parse_integer(text, len, value);
    }
    return CR_E_REDIS_REPLY;
}

/* The limits from argument `from` on (limit_spec values) into `limits`, which
 * holds REDIS_STACK_ITEMS: more go in a userdata. */
static const cr_limit **redis_limits_at(lua_State *L, int from, const cr_limit **limits,
                                        size_t *nlimits)
{
    const int top = lua_gettop(L);
    luaL_argcheck(L, top >= from, from, "a limit");
    *nlimits = (size_t)(top - from + 1);
    if (*nlimits > REDIS_STACK_ITEMS)
        limits = compat_newuserdata(L, *nlimits * sizeof *limits);
    for (size_t i = 0; i < *nlimits; i++)
        limits[i] = check_limit_box(L, from + (int)i);
    return limits;
}

/*
 * cellrate._redis_reply(mode, reply, limit, ...): the script's reply to a
 * request of `mode` for these limits: a decision's allowed, remaining,
 * retry_after, reset_after, clipped and the index of its limit; a take's (a
 * refund's) count; nil, the core's message and its code for a reply the
 * script never gives.
 */
static int redis_reply(lua_State *L)
{
    const cr_redis_mode mode = redis_mode_at(L, 1);
    const cr_limit *few[REDIS_STACK_ITEMS];
    size_t nlimits;
    const cr_limit **limits = redis_limits_at(L, 3, few, &nlimits);
    int64_t fields[8];
    size_t nfields = 0;
    const bool is_list = lua_type(L, 2) == LUA_TTABLE;
    cr_status status = CR_OK;
    if (is_list) {
        nfields = (size_t)compat_rawlen(L, 2);
        if (nfields > sizeof fields / sizeof fields[0])
            status = CR_E_REDIS_REPLY;
        for (size_t i = 0; status == CR_OK && i < nfields; i++) {
            lua_rawgeti(L, 2, (int)i + 1);
            status = redis_field_at(L, -1, &fields[i]);
            lua_pop(L, 1);
        }
    } else if (lua_type(L, 2) == LUA_TNUMBER) {
        status = redis_field_at(L, 2, &fields[0]);
        nfields = 1;
    } else {
        status = CR_E_REDIS_REPLY;
    }
    cr_redis_answer answer;
    if (status == CR_OK)
        status = cr_redis_read_reply(mode, is_list, fields, nfields, limits, nlimits, &answer);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    if (mode == CR_REDIS_TAKE || mode == CR_REDIS_REFUND) {
        compat_pushint64(L, answer.count);
        return 1;
    }
    push_decision(L, &answer.decision);
    lua_pushboolean(L, answer.decision.clipped);
    compat_pushint64(L, (int64_t)answer.index + 1);
    return 6;
}

/*
 * cellrate._redis_unavailable(mode, limit, allow, cost, probe_in): on_error's
 * answer while Redis cannot decide, the next probe `probe_in` seconds away: a
 * decision's four values and clipped (false), or a take's count.
 */
static int redis_unavailable(lua_State *L)
{
    const cr_redis_mode mode = redis_mode_at(L, 1);
    const cr_limit *limit = check_limit_box(L, 2);
    const bool allow = lua_toboolean(L, 3);
    const int64_t cost = read_cost(L, 4, lua_gettop(L));
    int64_t probe_in_ns = 0;
    if (cr_seconds_to_ns(luaL_checknumber(L, 5), &probe_in_ns) != CR_OK)
        probe_in_ns = 0; /* the probe is due (or the gate says nothing): the floor */
    cr_decision decision;
    const int64_t taken = cr_redis_unavailable(limit, allow, cost, probe_in_ns, &decision);
    if (mode == CR_REDIS_TAKE) {
        compat_pushint64(L, taken);
        return 1;
    }
    push_decision(L, &decision);
    lua_pushboolean(L, false);
    return 5;
}

/* cellrate._redis_backoff(previous): the probe's next back-off in seconds
 * (previous 0: none yet). */
static int redis_backoff(lua_State *L)
{
    int64_t previous_ns = 0;
    const lua_Number previous = luaL_checknumber(L, 1);
    if (previous > 0 && cr_seconds_to_ns(previous, &previous_ns) != CR_OK)
        previous_ns = CR_REDIS_MAX_BACKOFF_NS;
    lua_pushnumber(L, cr_ns_to_seconds(cr_redis_backoff(previous_ns)));
    return 1;
}

/* cellrate._redis_key(prefix, name, key): the Redis key of `key` (nil: a
 * concurrency limit's one key), the key checked as every decision checks it. */
static int redis_key(lua_State *L)
{
    size_t prefix_len, name_len, key_len = 0;
    const char *prefix = luaL_checklstring(L, 1, &prefix_len);
    const char *name = luaL_checklstring(L, 2, &name_len);
    const char *key = lua_isnoneornil(L, 3) ? NULL : check_key(L, 3, &key_len);
    const size_t len = cr_redis_key(NULL, 0, prefix, prefix_len, name, name_len, key, key_len);
    char *out = compat_newuserdata(L, len > 0 ? len : 1);
    cr_redis_key(out, len, prefix, prefix_len, name, name_len, key, key_len);
    lua_pushlstring(L, out, len);
    return 1;
}

/* cellrate._redis_signature(limit): the signature the script writes with
 * each value, an unnamed limit's name. */
static int redis_signature(lua_State *L)
{
    char signature[64]; /* an algorithm's name and two int64 */
    const size_t len = cr_redis_signature(signature, sizeof signature, check_limit_box(L, 1));
    lua_pushlstring(L, signature, len);
    return 1;
}

/* cellrate._redis_check_limit(limit): raises, naming burst, unless the script
 * carries `limit` exactly. */
static int redis_check_limit(lua_State *L)
{
    const cr_status status = cr_redis_check_limit(check_limit_box(L, 1));
    if (status != CR_OK)
        return raise_status(L, status);
    return 0;
}

/* cellrate._redis_classify(word, text): what a failure means
 * ("cannot_decide", "mistake", "wrong_algorithm", "cross_slot", "no_script"),
 * and a wrong algorithm's own words. `word`: the error reply's first word,
 * nil when no reply came. */
static int redis_classify(lua_State *L)
{
    static const char *const kinds[] = {"cannot_decide", "mistake", "wrong_algorithm", "cross_slot",
                                        "no_script"};
    size_t word_len = 0, text_len, message_at = 0;
    const char *word = luaL_optlstring(L, 1, NULL, &word_len);
    const char *text = luaL_checklstring(L, 2, &text_len);
    const cr_redis_failure failure = cr_redis_classify(word, word_len, text, text_len, &message_at);
    lua_pushstring(L, kinds[failure]);
    if (failure != CR_REDIS_WRONG_ALGORITHM)
        return 1;
    lua_pushlstring(L, text + message_at, text_len - message_at);
    return 2;
}

/* cellrate._redis_slots_message(keys, slots): the words of keys in several
 * Cluster hash slots, each key with its slot (-1: not known). */
static int redis_slots_message(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    const size_t nkeys = (size_t)compat_rawlen(L, 1);
    const char **keys = compat_newuserdata(L, (nkeys + 1) * sizeof *keys);
    size_t *key_lens = compat_newuserdata(L, (nkeys + 1) * sizeof *key_lens);
    int64_t *slots = compat_newuserdata(L, (nkeys + 1) * sizeof *slots);
    for (size_t i = 0; i < nkeys; i++) {
        lua_rawgeti(L, 1, (int)i + 1);
        keys[i] = luaL_checklstring(L, -1, &key_lens[i]); /* stays alive in the table */
        lua_pop(L, 1);
        lua_rawgeti(L, 2, (int)i + 1);
        if (!to_int64(L, -1, &slots[i]))
            slots[i] = -1;
        lua_pop(L, 1);
    }
    const size_t len = cr_redis_slots_message(NULL, 0, keys, key_lens, slots, nkeys);
    char *text = compat_newuserdata(L, len + 1);
    cr_redis_slots_message(text, len + 1, keys, key_lens, slots, nkeys);
    lua_pushlstring(L, text, len);
    return 1;
}

/* cellrate._redis_protocol(): the protocol's constants (the modes, the
 * bounds, the back-off, the words that mean Redis cannot decide). */
static int redis_protocol(lua_State *L)
{
    static const struct {
        const char *name;
        int64_t value;
    } numbers[] = {
        {"PEEK", CR_REDIS_PEEK},
        {"CHECK", CR_REDIS_CHECK},
        {"ALLOW", CR_REDIS_ALLOW},
        {"REFUND", CR_REDIS_REFUND},
        {"CHARGE", CR_REDIS_CHARGE},
        {"TAKE", CR_REDIS_TAKE},
        {"PEEK_CLASS", CR_REDIS_PEEK_CLASS},
        {"CHECK_CLASS", CR_REDIS_CHECK_CLASS},
        {"ALLOW_CLASS", CR_REDIS_ALLOW_CLASS},
        {"WIPE_MARKER", CR_REDIS_WIPE_MARKER},
        {"PENALTY", CR_REDIS_PENALTY},
        {"MAX_TOLERANCE_NS", CR_REDIS_MAX_TOLERANCE_NS},
        {"MAX_DEBT_NS", CR_REDIS_MAX_DEBT_NS},
        {"BATCH_MAX", CR_REDIS_BATCH_MAX},
    };
    lua_createtable(L, 0, 15);
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        compat_pushint64(L, numbers[i].value);
        lua_setfield(L, -2, numbers[i].name);
    }
    lua_pushnumber(L, cr_ns_to_seconds(CR_REDIS_FIRST_BACKOFF_NS));
    lua_setfield(L, -2, "FIRST_BACKOFF_S");
    lua_pushnumber(L, cr_ns_to_seconds(CR_REDIS_MAX_BACKOFF_NS));
    lua_setfield(L, -2, "MAX_BACKOFF_S");
    lua_pushstring(L, CR_REDIS_ALGORITHM_REPLY);
    lua_setfield(L, -2, "ALGORITHM_REPLY");
    lua_pushstring(L, CR_REDIS_BACK_KEY);
    lua_setfield(L, -2, "BACK_KEY");
    lua_pushstring(L, cr_strerror(CR_E_REDIS_BATCH_ITEM));
    lua_setfield(L, -2, "BATCH_ITEM");
    lua_newtable(L);
    for (size_t i = 0; cr_redis_unavailable_reply(i) != NULL; i++) {
        lua_pushstring(L, cr_redis_unavailable_reply(i));
        lua_rawseti(L, -2, (int)i + 1);
    }
    lua_setfield(L, -2, "UNAVAILABLE_REPLIES");
    return 1;
}

/* cellrate._redis_fallback_check(on_error, has_fallback): raises the core's
 * error naming fallback when one is given with another on_error. */
static int redis_fallback_check(lua_State *L)
{
    size_t len;
    const char *on_error = luaL_checklstring(L, 1, &len);
    const cr_status status = cr_redis_fallback_check(on_error, len, lua_toboolean(L, 2));
    return status == CR_OK ? 0 : raise_status(L, status);
}

/* cellrate._redis_nginx_items(count, redis, client): raises the core's error
 * naming limits or client unless a Redis limit (`redis`) is decided alone
 * (`count` limits as one) with the option client, and a limit kept here
 * without it. */
static int redis_nginx_items(lua_State *L)
{
    const lua_Integer count = luaL_checkinteger(L, 1);
    const cr_status status = cr_redis_nginx_items(count < 0 ? 0 : (size_t)count,
                                                  lua_toboolean(L, 2), lua_toboolean(L, 3));
    return status == CR_OK ? 0 : raise_status(L, status);
}

/* cellrate._redis_check_items(clients, n): raises the core's error naming
 * items unless the n items of a check_all, each given as its client (false:
 * not a pair), are pairs on one client; clients compared as Lua compares them
 * (rawequal: each named by the first item holding the same one). */
static int redis_check_items(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    const lua_Integer count = luaL_checkinteger(L, 2);
    if (count < 0 || count > 1 << 20)
        return luaL_argerror(L, 2, "a count of items");
    uintptr_t few[8], *ids = few;
    if (count > 8)
        ids = compat_newuserdata(L, (size_t)count * sizeof *ids);
    for (lua_Integer i = 0; i < count; i++) {
        lua_rawgeti(L, 1, i + 1);
        ids[i] = 0;
        if (lua_toboolean(L, -1)) {
            ids[i] = (uintptr_t)i + 1;
            for (lua_Integer j = 0; j < i; j++) {
                lua_rawgeti(L, 1, j + 1);
                const int same = lua_rawequal(L, -1, -2);
                lua_pop(L, 1);
                if (same) {
                    ids[i] = ids[j];
                    break;
                }
            }
        }
        lua_pop(L, 1);
    }
    const cr_status status = cr_redis_check_items(ids, (size_t)count);
    return status == CR_OK ? 0 : raise_status(L, status);
}

/* cellrate._redis_check_change(named, algorithm, given): raises the core's
 * error for a live change of a Redis rate limit (given nil: none given). */
static int redis_check_change(lua_State *L)
{
    size_t len, given_len = 0;
    const char *algorithm = luaL_checklstring(L, 2, &len);
    const char *given = NULL;
    if (!lua_isnoneornil(L, 3)) {
        if (lua_type(L, 3) != LUA_TSTRING)
            return raise_status(L, CR_E_ALGORITHM);
        given = lua_tolstring(L, 3, &given_len);
    }
    const cr_status status = cr_redis_check_change(lua_toboolean(L, 1), algorithm, len, given,
                                                   given_len);
    return status == CR_OK ? 0 : raise_status(L, status);
}

/* cellrate._redis_fallback_limit(limit, share): the limit_spec that is `share`
 * of the Redis `limit`, or the core's error naming fallback. */
static int redis_fallback_limit(lua_State *L)
{
    const cr_limit *limit = check_limit_box(L, 1);
    cr_limit out;
    const cr_status status = lua_type(L, 2) == LUA_TNUMBER
                                 ? cr_redis_fallback_limit(limit, lua_tonumber(L, 2), &out)
                                 : CR_E_REDIS_FALLBACK;
    if (status != CR_OK)
        return raise_status(L, status);
    limit_box *box = compat_newuserdata(L, sizeof *box);
    box->tag = limit_tag;
    box->limit = out;
    luaL_getmetatable(L, limit_tag);
    lua_setmetatable(L, -2);
    return 1;
}

/* cellrate._redis_plans(limit, plans, named, max_cost, max_debt): a Redis
 * limit's plans as { name = limit_spec }, "default" (`limit`) among them: the
 * core's table (cr_plans_set; a rate takes the limit's algorithm, max_cost
 * and max_debt) and its Redis rules (cr_redis_check_plans). */
static int redis_plans(lua_State *L)
{
    const cr_limit *limit = check_limit_box(L, 1);
    cr_limit_args base;
    memset(&base, 0, sizeof base);
    base.algorithm = cr_algorithm_name(limit->algorithm);
    base.algorithm_len = strlen(base.algorithm);
    if (!lua_isnil(L, 4)) {
        if (!to_int64(L, 4, &base.max_cost))
            return raise_status(L, CR_E_MAX_COST);
        base.has_max_cost = true;
    }
    if (!lua_isnil(L, 5)) {
        if (!to_int64(L, 5, &base.max_debt))
            return raise_status(L, CR_E_MAX_DEBT);
        base.has_max_debt = true;
    }
    const bool named = lua_toboolean(L, 3);
    lua_settop(L, 2);
    /* scratch the collector frees, whatever raises */
    cr_plan_table *table = compat_newuserdata(L, sizeof *table);
    read_plans(L, 2, limit, &base, table);
    const cr_status status = cr_redis_check_plans(named, table);
    if (status != CR_OK)
        return raise_status(L, status);
    lua_createtable(L, 0, table->count);
    for (int32_t i = 0; i < table->count; i++) {
        limit_box *box = compat_newuserdata(L, sizeof *box);
        box->tag = limit_tag;
        box->limit = table->limits[i];
        luaL_getmetatable(L, limit_tag);
        lua_setmetatable(L, -2);
        lua_setfield(L, -2, table->names[i]);
    }
    return 1;
}

/* cellrate._redis_plan(plans, plan): the limit of `plan` in `plans`
 * (_redis_plans's), else raises the core's error naming plan. */
static int redis_plan(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TTABLE && lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        lua_rawget(L, 1);
        if (lua_type(L, -1) == LUA_TUSERDATA)
            return 1;
    }
    return raise_status(L, CR_E_PLAN);
}

/* cellrate._redis_going_back(mode, cost, fallback, held_remaining): the mode,
 * cost and settled of a key decided locally during an outage. */
static int redis_going_back(lua_State *L)
{
    const cr_redis_mode mode = redis_mode_at(L, 1);
    const int64_t cost = read_cost(L, 2, lua_gettop(L));
    const cr_limit *fallback = check_limit_box(L, 3);
    const lua_Number held = luaL_checknumber(L, 4);
    cr_redis_mode send;
    bool settled;
    const int64_t sent = cr_redis_going_back(mode, cost, fallback, (int64_t)held, &send, &settled);
    lua_pushinteger(L, (lua_Integer)send);
    compat_pushint64(L, sent);
    lua_pushboolean(L, settled);
    return 3;
}
