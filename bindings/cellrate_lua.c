/*
 * The Lua face of cellrate (docs/design.md §6): `require "cellrate"`.
 *
 * Every function checks its arguments' types, calls the core and translates
 * the result; the core does all validation, defaults and clock reads. Errors
 * follow the OpenResty convention, by the class of the core's status
 * (cr_status_class_of): an argument mistake raises (luaL_error, so the
 * message carries the caller's position, then the core's cr_strerror text,
 * which starts with the parameter's name); a runtime failure (memory, a region
 * file that cannot be opened, a region's lock held past its bound) or a
 * region refusal returns nil, a message and the status's name as a code, from
 * every method alike.
 *
 * Limiter and KeyedLimiter are one userdata layout and one implementation
 * of each method, the key the only difference. Each type registers thin entry
 * points that pass its tag, a constant, so that the compiler keeps only the
 * type's own path.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cellrate.h"
#include "cellrate_lua_compat.h"

#define LIMITER_METATABLE "cellrate.Limiter"
#define KEYED_METATABLE "cellrate.KeyedLimiter"
#define LIMIT_METATABLE "cellrate.Limit"
#define CONCURRENCY_METATABLE "cellrate.Concurrency"
#define SLOT_METATABLE "cellrate.Slot"

#if defined(__GNUC__)
#define CELLRATE_LUA_EXPORT __attribute__((visibility("default")))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CELLRATE_LUA_EXPORT
#define ALWAYS_INLINE inline
#endif

CELLRATE_LUA_EXPORT int luaopen_cellrate(lua_State *L);

/* A type's tag is the address of its name in this module. */
static const char limiter_tag[] = LIMITER_METATABLE;
static const char keyed_tag[] = KEYED_METATABLE;
static const char limit_tag[] = LIMIT_METATABLE;
static const char concurrency_tag[] = CONCURRENCY_METATABLE;
static const char slot_tag[] = SLOT_METATABLE;

/* A Limiter or a KeyedLimiter. `limit` is a copy of the store's own. */
typedef struct store_box {
    const char *tag;     /* limiter_tag or keyed_tag */
    cr_limiter *limiter; /* a Limiter's store; NULL in a KeyedLimiter or once closed */
    cr_keyed *keyed;     /* a KeyedLimiter's store; NULL in a Limiter or once closed */
    cr_limit closed_limit; /* the limit it had when closed */
    int64_t capacity;      /* a KeyedLimiter's */
    int64_t max_cost;      /* with has_max_cost: checked again by each reconfigure */
    bool has_max_cost;
    bool shared;           /* in a shared region (info().shared) */
} store_box;

static bool is_keyed(const store_box *box)
{
    return box->tag == keyed_tag;
}

/* The store's limit: the core's current one (a live change, made here or by
 * another process sharing its region, moves it), or the last once closed. */
static const cr_limit *box_limit(const store_box *box)
{
    return box->keyed     ? cr_keyed_limit(box->keyed)
           : box->limiter ? cr_limiter_limit(box->limiter)
                          : &box->closed_limit;
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* The one raiser of argument mistakes: the core's message for `status`,
 * after the caller's position. */
static int raise_status(lua_State *L, cr_status status)
{
    return luaL_error(L, "%s", cr_strerror(status));
}

/* A runtime failure or a region refusal: nil, the core's message (with the
 * region's path and the system's reason where there is one), the code. */
static int push_failure(lua_State *L, cr_status status, const char *path)
{
    const int saved_errno = errno;
    lua_pushnil(L);
    if (status == CR_E_SHARED_IO || status == CR_E_SHARED_ACCESS)
        lua_pushfstring(L, "%s: %s (%s)", cr_strerror(status), path, strerror(saved_errno));
    else if (path != NULL)
        lua_pushfstring(L, "%s: %s", cr_strerror(status), path);
    else
        lua_pushstring(L, cr_strerror(status));
    lua_pushstring(L, cr_status_name(status));
    return 3;
}

/* A status other than CR_OK, by its class: an argument mistake raises; a
 * runtime failure or a region refusal returns nil, message, code. `path`: the
 * region's, or NULL. */
static int report_status(lua_State *L, cr_status status, const char *path)
{
    if (cr_status_class_of(status) == CR_STATUS_ARGUMENT)
        return raise_status(L, status);
    return push_failure(L, status, path);
}

/* A float with an integral value as int64, saturating beyond its range;
 * false for NaN or a fractional value. */
static bool number_to_int64(lua_Number value, int64_t *out)
{
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
    return number_to_int64(lua_tonumber(L, idx), out);
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
    OPTION_ALGORITHM = 64,
    OPTION_ON_CHANGE = 128,
    OPTION_MAX_COST = 256,
    OPTION_LEASE = 512,
    OPTION_PEAK = 1024,
};

/* What an options table may hold; absent fields keep their initial values. */
typedef struct {
    cr_limit_args args;
    int64_t capacity;
    bool capacity_given;
    int64_t lease_ns; /* 0: none */
    bool peak;
    const char *shared; /* path of a shared region, or NULL */
    int64_t shared_mode;
    bool shared_mode_given;
    cr_on_change on_change;
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
    {"algorithm", OPTION_ALGORITHM},
    {"on_change", OPTION_ON_CHANGE},
    {"max_cost", OPTION_MAX_COST},
    {"lease", OPTION_LEASE},
    {"peak", OPTION_PEAK},
};

/* Levenshtein distance between `a` and `b` (a name of option_names), or
 * OPTION_NAME_MAX when `a` is longer than any name could be misspelt to. */
#define OPTION_NAME_MAX 16
static size_t edit_distance(const char *a, const char *b)
{
    const size_t a_len = strlen(a), b_len = strlen(b);
    if (a_len >= OPTION_NAME_MAX || b_len >= OPTION_NAME_MAX)
        return OPTION_NAME_MAX;
    size_t row[OPTION_NAME_MAX];
    for (size_t j = 0; j <= b_len; j++)
        row[j] = j;
    for (size_t i = 1; i <= a_len; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b_len; j++) {
            const size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[b_len];
}

static enum option option_named(lua_State *L, int key_idx, unsigned accepted)
{
    if (lua_type(L, key_idx) == LUA_TSTRING) {
        const char *name = lua_tostring(L, key_idx);
        const char *closest = NULL;
        size_t closest_distance = 3; /* a suggestion is at most 2 edits away */
        for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
            if (!(accepted & option_names[i].option))
                continue;
            if (strcmp(name, option_names[i].name) == 0)
                return option_names[i].option;
            const size_t distance = edit_distance(name, option_names[i].name);
            if (distance < closest_distance) {
                closest = option_names[i].name;
                closest_distance = distance;
            }
        }
        if (closest != NULL)
            luaL_error(L, "unknown option '%s' (did you mean '%s'?)", name, closest);
        luaL_error(L, "unknown option '%s'", name);
    } else {
        luaL_error(L, "unknown option (a %s key)", luaL_typename(L, key_idx));
    }
    return 0;
}

/* "opts must be a table with the fields period, burst, ..." for `accepted`. */
static int raise_options_type(lua_State *L, unsigned accepted)
{
    int pieces = 1;
    lua_pushstring(L, "opts must be a table with the fields");
    for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
        if (accepted & option_names[i].option) {
            lua_pushstring(L, pieces == 1 ? " " : ", ");
            lua_pushstring(L, option_names[i].name);
            pieces += 2;
        }
    }
    lua_concat(L, pieces);
    return luaL_error(L, "%s", lua_tostring(L, -1));
}

/*
 * Reads the options table at `idx` (nil: none) into `opts`. An absent option
 * stays absent; the core applies the defaults. The `shared` string stays
 * alive while the table is on the stack.
 */
static void read_options(lua_State *L, int idx, unsigned accepted, options *opts)
{
    cr_limit_args *args = &opts->args;
    if (lua_isnoneornil(L, idx))
        return;
    if (lua_type(L, idx) != LUA_TTABLE)
        raise_options_type(L, accepted);
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
            opts->capacity_given = true;
            break;
        case OPTION_LEASE:
            if (lua_type(L, -1) != LUA_TNUMBER ||
                cr_lease_from_seconds(lua_tonumber(L, -1), &opts->lease_ns) != CR_OK)
                raise_status(L, CR_E_LEASE);
            break;
        case OPTION_PEAK:
            if (lua_type(L, -1) != LUA_TBOOLEAN)
                raise_status(L, CR_E_PEAK);
            opts->peak = lua_toboolean(L, -1);
            break;
        case OPTION_SHARED: {
            size_t path_len;
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_SHARED_PATH);
            opts->shared = lua_tolstring(L, -1, &path_len);
            if (strlen(opts->shared) != path_len) /* a NUL would cut the path short */
                raise_status(L, CR_E_SHARED_PATH);
            break;
        }
        case OPTION_SHARED_MODE:
            if (!to_int64(L, -1, &opts->shared_mode))
                raise_status(L, CR_E_SHARED_MODE);
            opts->shared_mode_given = true;
            break;
        case OPTION_CLOCK:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_CLOCK);
            args->clock = lua_tolstring(L, -1, &args->clock_len);
            break;
        case OPTION_ALGORITHM:
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_ALGORITHM);
            args->algorithm = lua_tolstring(L, -1, &args->algorithm_len);
            break;
        case OPTION_ON_CHANGE: {
            size_t len;
            if (lua_type(L, -1) != LUA_TSTRING)
                raise_status(L, CR_E_ON_CHANGE);
            const char *name = lua_tolstring(L, -1, &len);
            if (cr_parse_on_change(name, len, &opts->on_change) != CR_OK)
                raise_status(L, CR_E_ON_CHANGE);
            break;
        }
        case OPTION_MAX_COST:
            if (!to_int64(L, -1, &args->max_cost))
                raise_status(L, CR_E_MAX_COST);
            args->has_max_cost = true;
            break;
        }
        lua_pop(L, 1);
    }
}

/* The optional arguments are read only when the call passed them (`top`
 * is lua_gettop): most calls pass none, and each API call costs. */

/* cost: nil is CR_DEFAULT_COST. */
static int64_t read_cost(lua_State *L, int idx, int top)
{
    int64_t cost = CR_DEFAULT_COST;
    if (idx <= top && !lua_isnil(L, idx) && !to_int64(L, idx, &cost))
        raise_status(L, CR_E_COST);
    return cost;
}

/* A required count of units (charge's cost, take's max_cost: `status`
 * names it); nil or absent is a mistake too. */
static int64_t read_units(lua_State *L, int idx, int top, cr_status status)
{
    int64_t units;
    if (idx > top || !to_int64(L, idx, &units))
        raise_status(L, status);
    return units;
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

/* cr_limit_describe's text: the same as Python's repr(). `capacity` < 0:
 * none. */
static void push_limit_text(lua_State *L, const char *type_name, const cr_limit *limit,
                            int64_t capacity)
{
    char text[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit_describe(text, sizeof text, type_name, limit, capacity);
    lua_pushstring(L, text);
}

/*
 * The box at `idx` if it is one of the type `tag`, else NULL. A full userdata
 * of a box's size that starts with the tag's address is ours: no Lua code can
 * write a C address into a userdata. Cheaper on every call than fetching and
 * comparing metatables.
 */
static ALWAYS_INLINE store_box *box_at(lua_State *L, int idx, const char *tag)
{
    /* A light userdata has no length, a full one of another size is not a box. */
    store_box *box = lua_touserdata(L, idx);
    if (box != NULL && compat_rawlen(L, idx) == sizeof(store_box) && box->tag == tag)
        return box;
    return NULL;
}

/* The userdata `self` (argument 1) of a method or metamethod of the type `tag`. */
static ALWAYS_INLINE store_box *check_self(lua_State *L, const char *tag)
{
    store_box *box = box_at(L, 1, tag);
    if (box != NULL)
        return box;
    luaL_argerror(L, 1, lua_pushfstring(L, "%s expected, got %s", tag, luaL_typename(L, 1)));
    return NULL;
}

/* As check_self, and not closed. */
static ALWAYS_INLINE store_box *check_open(lua_State *L, const char *tag)
{
    store_box *box = check_self(L, tag);
    if (box->limiter == NULL && box->keyed == NULL)
        luaL_error(L, "%s is closed", tag);
    return box;
}

/* The core's words and the type given: Lua has one kind of string. */
static const char *check_key(lua_State *L, int idx, size_t *len)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "%s, not %s", cr_strerror(CR_E_KEY),
                   lua_isnone(L, idx) ? "nil" : luaL_typename(L, idx));
    return lua_tolstring(L, idx, len);
}

/* ------------------------------------------------------------------------ */
/* HTTP header fields                                                        */

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
    luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got %s", limit_tag,
                                          luaL_typename(L, idx)));
    return NULL;
}

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
    const cr_status status = cr_headers_format(fields, decision, cr_limit_window_ns(limit),
                                               name, name_len, legacy);
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
 * (lim, allowed, remaining, retry_after, reset_after [, name [, legacy]]). */
static void format_given_decision(lua_State *L, cr_headers *fields)
{
    const int top = lua_gettop(L);
    const cr_limit *limit = check_limit_of(L, 1);
    cr_decision decision;
    decision.allowed = lua_toboolean(L, 2);
    decision.limit = limit->burst;
    if (!to_int64(L, 3, &decision.remaining))
        raise_status(L, CR_E_HEADER_VALUE);
    decision.retry_after_ns = read_duration(L, 4);
    decision.reset_after_ns = read_duration(L, 5);
    format_fields(L, fields, limit, &decision, 6, top);
}

static int format_fields_and_push(lua_State *L, const store_box *box, const cr_decision *decision,
                                  int name_idx, int top)
{
    cr_headers fields;
    format_fields(L, &fields, box_limit(box), decision, name_idx, top);
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

/* ------------------------------------------------------------------------ */
/* Limiter and KeyedLimiter: one implementation, `tag` the type             */

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
    read_options(L, 2,
                 OPTION_PERIOD | OPTION_BURST | (keyed ? OPTION_CAPACITY : 0) | OPTION_SHARED |
                     OPTION_SHARED_MODE | OPTION_CLOCK | OPTION_ALGORITHM | OPTION_ON_CHANGE |
                     OPTION_MAX_COST,
                 &opts);
    if (opts.shared_mode_given && opts.shared == NULL)
        return raise_status(L, CR_E_SHARED_MODE_ALONE);
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
    box->shared = opts.shared != NULL;
    luaL_getmetatable(L, tag);
    lua_setmetatable(L, -2);
    status = keyed ? cr_keyed_open(&box->keyed, &limit, opts.capacity, opts.shared,
                                   opts.shared_mode, opts.on_change)
                   : cr_limiter_open(&box->limiter, &limit, opts.shared, opts.shared_mode,
                                     opts.on_change);
    if (status != CR_OK)
        return report_status(L, status, opts.shared);
    const cr_limit *replaced =
        keyed ? cr_keyed_replaced(box->keyed) : cr_limiter_replaced(box->limiter);
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

/* One decision into `decision`, or, with `decision` NULL (allow), only
 * whether it is admitted, into *allowed. Argument mistakes raise; a runtime
 * failure (a region's lock held past its bound) is returned for the caller
 * to report. */
static ALWAYS_INLINE cr_status decide(lua_State *L, const char *tag, bool commit,
                                      cr_decision *decision, bool *allowed)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    cr_status status;
    if (head.keyed)
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

/* allow(), check() and peek(): lim:allow(cost, now), keyed:allow(key, cost, now) */
static ALWAYS_INLINE int store_allow(lua_State *L, const char *tag)
{
    bool allowed = false;
    cr_status status = decide(L, tag, true, NULL, &allowed);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    lua_pushboolean(L, allowed);
    return 1;
}

static ALWAYS_INLINE int store_check(lua_State *L, const char *tag, bool commit)
{
    cr_decision decision;
    cr_status status = decide(L, tag, commit, &decision, NULL);
    return status != CR_OK ? push_failure(L, status, NULL) : push_decision(L, &decision);
}

/* lim:check_headers(cost, now, name, legacy), keyed:check_headers(key, cost,
 * now, name, legacy): check()'s four values, then the decision's header
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
    const cr_status status = decide(L, tag, true, &decision, NULL);
    if (status != CR_OK)
        return push_failure(L, status, NULL);
    push_decision(L, &decision);
    return 4 + format_fields_and_push(L, lua_touserdata(L, 1), &decision, name_idx, top);
}

/* A longest wait (the timeout of reserve and wait): nil is any wait;
 * else seconds, as cr_wait_from_seconds takes them. `invalid` names the
 * parameter. */
static int64_t read_wait_limit(lua_State *L, int idx, int top, cr_status invalid)
{
    int64_t max_wait_ns = CR_NEVER;
    if (idx > top || lua_isnil(L, idx))
        return max_wait_ns;
    if (lua_type(L, idx) != LUA_TNUMBER)
        raise_status(L, invalid);
    if (cr_wait_from_seconds(lua_tonumber(L, idx), invalid, &max_wait_ns) != CR_OK)
        raise_status(L, invalid);
    return max_wait_ns;
}

/* lim:reserve(cost, timeout, now), keyed:reserve(key, cost, timeout, now):
 * the delay in seconds (0: now), or nil when nothing was reserved. */
static int store_reserve(lua_State *L, const char *tag)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t max_wait_ns = read_wait_limit(L, head.next + 1, top, CR_E_TIMEOUT);
    const int64_t now_ns = read_now(L, head.next + 2, top);
    int64_t delay_ns = 0;
    bool reserved = false;
    const cr_status status =
        head.keyed ? cr_keyed_reserve(head.box->keyed, head.key, head.key_len, now_ns, cost,
                                      max_wait_ns, &reserved, &delay_ns)
                   : cr_limiter_reserve(head.box->limiter, now_ns, cost, max_wait_ns, &reserved,
                                        &delay_ns);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (!reserved)
        lua_pushnil(L);
    else
        lua_pushnumber(L, cr_ns_to_seconds(delay_ns));
    return 1;
}

/*
 * lim:wait(cost, timeout), keyed:wait(key, cost, timeout): blocks until the
 * units are admitted, at most `timeout` seconds (nil: any), as Python's
 * wait() (cr_wait, docs/design.md §9). The seconds slept (0: none), or
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
                          .key_len = head.key_len};
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

/* lim:refund(cost, now), keyed:refund(key, cost, now); with `anchor`,
 * lim:anchor(cost, now), keyed:anchor(key, cost, now) (units reserved
 * earlier that start only now: docs/design.md §9). */
static int store_refund(lua_State *L, const char *tag, bool anchor)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t cost = read_cost(L, head.next, top);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    const cr_status status =
        anchor ? (head.keyed ? cr_keyed_anchor(head.box->keyed, head.key, head.key_len, now_ns,
                                               cost)
                             : cr_limiter_anchor(head.box->limiter, now_ns, cost))
        : head.keyed ? cr_keyed_refund(head.box->keyed, head.key, head.key_len, now_ns, cost)
                     : cr_limiter_refund(head.box->limiter, now_ns, cost);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    return 0;
}

/* lim:charge(cost, now), keyed:charge(key, cost, now) (docs/design.md §9):
 * check()'s four values, then clipped (the debt met its bound); with `take`,
 * lim:take(max_cost, now), keyed:take(key, max_cost, now): the units taken. */
static int store_after_fact(lua_State *L, const char *tag, bool take)
{
    const int top = lua_gettop(L);
    const call_head head = read_call_head(L, tag);
    const int64_t units = read_units(L, head.next, top, take ? CR_E_MAX_COST : CR_E_COST);
    const int64_t now_ns = read_now(L, head.next + 1, top);
    cr_decision decision;
    int64_t taken = 0;
    cr_status status;
    if (take)
        status = head.keyed
                     ? cr_keyed_take(head.box->keyed, head.key, head.key_len, now_ns, units, &taken)
                     : cr_limiter_take(head.box->limiter, now_ns, units, &taken);
    else
        status = head.keyed ? cr_keyed_charge(head.box->keyed, head.key, head.key_len, now_ns,
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

#define STATS_FIELD_(name)                                                                  \
    compat_pushint64(L, (int64_t)stats.name);                                               \
    lua_setfield(L, -2, #name);

/* lim:stats(), keyed:stats(): the counters, a table of integers. */
static int store_stats(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    cr_stats stats;
    if (is_keyed(box))
        cr_keyed_stats(box->keyed, &stats);
    else
        cr_limiter_stats(box->limiter, &stats);
    lua_createtable(L, 0, 7);
    CR_STATS_LIST(STATS_FIELD_)
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

/* lim:_would_refuse(cost): a dry run let a refusal of `cost` units through. */
static int store_would_refuse(lua_State *L, const char *tag)
{
    const store_box *box = check_open(L, tag);
    const int64_t cost = (int64_t)luaL_checkinteger(L, 2);
    if (is_keyed(box))
        cr_keyed_would_refuse(box->keyed, cost);
    else
        cr_limiter_would_refuse(box->limiter, cost);
    return 0;
}

/* lim:reconfigure(rate [, opts [, now]]) and keyed:reconfigure(...): the limit
 * changes live, keeping what was used (docs/design.md §4); opts: period,
 * burst, algorithm (the store's when absent); max_cost stays the store's. */
static int store_reconfigure(lua_State *L, const char *tag)
{
    const bool keyed = tag == keyed_tag;
    store_box *box = check_open(L, tag);
    const int top = lua_gettop(L);
    options opts = {.capacity = CR_KEYED_DEFAULT_CAPACITY, .shared_mode = CR_SHARED_DEFAULT_MODE};
    read_rate(L, 2, &opts.args);
    read_options(L, 3, OPTION_PERIOD | OPTION_BURST | OPTION_ALGORITHM, &opts);
    if (opts.args.algorithm == NULL) {
        opts.args.algorithm = cr_algorithm_name(box_limit(box)->algorithm);
        opts.args.algorithm_len = strlen(opts.args.algorithm);
    }
    opts.args.max_cost = box->max_cost;
    opts.args.has_max_cost = box->has_max_cost;
    const int64_t now_ns = read_now(L, 4, top);
    cr_limit limit;
    cr_status status = cr_limit_init(&limit, &opts.args);
    if (status == CR_OK)
        status = keyed ? cr_keyed_reconfigure(box->keyed, &limit, now_ns)
                       : cr_limiter_reconfigure(box->limiter, &limit, now_ns);
    if (status != CR_OK)
        return raise_status(L, status);
    return 0;
}

/* rate, period, burst, clock, algorithm, emission_ns, tolerance_ns; a KeyedLimiter's
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

/* ------------------------------------------------------------------------ */
/* Following a provider (docs/design.md §18)                                 */

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
 * now, and for follow pending and share. */
typedef struct {
    int64_t status;
    cr_quota quota;
    int64_t pending;
    double share;
    int64_t now_ns;
} follow_args;

static void read_follow_args(lua_State *L, int status_idx, int opts_idx, bool store,
                             follow_args *args)
{
    args->status = 0;
    args->quota = CR_QUOTA_REQUESTS;
    args->pending = 0;
    args->share = 1.0;
    args->now_ns = CR_CLOCK;
    if (!lua_isnoneornil(L, status_idx) && !to_int64(L, status_idx, &args->status))
        raise_status(L, CR_E_STATUS_CODE);
    if (lua_isnoneornil(L, opts_idx))
        return;
    if (lua_type(L, opts_idx) != LUA_TTABLE)
        luaL_error(L, store ? "opts must be a table with the fields quota, pending, share, now"
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
 * ('requests' or 'tokens'), opts.pending, opts.share, opts.now. */
static int store_follow(lua_State *L, const char *tag)
{
    const call_head head = read_call_head(L, tag);
    follow_args args;
    read_follow_args(L, head.next + 1, head.next + 2, true, &args);
    size_t count;
    const cr_field *fields = read_fields(L, head.next, &count);
    cr_signal signal;
    cr_status status = cr_signal_read(&signal, fields, count, args.status, args.quota, CR_CLOCK);
    bool pulled = false;
    if (status == CR_OK)
        status = head.keyed ? cr_keyed_follow(head.box->keyed, head.key, head.key_len, args.now_ns,
                                              &signal, args.pending, args.share, &pulled)
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
    read_follow_args(L, 2, 3, false, &args);
    size_t count;
    const cr_field *fields = read_fields(L, 1, &count);
    cr_signal signal;
    const cr_status status =
        cr_signal_read(&signal, fields, count, args.status, args.quota, args.now_ns);
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

/*
 * A type's constructor, methods and metamethods: entry points that pass the
 * type's tag to the one implementation above.
 */
#define STORE_TYPE(type, tag)                                                               \
    static int type##_new(lua_State *L) { return store_new(L, tag); }                       \
    static int type##_allow(lua_State *L) { return store_allow(L, tag); }                   \
    static int type##_check(lua_State *L) { return store_check(L, tag, true); }             \
    static int type##_peek(lua_State *L) { return store_check(L, tag, false); }             \
    static int type##_check_headers(lua_State *L) { return store_check_headers(L, tag); }   \
    static int type##_reserve(lua_State *L) { return store_reserve(L, tag); }               \
    static int type##_wait(lua_State *L) { return store_wait(L, tag); }                     \
    static int type##_refund(lua_State *L) { return store_refund(L, tag, false); }          \
    static int type##_anchor(lua_State *L) { return store_refund(L, tag, true); }           \
    static int type##_charge(lua_State *L) { return store_after_fact(L, tag, false); }      \
    static int type##_take(lua_State *L) { return store_after_fact(L, tag, true); }         \
    static int type##_reset(lua_State *L) { return store_reset(L, tag); }                   \
    static int type##_reconfigure(lua_State *L) { return store_reconfigure(L, tag); }       \
    static int type##_info(lua_State *L) { return store_info(L, tag); }                     \
    static int type##_stats(lua_State *L) { return store_stats(L, tag); }                   \
    static int type##_reset_stats(lua_State *L) { return store_reset_stats(L, tag); }       \
    static int type##_would_refuse(lua_State *L) { return store_would_refuse(L, tag); }     \
    static int type##_close(lua_State *L) { return store_close(L, tag); }                   \
    static int type##_tostring(lua_State *L) { return store_tostring(L, tag); }             \
    static const luaL_Reg type##_methods[] = {                                              \
        {"allow", type##_allow},     {"check", type##_check},   {"peek", type##_peek},      \
        {"reserve", type##_reserve}, {"wait", type##_wait},     {"refund", type##_refund},  \
        {"anchor", type##_anchor},   {"reset", type##_reset},   {"info", type##_info},      \
        {"close", type##_close},     {"reconfigure", type##_reconfigure},                   \
        {"check_headers", type##_check_headers}, {"charge", type##_charge},                   \
        {"take", type##_take},       {"stats", type##_stats},   {"reset_stats", type##_reset_stats}, \
        {"_would_refuse", type##_would_refuse},                                             \
        {NULL, NULL},                                                                       \
    };                                                                                      \
    /* __close is only called by Lua 5.4; an extra field is harmless before. */             \
    static const luaL_Reg type##_metamethods[] = {                                          \
        {"__gc", type##_close},                                                             \
        {"__close", type##_close},                                                          \
        {"__tostring", type##_tostring},                                                    \
        {NULL, NULL},                                                                       \
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

/* ------------------------------------------------------------------------ */
/* Concurrency and Slot (docs/design.md §15)                                 */

typedef struct {
    cr_gauge *gauge; /* NULL once closed */
    int64_t limit;
    bool shared; /* in a shared region (info().shared) */
} concurrency_box;

/* A holding: the receipt c:release(slot) hands back to the limit that gave
 * it (`owner`; a slot of another limit releases nothing). */
typedef struct {
    const concurrency_box *owner;
    cr_holding holding;
} slot_box;

static concurrency_box *check_concurrency(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    if (box->gauge == NULL)
        luaL_error(L, "%s is closed", CONCURRENCY_METATABLE);
    return box;
}

/* cellrate.concurrency(limit [, opts]): opts capacity, shared, shared_mode,
 * lease, peak. The object, or nil, a message and a code for a region it cannot use. */
static int concurrency_new(lua_State *L)
{
    int64_t limit;
    if (!to_int64(L, 1, &limit))
        return raise_status(L, CR_E_LIMIT);
    options opts = {.shared_mode = CR_SHARED_DEFAULT_MODE};
    read_options(L, 2,
                 OPTION_CAPACITY | OPTION_SHARED | OPTION_SHARED_MODE | OPTION_LEASE | OPTION_PEAK,
                 &opts);
    if (opts.shared_mode_given && opts.shared == NULL)
        return raise_status(L, CR_E_SHARED_MODE_ALONE);
    concurrency_box *box = compat_newuserdata(L, sizeof *box);
    memset(box, 0, sizeof *box);
    luaL_getmetatable(L, CONCURRENCY_METATABLE);
    lua_setmetatable(L, -2);
    cr_status status = cr_gauge_open(&box->gauge, limit, opts.capacity_given, opts.capacity,
                                     opts.lease_ns, opts.peak, opts.shared, opts.shared_mode);
    if (status != CR_OK)
        return report_status(L, status, opts.shared);
    box->limit = limit;
    box->shared = opts.shared != NULL;
    return 1;
}

/* The key of a call: nil for a limit without capacity (NULL to the core). */
static const char *optional_key(lua_State *L, int idx, size_t *len)
{
    *len = 0;
    return lua_isnoneornil(L, idx) ? NULL : check_key(L, idx, len);
}

/* c:acquire([key [, cost]]): a slot, or nil and "rejected" when the units
 * are not free (nil, message, code for a region's lock held too long). */
static int concurrency_acquire(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    size_t key_len;
    const char *key = optional_key(L, 2, &key_len);
    int64_t cost = CR_DEFAULT_COST;
    if (!lua_isnoneornil(L, 3) && !to_int64(L, 3, &cost))
        return raise_status(L, CR_E_HOLD_COST);
    slot_box *slot = compat_newuserdata(L, sizeof *slot);
    memset(slot, 0, sizeof *slot);
    bool acquired;
    cr_status status = cr_gauge_acquire(box->gauge, key, key_len, cost, &acquired, &slot->holding);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    if (!acquired) {
        lua_pushnil(L);
        lua_pushliteral(L, "rejected");
        return 2;
    }
    slot->owner = box;
    luaL_getmetatable(L, SLOT_METATABLE);
    lua_setmetatable(L, -2);
    return 1;
}

/* c:release(slot): true when its units came back; false when they had
 * already (released before, reclaimed, or a slot of another limit). */
static int concurrency_release(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    slot_box *slot = luaL_testudata(L, 2, SLOT_METATABLE);
    if (slot == NULL)
        return raise_status(L, CR_E_SLOT);
    lua_pushboolean(L, slot->owner == box && cr_gauge_release(box->gauge, &slot->holding) > 0);
    return 1;
}

/* c:in_flight([key]): units held now. */
static int concurrency_in_flight(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    size_t key_len;
    const char *key = optional_key(L, 2, &key_len);
    int64_t in_flight;
    cr_status status = cr_gauge_in_flight(box->gauge, key, key_len, &in_flight);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    compat_pushint64(L, in_flight);
    return 1;
}

/* c:info(): { limit =, capacity = (nil: no keys), lease = (nil: none), shared = (true in a
 * shared region), peak = (true when tracked) }. */
static int concurrency_info(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    lua_createtable(L, 0, 4);
    compat_pushint64(L, box->limit);
    lua_setfield(L, -2, "limit");
    if (cr_gauge_capacity(box->gauge) > 0) {
        compat_pushint64(L, cr_gauge_capacity(box->gauge));
        lua_setfield(L, -2, "capacity");
    }
    if (cr_gauge_lease_ns(box->gauge) > 0) {
        lua_pushnumber(L, cr_ns_to_seconds(cr_gauge_lease_ns(box->gauge)));
        lua_setfield(L, -2, "lease");
    }
    if (box->shared) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "shared");
    }
    if (cr_gauge_tracks_peak(box->gauge)) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "peak");
    }
    return 1;
}

/* A concurrency limit's counters, a table of integers (peak nil when not tracked). */
static void push_gauge_stats(lua_State *L, const cr_gauge_stats *counts)
{
    const cr_gauge_stats stats = *counts;
    lua_createtable(L, 0, 9);
    CR_GAUGE_STATS_LIST(STATS_FIELD_)
    if (!stats.peak_tracked) {
        lua_pushnil(L);
        lua_setfield(L, -2, "peak");
    }
}

/* c:stats(): the counters. */
static int concurrency_stats(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    cr_gauge_stats stats;
    cr_gauge_stats_read(box->gauge, &stats);
    push_gauge_stats(L, &stats);
    return 1;
}

/* c:reset_stats(): true, or nil, message, code. */
static int concurrency_reset_stats(lua_State *L)
{
    concurrency_box *box = check_concurrency(L);
    cr_status status = cr_gauge_reset_stats(box->gauge);
    if (status != CR_OK)
        return report_status(L, status, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

static int concurrency_close(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    cr_gauge_free(box->gauge);
    box->gauge = NULL;
    return 0;
}

static int concurrency_tostring(lua_State *L)
{
    concurrency_box *box = luaL_checkudata(L, 1, CONCURRENCY_METATABLE);
    if (box->gauge == NULL) {
        lua_pushfstring(L, "%s(closed)", CONCURRENCY_METATABLE);
        return 1;
    }
    char text[128];
    cr_gauge_describe(text, sizeof text, box->limit, cr_gauge_capacity(box->gauge),
                      cr_gauge_lease_ns(box->gauge), cr_gauge_tracks_peak(box->gauge));
    lua_pushstring(L, text);
    return 1;
}

static int slot_tostring(lua_State *L)
{
    slot_box *slot = luaL_checkudata(L, 1, SLOT_METATABLE);
    lua_pushfstring(L, "%s(cost=%d)", SLOT_METATABLE, (int)slot->holding.cost);
    return 1;
}

static const luaL_Reg concurrency_methods[] = {
    {"acquire", concurrency_acquire}, {"release", concurrency_release},
    {"in_flight", concurrency_in_flight}, {"info", concurrency_info},
    {"stats", concurrency_stats},         {"reset_stats", concurrency_reset_stats},
    {"close", concurrency_close},         {NULL, NULL},
};

static const luaL_Reg concurrency_metamethods[] = {
    {"__gc", concurrency_close},
    {"__close", concurrency_close},
    {"__tostring", concurrency_tostring},
    {NULL, NULL},
};

static const luaL_Reg slot_metamethods[] = {
    {"__tostring", slot_tostring},
    {NULL, NULL},
};

/* ------------------------------------------------------------------------ */
/* cellrate.limit_spec and cellrate.check_policy_name                        */

/*
 * cellrate.limit_spec(rate [, opts]): the limit a limiter of these arguments
 * would have (opts: period, burst, algorithm), validated by the core and
 * refused in its words, with no store made: fields rate, period, burst,
 * algorithm, window (seconds), emission_ns, tolerance_ns; __tostring as
 * Python's repr(cellrate.Limit(...)); == by those parameters.
 */
static int limit_spec_new(lua_State *L)
{
    options opts;
    memset(&opts, 0, sizeof opts);
    read_rate(L, 1, &opts.args);
    read_options(L, 2, OPTION_PERIOD | OPTION_BURST | OPTION_ALGORITHM, &opts);
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
                           a->emission_ns == b->emission_ns &&
                           a->tolerance_ns == b->tolerance_ns);
    return 1;
}

static const luaL_Reg limit_metamethods[] = {
    {"__index", limit_index},
    {"__tostring", limit_tostring},
    {"__eq", limit_eq},
    {NULL, NULL},
};

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

/* ------------------------------------------------------------------------ */
/* cellrate.check_all                                                        */

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
 * reset_after, index (of the item whose decision it is): `items` an array of limiters and {keyed, key} pairs, decided
 * as one (docs/design.md §8). The keys stay alive in `items`, on the stack.
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
        } else if (lua_type(L, -1) == LUA_TTABLE && compat_rawlen(L, -1) == 2) {
            lua_rawgeti(L, -1, 1);
            box = open_box_at(L, -1, keyed_tag);
            lua_pop(L, 1);
            if (box == NULL)
                return raise_status(L, CR_E_ITEMS);
            lua_rawgeti(L, -1, 2);
            items[i].key = check_key(L, -1, &items[i].key_len);
            lua_pop(L, 1);
            items[i].keyed = box->keyed;
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

/* ------------------------------------------------------------------------ */
/* LuaJIT's FFI                                                              */

/*
 * check and check_headers without the Lua API, for lua/cellrate/ffi.lua:
 * LuaJIT compiles an FFI call into the trace of its caller, where a Lua C
 * function ends the trace; in nginx's access phase that is most of the cost
 * of the call (docs/design.md §12). The same conversions and core calls as
 * store_check and store_check_headers. `payload` is a Limiter's or
 * KeyedLimiter's (LuaJIT passes a userdata's payload to a void * parameter),
 * its metatable checked by the caller; `key` NULL for a Limiter; `name` NULL
 * for the core's default. CR_OK, or the status of a mistake (the name, the cost, the
 * time: nothing decided) or of a region's lock; FFI_CLOSED for a closed store.
 */
#define FFI_CLOSED (-1)

static int ffi_check(void *payload, const char *key, size_t key_len, double cost, bool has_now,
                     double now, cr_decision *decision)
{
    const store_box *box = payload;
    if (box->limiter == NULL && box->keyed == NULL)
        return FFI_CLOSED;
    int64_t cost_units = 0;
    if (!number_to_int64(cost, &cost_units))
        return CR_E_COST;
    int64_t now_ns = CR_CLOCK;
    if (has_now) {
        const cr_status status = cr_seconds_to_ns(now, &now_ns);
        if (status != CR_OK)
            return status;
    }
    return is_keyed(box)
               ? cr_keyed_check(box->keyed, key, key_len, now_ns, cost_units, true, decision)
               : cr_limiter_check(box->limiter, now_ns, cost_units, true, decision);
}

/* `every`: the fields of every decision, as check_headers gives them; false:
 * of a refusal only (count 0 for an admission), as cellrate.nginx sets them
 * by default. A name is checked before deciding when an admission will be
 * formatted; otherwise a bad one can only fail a refusal, which spent
 * nothing. */
static int ffi_check_headers(void *payload, const char *key, size_t key_len, double cost,
                             bool has_now, double now, const char *name, size_t name_len,
                             bool legacy, bool every, cr_decision *decision, cr_headers *fields)
{
    if (every && cr_headers_check_name(name, name_len) != CR_OK)
        return CR_E_HEADER_NAME;
    const int status = ffi_check(payload, key, key_len, cost, has_now, now, decision);
    if (status != CR_OK)
        return status;
    if (decision->allowed && !every) {
        fields->count = 0;
        return CR_OK;
    }
    const store_box *box = payload;
    return cr_headers_format(fields, decision, cr_limit_window_ns(box_limit(box)), name, name_len,
                             legacy);
}

/* The layout of ffi_api: bumped on any change to its members, their order or
 * their types, and to what a function takes or returns. lua/cellrate/ffi.lua
 * carries the number of the layout it declares and refuses another, so a
 * stale copy never calls through a pointer of another type. */
#define FFI_API_LAYOUT 1

/* What lua/cellrate/ffi.lua declares with ffi.cdef, in this order; the sizes
 * let it check its declarations of the core's structs against these. The
 * layout number comes first, where every layout has it. */
typedef struct {
    int layout;
    int (*check)(void *payload, const char *key, size_t key_len, double cost, bool has_now,
                 double now, cr_decision *decision);
    int (*check_headers)(void *payload, const char *key, size_t key_len, double cost,
                         bool has_now, double now, const char *name, size_t name_len,
                         bool legacy, bool every, cr_decision *decision, cr_headers *fields);
    double (*ns_to_seconds)(int64_t ns);
    const char *(*strerror)(cr_status status);
    const char *(*status_name)(cr_status status);
    size_t decision_size;
    size_t headers_size;
    int closed;
} ffi_api;

static const ffi_api the_ffi_api = {
    FFI_API_LAYOUT, ffi_check,      ffi_check_headers,   cr_ns_to_seconds,   cr_strerror,
    cr_status_name, sizeof(cr_decision), sizeof(cr_headers), FFI_CLOSED,
};

/* ------------------------------------------------------------------------ */
/* The module                                                                */

static void register_type(lua_State *L, const char *tag, const luaL_Reg *methods,
                          const luaL_Reg *metamethods)
{
    luaL_newmetatable(L, tag);
    compat_setfuncs(L, metamethods, 0);
    lua_newtable(L);
    compat_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
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

/* cellrate._check_hold(limit, key, cost, lease): raises what a concurrency
 * limit would of its limit and lease and of a holding's key (nil: none) and
 * cost (nil: 1), in the core's words (the Redis store holds units
 * elsewhere); the lease as decimal ns, or nil when `lease` is nil. */
static int check_hold(lua_State *L)
{
    int64_t limit, cost = CR_DEFAULT_COST, lease_ns;
    if (!to_int64(L, 1, &limit))
        return raise_status(L, CR_E_LIMIT);
    size_t key_len;
    (void)optional_key(L, 2, &key_len);
    if (!lua_isnoneornil(L, 3) && !to_int64(L, 3, &cost))
        return raise_status(L, CR_E_HOLD_COST);
    const cr_status status = cr_gauge_check(limit, cost);
    if (status != CR_OK)
        return raise_status(L, status);
    if (lua_isnoneornil(L, 4))
        return 0;
    if (lua_type(L, 4) != LUA_TNUMBER ||
        cr_lease_from_seconds(lua_tonumber(L, 4), &lease_ns) != CR_OK)
        return raise_status(L, CR_E_LEASE);
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, lease_ns);
    lua_pushstring(L, text);
    return 1;
}

/* cellrate.inspect_region(path): a table of what the region file holds, read
 * without changing it (cr_inspect_region), or nil, message, code. */
static int inspect_region(lua_State *L)
{
    size_t path_len;
    const char *path = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &path_len) : NULL;
    if (path == NULL || strlen(path) != path_len)
        return raise_status(L, CR_E_SHARED_PATH);
    cr_region_info info;
    const cr_status status = cr_inspect_region(path, &info);
    if (status != CR_OK)
        return report_status(L, status, path);
    const bool rate = info.algorithm != NULL;
    lua_createtable(L, 0, 16);
    compat_pushint64(L, info.layout_version);
    lua_setfield(L, -2, "layout_version");
    lua_pushstring(L, info.kind);
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, info.description);
    lua_setfield(L, -2, "limit");
    if (rate) {
        lua_pushstring(L, info.algorithm);
        lua_setfield(L, -2, "algorithm");
        lua_pushnumber(L, info.limit.rate);
        lua_setfield(L, -2, "rate");
        lua_pushnumber(L, info.limit.period_s);
        lua_setfield(L, -2, "period");
        compat_pushint64(L, info.limit.burst);
        lua_setfield(L, -2, "burst");
    } else {
        compat_pushint64(L, info.max_in_flight);
        lua_setfield(L, -2, "max_in_flight");
        lua_pushboolean(L, info.gauge_stats.peak_tracked);
        lua_setfield(L, -2, "peak");
    }
    if (info.lease_ns > 0) {
        lua_pushnumber(L, cr_ns_to_seconds(info.lease_ns));
        lua_setfield(L, -2, "lease");
    }
    if (info.capacity > 0) {
        compat_pushint64(L, info.capacity);
        lua_setfield(L, -2, "capacity");
    }
    compat_pushint64(L, (int64_t)info.live_keys);
    lua_setfield(L, -2, "live_keys");
    compat_pushint64(L, (int64_t)info.generation);
    lua_setfield(L, -2, "generation");
    compat_pushint64(L, (int64_t)info.size);
    lua_setfield(L, -2, "size");
    lua_pushboolean(L, info.this_boot);
    lua_setfield(L, -2, "this_boot");
    if (rate) {
        const cr_stats stats = info.stats;
        lua_createtable(L, 0, 7);
        CR_STATS_LIST(STATS_FIELD_)
    } else {
        push_gauge_stats(L, &info.gauge_stats);
    }
    lua_setfield(L, -2, "stats");
    return 1;
}

/* cellrate.metrics(): the metrics every exporter publishes (cr_metrics), an
 * array of tables of the table's fields: labels an array of { name,
 * attribute }, label one (nil: none), samples an array of { field, value }
 * (value nil: none). */
static void push_metric_label(lua_State *L, const cr_metric_label *label)
{
    lua_createtable(L, 0, 2);
    lua_pushstring(L, label->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, label->attribute);
    lua_setfield(L, -2, "attribute");
}

static int metrics(lua_State *L)
{
    size_t count;
    const cr_metric *list = cr_metrics(&count);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        const cr_metric *metric = &list[i];
        lua_createtable(L, 0, 10);
        const char *const text[][2] = {
            {"name", metric->name},       {"prometheus_name", metric->prometheus_name},
            {"help", metric->help},       {"type", metric->type},
            {"instrument", metric->instrument}, {"unit", metric->unit},
            {"stats", metric->stats},
        };
        for (size_t t = 0; t < sizeof text / sizeof text[0]; t++) {
            lua_pushstring(L, text[t][1]);
            lua_setfield(L, -2, text[t][0]);
        }
        lua_createtable(L, (int)metric->label_count, 0);
        for (size_t l = 0; l < metric->label_count; l++) {
            push_metric_label(L, &metric->labels[l]);
            lua_rawseti(L, -2, (int)l + 1);
        }
        lua_setfield(L, -2, "labels");
        if (metric->label.name != NULL) {
            push_metric_label(L, &metric->label);
            lua_setfield(L, -2, "label");
        }
        lua_createtable(L, (int)metric->sample_count, 0);
        for (size_t s = 0; s < metric->sample_count; s++) {
            lua_createtable(L, 0, 2);
            lua_pushstring(L, metric->samples[s].field);
            lua_setfield(L, -2, "field");
            lua_pushstring(L, metric->samples[s].value); /* NULL: nil */
            lua_setfield(L, -2, "value");
            lua_rawseti(L, -2, (int)s + 1);
        }
        lua_setfield(L, -2, "samples");
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

static const luaL_Reg module_functions[] = {
    {"limiter", limiter_new},
    {"keyed", keyed_new},
    {"concurrency", concurrency_new},
    {"check_all", module_check_all},
    {"limit_spec", limit_spec_new},
    {"check_policy_name", check_policy_name},
    {"headers", headers},
    {"inspect_region", inspect_region},
    {"metrics", metrics},
    {"header_fields", header_fields},
    {"read_signal", read_signal},
    {"_check_request", check_request},
    {"_check_hold", check_hold},
    {NULL, NULL},
};

int luaopen_cellrate(lua_State *L)
{
    register_type(L, limiter_tag, limiter_methods, limiter_metamethods);
    lua_pop(L, 1);
    register_type(L, keyed_tag, keyed_methods, keyed_metamethods);
    compat_setfuncs(L, keyed_length, 0);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, keyed_clear);
    lua_setfield(L, -2, "clear");
    lua_pushcfunction(L, keyed_follow);
    lua_setfield(L, -2, "follow");
    lua_pop(L, 1);
    lua_pop(L, 1);
    luaL_getmetatable(L, limiter_tag);
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, limiter_follow);
    lua_setfield(L, -2, "follow");
    lua_pop(L, 2);
    luaL_newmetatable(L, limit_tag);
    compat_setfuncs(L, limit_metamethods, 0);
    lua_pop(L, 1);
    register_type(L, concurrency_tag, concurrency_methods, concurrency_metamethods);
    lua_pop(L, 1);
    luaL_newmetatable(L, slot_tag);
    compat_setfuncs(L, slot_metamethods, 0);
    lua_pop(L, 1);
    lua_newtable(L);
    compat_setfuncs(L, module_functions, 0);
    lua_pushstring(L, cr_version());
    lua_setfield(L, -2, "_VERSION");
    /* A pointer, not a symbol: the module exports luaopen_cellrate alone. */
    lua_pushlightuserdata(L, (void *)&the_ffi_api);
    lua_setfield(L, -2, "_ffi_api");
    return 1;
}
