/*
 * cellrate/plans.h: plans, a limit per key (docs/design/plans.md).
 *
 * A part of cellrate.h (include <cellrate.h>). A keyed table may hold named
 * plans, each a whole limit; its own limit is the plan "default" (index 0).
 * Every decision names the plan of its key; a key decided under another plan
 * than last time carries what it used into the new plan (cr_carry: units
 * used, never a fresh allowance), lazily, in the same compare-and-swap as the
 * decision that finds it. A key's plan lives in its slot's fingerprint word
 * (4 bits): no second cache line, no more bytes per key.
 */
#ifndef CELLRATE_PLANS_H
#define CELLRATE_PLANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decision.h"
#include "stores.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* Plans of a table, "default" included: a key's plan is 4 bits of its slot. */
#define CR_PLANS_MAX 16
/* A plan's name: 1 to CR_PLAN_NAME_MAX - 1 bytes, NUL-terminated here. */
#define CR_PLAN_NAME_MAX 32
/* The index of the plan "default": the table's own limit. */
#define CR_PLAN_DEFAULT 0

/* A plan as a caller gives it: a name (need not be NUL-terminated) and its
 * limit (validated, as cr_limit_init makes one). */
typedef struct cr_plan_arg {
    const char *name;
    size_t name_len;
    const cr_limit *limit;
} cr_plan_arg;

/* A table of plans: "default" at index 0, the others sorted by name (the
 * same index for a name in every face, whatever order a mapping gives). */
typedef struct cr_plan_table {
    int32_t count; /* plans, "default" included: 1 to CR_PLANS_MAX */
    char names[CR_PLANS_MAX][CR_PLAN_NAME_MAX];
    cr_limit limits[CR_PLANS_MAX];
} cr_plan_table;

/*
 * Makes `table` of the default limit and the `count` plans of `plans`. Every
 * plan takes the default's priority classes (the classes are the table's; a
 * reserve in ns of each plan's own tolerance). Refused, `table` untouched:
 * CR_E_PLANS unless 1 <= count <= CR_PLANS_MAX - 1, every name of 1 to
 * CR_PLAN_NAME_MAX - 1 bytes without NUL, not "default", each once;
 * CR_E_PLANS_ALGORITHM unless every plan has the default's algorithm.
 */
cr_status cr_plans_set(cr_plan_table *table, const cr_limit *default_limit,
                       const cr_plan_arg *plans, size_t count);

/* The index in `table` of the plan `name` (need not be NUL-terminated);
 * "default" is CR_PLAN_DEFAULT in every table, and `table` NULL holds only
 * it. CR_E_PLAN when no plan is so named. */
cr_status cr_plan_find(const cr_plan_table *table, const char *name, size_t len, int32_t *index);

/*
 * Where a plan is taken, above the stores (the web policy, the decorator, the
 * nginx helper): plans are a keyed limit's, and several limits decided as one
 * take no plan (a refusal of one must spend nothing of the others, and each
 * limit has its own table). `count` limits decide a request (a list, the parts
 * of a rate string), `keyed` whether they have keys, `named` whether the
 * request names a plan (false: a plan table is given to them).
 * CR_E_PLAN_SEVERAL when a plan is named for count > 1 limits; else, without
 * keys, CR_E_PLAN_KEYED (named) or CR_E_PLANS_KEYED (a table); else CR_OK.
 */
cr_status cr_plan_items(size_t count, bool keyed, bool named);

/* cr_keyed_open with the plans of `table` (copied; NULL: only "default",
 * `limit` then its limit, else ignored); CR_E_PLANS for a table
 * cr_plans_set did not make. With a `path`, the shared region holds the
 * plan table: a name new to it takes the next index, a plan it holds with
 * another limit is a live change (or, with CR_CHANGE_REFUSE, refused as the
 * table's own limit is), and the table then has every name the region holds
 * (in the region's order, "default" first). CR_E_SHARED_PLANS when the
 * region would hold more than CR_PLANS_MAX names. */
cr_status cr_keyed_open_plans(cr_keyed **out, const cr_limit *limit, const cr_plan_table *table,
                              int64_t capacity, const char *path, int64_t mode,
                              cr_on_change on_change);

/* The table's plans (NULL: a table of this process made without plans,
 * only "default"). A shared region's grows when another opener gives the
 * region a name (cr_keyed_plan_find reads it in). */
const cr_plan_table *cr_keyed_plans(const cr_keyed *keyed);

/* cr_plan_find in the table's plans; a name the table lacks is looked for
 * again in its shared region's (given by another opener since). */
cr_status cr_keyed_plan_find(cr_keyed *keyed, const char *name, size_t len, int32_t *index);

/* The limit plan `plan` decides under now (its latest change); NULL for an
 * index the table lacks. */
const cr_limit *cr_keyed_plan_limit(const cr_keyed *keyed, int32_t plan);

/*
 * cr_keyed_check for `key` under plan `plan` (an index of cr_plan_find), in
 * priority class `priority` (an index of cr_priority_find, or -1: none).
 * `out` NULL decides admission alone (allow()); *allowed (`allowed` may be
 * NULL when `out` is not) is set in either case. A key last decided under
 * another plan is carried into this one first (written only with `commit`; a
 * peek decides on the carried state and writes nothing).
 * CR_E_PLAN for an index the table lacks.
 */
cr_status cr_keyed_check_plan(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                              int64_t cost, int32_t plan, int32_t priority, bool commit,
                              cr_decision *out, bool *allowed);

/*
 * cr_keyed_reconfigure for plan `plan` alone: every key on it keeps what it
 * used (converted lazily, as a change of the table's limit); keys on other
 * plans are untouched. The plan keeps the table's classes. CR_E_PLAN for an
 * index the table lacks; CR_E_RECONFIGURE_ALGORITHM for another algorithm.
 */
cr_status cr_keyed_reconfigure_plan(cr_keyed *keyed, int32_t plan, const cr_limit *limit,
                                    int64_t now_ns);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_PLANS_H */
