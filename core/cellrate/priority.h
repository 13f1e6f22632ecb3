/*
 * cellrate/priority.h: priorities inside one limit (docs/design/priorities.md).
 *
 * A part of cellrate.h (include <cellrate.h>). A limit may name classes,
 * each with a reserve r in [0, 1): the share of the burst the class may not
 * spend. A class admits only what leaves at least its reserve of the
 * tolerance as room: for gcra and token_bucket, new_tat <= now + tau -
 * reserve_ns, one comparison in the same compare-and-swap as any decision. A
 * refused class writes nothing. The classes live in the cr_limit
 * (cr_limit.priorities), sorted by name; a decision names one by its index.
 * Every function here is pure and thread-safe; the stores' entry points are
 * as thread-safe as their plain ones.
 */
#ifndef CELLRATE_PRIORITY_H
#define CELLRATE_PRIORITY_H

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

/*
 * Gives `limit` the `count` classes of `classes` (replacing any), sorted by
 * name, each with its reserve in ns of the limit's tolerance. Refused, the
 * limit untouched: CR_E_PRIORITIES unless 1 <= count <= CR_PRIORITIES_MAX,
 * every name of 1 to CR_PRIORITY_NAME_MAX - 1 bytes without NUL and each
 * once; CR_E_PRIORITIES_RESERVE unless every reserve is a number >= 0 and
 * < 1; CR_E_PRIORITIES_DEFAULT unless one class has reserve 0 (a decision
 * that names no class spends as it does); CR_E_PRIORITIES_ALGORITHM for a
 * window algorithm.
 */
cr_status cr_priorities_set(cr_limit *limit, const cr_priority_arg *classes, size_t count);

/* A reserve in ns of a tolerance: floor(reserve * tolerance_ns + 1/2), the
 * double read exactly as its binary value (ties up: the class keeps the
 * larger reserve). 0 <= result <= tolerance_ns for reserve in [0, 1). */
int64_t cr_priority_reserve_ns(int64_t tolerance_ns, double reserve);

/* The index in limit->priorities of the class `name` (need not be
 * NUL-terminated): CR_E_PRIORITY_NONE when the limit has no classes,
 * CR_E_PRIORITY when none is so named. */
cr_status cr_priority_find(const cr_limit *limit, const char *name, size_t len, int32_t *index);

/* cr_decide for the class at `priority` (an index of cr_priority_find): the
 * decision as if the tolerance were tau - reserve_ns (remaining and
 * retry_after are the class's; limit and reset_after the limit's; a cost
 * that the class can never spend is unfittable, retry_after CR_NEVER). */
cr_status cr_decide_priority(const cr_limit *limit, int32_t priority, int64_t state, int64_t now_ns,
                             int64_t cost, int64_t *new_state, cr_decision *out);

/* Several limits decided as one (cr_check_all, a web policy's limits, a
 * rate string of several parts) take no class: CR_E_PRIORITY_SEVERAL when
 * `count` > 1 limits would decide a request in a class, else CR_OK. */
cr_status cr_priority_items(size_t count);

/* cr_limiter_check / cr_keyed_check for the class at `priority`; `out` NULL
 * decides admission alone (allow()); *allowed (`allowed` may be NULL when
 * `out` is not) is set in either case.
 * CR_E_PRIORITY / CR_E_PRIORITY_NONE for an index the limit lacks. */
cr_status cr_limiter_check_priority(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                                    int32_t priority, bool commit, cr_decision *out, bool *allowed);
/* cr_limiter_check_priority's allow() (`out` NULL, `commit` true) in
 * cr_limiter_allow's shape: every argument in a register, the same body as
 * cr_limiter_allow but the class's bound and count. */
cr_status cr_limiter_allow_priority(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                                    int32_t priority, bool *allowed);
cr_status cr_keyed_check_priority(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                                  int64_t cost, int32_t priority, bool commit, cr_decision *out,
                                  bool *allowed);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_PRIORITY_H */
