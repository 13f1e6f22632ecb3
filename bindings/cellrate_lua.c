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
 *
 * One translation unit, as luv builds its module: this file holds what the
 * parts share (the types' names and tags, the layout of a Limiter or
 * KeyedLimiter and the checks of `self`, read by the stores, the header
 * fields, check_all and the FFI), then includes the parts in bindings/lua/,
 * one concept each, every part using only what comes before it. The parts
 * are never compiled alone: within one unit every function stays static and
 * the compiler inlines across parts, so the hot paths are those of one file.
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

/* A type's tag is the address of its name in this module. */
static const char limiter_tag[] = LIMITER_METATABLE;
static const char keyed_tag[] = KEYED_METATABLE;
static const char limit_tag[] = LIMIT_METATABLE;
static const char concurrency_tag[] = CONCURRENCY_METATABLE;
static const char slot_tag[] = SLOT_METATABLE;

/* A Limiter or a KeyedLimiter. */
typedef struct store_box {
    const char *tag;       /* limiter_tag or keyed_tag */
    cr_limiter *limiter;   /* a Limiter's store; NULL in a KeyedLimiter or once closed */
    cr_keyed *keyed;       /* a KeyedLimiter's store; NULL in a Limiter or once closed */
    cr_limit closed_limit; /* the limit it had when closed */
    int64_t capacity;      /* a KeyedLimiter's */
    int64_t max_cost;      /* with has_max_cost: checked again by each reconfigure */
    bool has_max_cost;
    int64_t max_debt; /* with has_max_debt: given, kept by each reconfigure */
    bool has_max_debt;
    bool shared; /* in a shared region (info().shared) */
} store_box;

static bool is_keyed(const store_box *box) { return box->tag == keyed_tag; }

/* The store's limit: the core's current one (a live change, made here or by
 * another process sharing its region, moves it), or the last once closed. */
static const cr_limit *box_limit(const store_box *box)
{
    return box->keyed     ? cr_keyed_limit(box->keyed)
           : box->limiter ? cr_limiter_limit(box->limiter)
                          : &box->closed_limit;
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

/* Each part uses only what the parts above it define. */
#include "lua/arguments.c"   /* errors, numbers, keys, rate, cost, now */
#include "lua/options.c"     /* the options table of every constructor */
#include "lua/priority.c"    /* priority classes: a store's, a decision's */
#include "lua/plans.c"       /* plans: a keyed table's, a decision's */
#include "lua/penalty.c"     /* the penalty box: a store's penalty option */
#include "lua/decision.c"    /* a decision's values; check_all */
#include "lua/limit_spec.c"  /* cellrate.limit_spec, a limit's text */
#include "lua/calendar.c"    /* cellrate.calendar_period */
#include "lua/headers.c"     /* HTTP header fields */
#include "lua/stats.c"       /* counters as tables */
#include "lua/stores.c"      /* Limiter and KeyedLimiter */
#include "lua/waits.c"       /* the wait plan, stepped by Lua code that sleeps */
#include "lua/follow.c"      /* lim:follow, keyed:follow, cellrate.read_signal */
#include "lua/concurrency.c" /* Concurrency and Slot */
#include "lua/inspect.c"     /* cellrate.inspect_region */
#include "lua/metrics.c"     /* cellrate.metrics */
#include "lua/redis.c"       /* the Redis store's protocol, for cellrate.redis */
#include "lua/batch.c"       /* the Redis store's batches, for cellrate.redis */
#include "lua/share.c"       /* the fleet share's member rules */
#include "lua/web.c"         /* the web rules: address keys, refusals, settlement */
#include "lua/ffi.c"         /* the C side of cellrate.ffi (LuaJIT) */
#include "lua/module.c"      /* luaopen_cellrate */
