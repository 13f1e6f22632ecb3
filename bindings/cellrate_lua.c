/*
 * The Lua face of cellrate (DESIGN §3): `require "cellrate"`.
 *
 * Every function checks its arguments' types, calls the core and translates
 * the result. Argument mistakes raise an error whose message is the core's
 * cr_strerror() text, which starts with the parameter's name; the core does
 * all validation, defaults and clock reads.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "cellrate.h"
#include "cellrate_lua_compat.h"

#define LIMITER_METATABLE "cellrate.Limiter"
#define KEYED_METATABLE "cellrate.KeyedLimiter"

#if defined(__GNUC__)
#define CELLRATE_LUA_EXPORT __attribute__((visibility("default")))
#else
#define CELLRATE_LUA_EXPORT
#endif

CELLRATE_LUA_EXPORT int luaopen_cellrate(lua_State *L);

/* The userdata hold their type's tag and a handle (NULL once closed or
 * collected). The tag is the address of the type's name in this module. */
static const char limiter_tag[] = LIMITER_METATABLE;
static const char keyed_tag[] = KEYED_METATABLE;

typedef struct limiter_box {
    const char *tag; /* limiter_tag */
    cr_limiter *limiter;
} limiter_box;

typedef struct keyed_box {
    const char *tag; /* keyed_tag */
    cr_keyed *keyed;
} keyed_box;

_Static_assert(sizeof(limiter_box) == sizeof(keyed_box), "check_self reads either box");

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

static int raise_status(lua_State *L, cr_status status)
{
    lua_pushstring(L, cr_strerror(status));
    return lua_error(L);
}

/* A failed open of a shared region: the core's words, the path, and the
 * system's reason where there is one. */
static int raise_shared(lua_State *L, cr_status status, const char *path)
{
    if (status == CR_E_SHARED_IO || status == CR_E_SHARED_ACCESS)
        return luaL_error(L, "%s: %s (%s)", cr_strerror(status), path, strerror(errno));
    return luaL_error(L, "%s: %s", cr_strerror(status), path);
}

/*
 * An integer argument: the integer subtype (5.3+), or a float with an integral
 * value (the only kind LuaJIT has). Integral values beyond int64 saturate so
 * that the core, not the binding, decides what they mean. False for a
 * non-number, NaN or a fractional value.
 */
static bool to_int64(lua_State *L, int idx, int64_t *out)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        return false;
    if (compat_isinteger(L, idx)) {
        *out = (int64_t)lua_tointeger(L, idx);
        return true;
    }
    const lua_Number value = lua_tonumber(L, idx);
    if (value != value)
        return false;
    if (value >= 0x1p63) {
        *out = INT64_MAX;
        return true;
    }
    if (value < -0x1p63) {
        *out = INT64_MIN;
        return true;
    }
    const int64_t truncated = (int64_t)value;
    if ((lua_Number)truncated != value)
        return false;
    *out = truncated;
    return true;
}

static void read_rate(lua_State *L, int idx, cr_limit_args *args)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        args->rate = lua_tonumber(L, idx);
        break;
    case LUA_TSTRING:
        /* Stays on the stack, hence valid, until cr_limit_init has read it. */
        args->rate_text = lua_tolstring(L, idx, &args->rate_text_len);
        break;
    default:
        raise_status(L, CR_E_RATE);
    }
}

enum option {
    OPTION_PERIOD = 1,
    OPTION_BURST = 2,
    OPTION_CAPACITY = 4,
    OPTION_SHARED = 8,
    OPTION_SHARED_MODE = 16,
    OPTION_CLOCK = 32,
};

/* What an options table may hold; absent fields keep their initial values. */
typedef struct {
    cr_limit_args args;
    int64_t capacity;
    const char *shared; /* path of a shared region, or NULL */
    int64_t shared_mode;
} options;

static const struct {
    const char *name;
    enum option option;
} option_names[] = {
    {"period", OPTION_PERIOD},
    {"burst", OPTION_BURST},
    {"capacity", OPTION_CAPACITY},
    {"shared", OPTION_SHARED},
    {"shared_mode", OPTION_SHARED_MODE},
    {"clock", OPTION_CLOCK},
};

static enum option option_named(lua_State *L, int key_idx, unsigned accepted)
{
    if (lua_type(L, key_idx) == LUA_TSTRING) {
        const char *name = lua_tostring(L, key_idx);
        for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
            if ((accepted & option_names[i].option) && strcmp(name, option_names[i].name) == 0)
                return option_names[i].option;
        }
        luaL_error(L, "unknown option '%s'", name);
    } else {
        luaL_error(L, "unknown option (a %s key)", luaL_typename(L, key_idx));
    }
    return 0;
}

/*
 * Reads the options table at `idx` (nil: none) into `opts`. An absent option
 * stays absent; the core applies the defaults. The `shared` string stays
 * alive while the table is on the stack.
 */
static void read_options(lua_State *L, int idx, unsigned accepted, const char *type_message,
                         options *opts)
{
    cr_limit_args *args = &opts->args;
    if (lua_isnoneornil(L, idx))
        return;
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushstring(L, type_message);
        lua_error(L);
    }
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        switch (option_named(L, -2, accepted)) {
        case OPTION_PERIOD:
            if (lua_type(L, -1) != LUA_TNUMBER)
                raise_status(L, CR_E_PERIOD);
            args->period_s = lua_tonumber(L, -1);
            args->has_period = true;
            break;
        case OPTION_BURST:
            if (!to_int64(L, -1, &args->burst))
                raise_status(L, CR_E_BURST);
            args->has_burst = true;
            break;
        case OPTION_CAPACITY:
            if (!to_int64(L, -1, &opts->capacity))
                raise_status(L, CR_E_CAPACITY);
            break;
        case OPTION_SHARED:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_SHARED_PATH);
            opts->shared = lua_tostring(L, -1);
            break;
        case OPTION_SHARED_MODE:
            if (!to_int64(L, -1, &opts->shared_mode))
                raise_status(L, CR_E_SHARED_MODE);
            break;
        case OPTION_CLOCK:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_CLOCK);
            args->clock = lua_tolstring(L, -1, &args->clock_len);
            break;
        }
        lua_pop(L, 1);
    }
}

/* cost: nil is one unit. */
/* The optional arguments are read only when the call passed them (`top`
 * is lua_gettop): most calls pass none, and each API call costs. */
static int64_t read_cost(lua_State *L, int idx, int top)
{
    int64_t cost = 1;
    if (idx <= top && !lua_isnil(L, idx) && !to_int64(L, idx, &cost))
        raise_status(L, CR_E_COST);
    return cost;
}

/* now: nil lets the core read its clock. */
static int64_t read_now(lua_State *L, int idx, int top)
{
    int64_t now_ns = CR_CLOCK;
    if (idx > top || lua_isnil(L, idx))
        return now_ns;
    if (lua_type(L, idx) != LUA_TNUMBER)
        raise_status(L, CR_E_NOW);
    const cr_status status = cr_seconds_to_ns(lua_tonumber(L, idx), &now_ns);
    if (status != CR_OK)
        raise_status(L, status);
    return now_ns;
}

/* allowed, remaining, retry_after, reset_after (seconds; never fits: math.huge). */
static int push_decision(lua_State *L, const cr_decision *decision)
{
    lua_pushboolean(L, decision->allowed);
    compat_pushint64(L, decision->remaining);
    lua_pushnumber(L, cr_ns_to_seconds(decision->retry_after_ns));
    lua_pushnumber(L, cr_ns_to_seconds(decision->reset_after_ns));
    return 4;
}

/* ------------------------------------------------------------------------ */
/* Describing a limit                                                        */

/* The shortest text that reads back as `value`, integral values without ".0". */
static void format_number(char *buf, size_t size, double value)
{
    if (value > -0x1p53 && value < 0x1p53 && (double)(int64_t)value == value) {
        snprintf(buf, size, "%" PRId64, (int64_t)value);
        return;
    }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, size, "%.*g", precision, value);
        if (strtod(buf, NULL) == value)
            return;
    }
}

static void push_limit_text(lua_State *L, const char *type_name, const cr_limit *limit,
                            const int64_t *capacity)
{
    char rate[32], period[32], text[160];
    format_number(rate, sizeof rate, limit->rate);
    format_number(period, sizeof period, limit->period_s);
    const char *clock = limit->fast_clock ? ", clock=fast" : "";
    if (capacity != NULL)
        snprintf(text, sizeof text,
                 "%s(rate=%s, period=%s, burst=%" PRId64 ", capacity=%" PRId64 "%s)", type_name,
                 rate, period, limit->burst, *capacity, clock);
    else
        snprintf(text, sizeof text, "%s(rate=%s, period=%s, burst=%" PRId64 "%s)", type_name,
                 rate, period, limit->burst, clock);
    lua_pushstring(L, text);
}

static void push_limit_table(lua_State *L, const cr_limit *limit)
{
    lua_newtable(L);
    lua_pushnumber(L, limit->rate);
    lua_setfield(L, -2, "rate");
    lua_pushnumber(L, limit->period_s);
    lua_setfield(L, -2, "period");
    compat_pushint64(L, limit->burst);
    lua_setfield(L, -2, "burst");
    lua_pushstring(L, limit->fast_clock ? "fast" : "monotonic");
    lua_setfield(L, -2, "clock");
}

static int raise_closed(lua_State *L, const char *type_name)
{
    return luaL_error(L, "%s is closed", type_name);
}

/*
 * The userdata `self` (argument 1) of a method or metamethod, made by this
 * module for the type of `tag` (whose text is the type's name). A full
 * userdata of a box's size that starts with the tag's address is ours: no
 * Lua code can write a C address into a userdata. Cheaper on every call than
 * fetching and comparing metatables.
 */
static void *check_self(lua_State *L, const char *tag)
{
    /* A light userdata has no length, a full one of another size is not a box. */
    const char *const *box = lua_touserdata(L, 1);
    if (box != NULL && compat_rawlen(L, 1) == sizeof(limiter_box) && *box == tag)
        return (void *)box;
    luaL_argerror(L, 1, lua_pushfstring(L, "%s expected, got %s", tag, luaL_typename(L, 1)));
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* cellrate.Limiter                                                          */

static int limiter_new(lua_State *L)
{
    options opts = {.shared_mode = CR_SHARED_DEFAULT_MODE};
    read_rate(L, 1, &opts.args);
    read_options(L, 2,
                 OPTION_PERIOD | OPTION_BURST | OPTION_SHARED | OPTION_SHARED_MODE | OPTION_CLOCK,
                 "opts must be a table with the fields period, burst, shared, shared_mode, clock",
                 &opts);
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &opts.args);
    if (status != CR_OK)
        return raise_status(L, status);

    /* The userdata first, so that a memory error leaves nothing to free. */
    limiter_box *box = compat_newuserdata(L, sizeof *box);
    box->tag = limiter_tag;
    box->limiter = NULL;
    luaL_getmetatable(L, LIMITER_METATABLE);
    lua_setmetatable(L, -2);
    if (opts.shared) {
        status = cr_limiter_open_shared(&box->limiter, &limit, opts.shared, opts.shared_mode);
        if (status != CR_OK)
            return raise_shared(L, status, opts.shared);
        return 1;
    }
    status = cr_limiter_new(&box->limiter, &limit);
    if (status != CR_OK)
        return raise_status(L, status);
    return 1;
}

static cr_limiter *check_limiter(lua_State *L)
{
    limiter_box *box = check_self(L, limiter_tag);
    if (box->limiter == NULL)
        raise_closed(L, LIMITER_METATABLE);
    return box->limiter;
}

/* One decision into `decision`, or, with `decision` NULL (allow), only
 * whether it is admitted; returns that. */
static bool limiter_decide(lua_State *L, bool commit, cr_decision *decision)
{
    const int top = lua_gettop(L);
    cr_limiter *limiter = check_limiter(L);
    const int64_t cost = read_cost(L, 2, top);
    const int64_t now_ns = read_now(L, 3, top);
    bool allowed = false;
    const cr_status status = decision != NULL
                                 ? cr_limiter_check(limiter, now_ns, cost, commit, decision)
                                 : cr_limiter_allow(limiter, now_ns, cost, &allowed);
    if (status != CR_OK)
        raise_status(L, status);
    return decision != NULL ? decision->allowed : allowed;
}

static int limiter_allow(lua_State *L)
{
    lua_pushboolean(L, limiter_decide(L, true, NULL));
    return 1;
}

static int limiter_check(lua_State *L)
{
    cr_decision decision;
    limiter_decide(L, true, &decision);
    return push_decision(L, &decision);
}

static int limiter_peek(lua_State *L)
{
    cr_decision decision;
    limiter_decide(L, false, &decision);
    return push_decision(L, &decision);
}

static int limiter_reset(lua_State *L)
{
    cr_limiter_reset(check_limiter(L));
    return 0;
}

static int limiter_info(lua_State *L)
{
    push_limit_table(L, cr_limiter_limit(check_limiter(L)));
    return 1;
}

/* close(), __close and __gc: safe to call any number of times. */
static int limiter_close(lua_State *L)
{
    limiter_box *box = check_self(L, limiter_tag);
    cr_limiter_free(box->limiter);
    box->limiter = NULL;
    return 0;
}

static int limiter_tostring(lua_State *L)
{
    const limiter_box *box = check_self(L, limiter_tag);
    if (box->limiter == NULL)
        lua_pushstring(L, LIMITER_METATABLE "(closed)");
    else
        push_limit_text(L, LIMITER_METATABLE, cr_limiter_limit(box->limiter), NULL);
    return 1;
}

static const luaL_Reg limiter_methods[] = {
    {"allow", limiter_allow}, {"check", limiter_check}, {"peek", limiter_peek},
    {"reset", limiter_reset}, {"info", limiter_info},   {"close", limiter_close},
    {NULL, NULL},
};

/* __close is only called by Lua 5.4; an extra field is harmless before. */
static const luaL_Reg limiter_metamethods[] = {
    {"__gc", limiter_close},
    {"__close", limiter_close},
    {"__tostring", limiter_tostring},
    {NULL, NULL},
};

/* ------------------------------------------------------------------------ */
/* cellrate.KeyedLimiter                                                     */

static int keyed_new(lua_State *L)
{
    options opts = {.capacity = CR_KEYED_DEFAULT_CAPACITY, .shared_mode = CR_SHARED_DEFAULT_MODE};
    read_rate(L, 1, &opts.args);
    read_options(L, 2,
                 OPTION_PERIOD | OPTION_BURST | OPTION_CAPACITY | OPTION_SHARED |
                     OPTION_SHARED_MODE | OPTION_CLOCK,
                 "opts must be a table with the fields period, burst, capacity, shared, "
                 "shared_mode, clock",
                 &opts);
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &opts.args);
    if (status != CR_OK)
        return raise_status(L, status);

    keyed_box *box = compat_newuserdata(L, sizeof *box);
    box->tag = keyed_tag;
    box->keyed = NULL;
    luaL_getmetatable(L, KEYED_METATABLE);
    lua_setmetatable(L, -2);
    if (opts.shared) {
        status = cr_keyed_open_shared(&box->keyed, &limit, opts.capacity, opts.shared,
                                      opts.shared_mode);
        if (status != CR_OK)
            return raise_shared(L, status, opts.shared);
        return 1;
    }
    status = cr_keyed_new(&box->keyed, &limit, opts.capacity);
    if (status != CR_OK)
        return raise_status(L, status);
    return 1;
}

static cr_keyed *check_keyed(lua_State *L)
{
    keyed_box *box = check_self(L, keyed_tag);
    if (box->keyed == NULL)
        raise_closed(L, KEYED_METATABLE);
    return box->keyed;
}

static const char *check_key(lua_State *L, int idx, size_t *len)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        raise_status(L, CR_E_KEY);
    return lua_tolstring(L, idx, len);
}

/* As limiter_decide, for a key. */
static bool keyed_decide(lua_State *L, bool commit, cr_decision *decision)
{
    const int top = lua_gettop(L);
    cr_keyed *keyed = check_keyed(L);
    size_t key_len = 0;
    const char *key = check_key(L, 2, &key_len);
    const int64_t cost = read_cost(L, 3, top);
    const int64_t now_ns = read_now(L, 4, top);
    bool allowed = false;
    const cr_status status =
        decision != NULL ? cr_keyed_check(keyed, key, key_len, now_ns, cost, commit, decision)
                         : cr_keyed_allow(keyed, key, key_len, now_ns, cost, &allowed);
    if (status != CR_OK)
        raise_status(L, status);
    return decision != NULL ? decision->allowed : allowed;
}

static int keyed_allow(lua_State *L)
{
    lua_pushboolean(L, keyed_decide(L, true, NULL));
    return 1;
}

static int keyed_check(lua_State *L)
{
    cr_decision decision;
    keyed_decide(L, true, &decision);
    return push_decision(L, &decision);
}

static int keyed_peek(lua_State *L)
{
    cr_decision decision;
    keyed_decide(L, false, &decision);
    return push_decision(L, &decision);
}

static int keyed_reset(lua_State *L)
{
    cr_keyed *keyed = check_keyed(L);
    size_t key_len = 0;
    const char *key = check_key(L, 2, &key_len);
    cr_keyed_reset(keyed, key, key_len);
    return 0;
}

static int keyed_len(lua_State *L)
{
    compat_pushint64(L, (int64_t)cr_keyed_len(check_keyed(L)));
    return 1;
}

static int keyed_info(lua_State *L)
{
    const cr_keyed *keyed = check_keyed(L);
    push_limit_table(L, cr_keyed_limit(keyed));
    compat_pushint64(L, cr_keyed_capacity(keyed));
    lua_setfield(L, -2, "capacity");
    compat_pushint64(L, (int64_t)cr_keyed_evictions(keyed));
    lua_setfield(L, -2, "evictions");
    return 1;
}

static int keyed_close(lua_State *L)
{
    keyed_box *box = check_self(L, keyed_tag);
    cr_keyed_free(box->keyed);
    box->keyed = NULL;
    return 0;
}

static int keyed_tostring(lua_State *L)
{
    const keyed_box *box = check_self(L, keyed_tag);
    if (box->keyed == NULL) {
        lua_pushstring(L, KEYED_METATABLE "(closed)");
    } else {
        const int64_t capacity = cr_keyed_capacity(box->keyed);
        push_limit_text(L, KEYED_METATABLE, cr_keyed_limit(box->keyed), &capacity);
    }
    return 1;
}

static const luaL_Reg keyed_methods[] = {
    {"allow", keyed_allow}, {"check", keyed_check}, {"peek", keyed_peek},
    {"reset", keyed_reset}, {"info", keyed_info},   {"close", keyed_close},
    {NULL, NULL},
};

static const luaL_Reg keyed_metamethods[] = {
    {"__gc", keyed_close},
    {"__close", keyed_close},
    {"__tostring", keyed_tostring},
    {"__len", keyed_len},
    {NULL, NULL},
};

/* ------------------------------------------------------------------------ */
/* The module                                                                */

static void register_type(lua_State *L, const char *name, const luaL_Reg *methods,
                          const luaL_Reg *metamethods)
{
    luaL_newmetatable(L, name);
    compat_setfuncs(L, metamethods, 0);
    lua_newtable(L);
    compat_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

static const luaL_Reg module_functions[] = {
    {"limiter", limiter_new},
    {"keyed", keyed_new},
    {NULL, NULL},
};

int luaopen_cellrate(lua_State *L)
{
    register_type(L, LIMITER_METATABLE, limiter_methods, limiter_metamethods);
    register_type(L, KEYED_METATABLE, keyed_methods, keyed_metamethods);
    lua_newtable(L);
    compat_setfuncs(L, module_functions, 0);
    lua_pushstring(L, cr_version());
    lua_setfield(L, -2, "_VERSION");
    return 1;
}
