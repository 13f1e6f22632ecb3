/*
 * cellrate/stats.h: the counters of what a rate limit and a concurrency
 * limit did.
 *
 * A part of cellrate.h (include <cellrate.h>). The stores read them
 * (cr_limiter_stats, cr_keyed_stats, cr_gauge_stats_read); the metrics
 * (cellrate/metrics.h) name their fields.
 */
#ifndef CELLRATE_STATS_H
#define CELLRATE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The largest value a counter reports (cr_stats): a count that would pass it
 * stays there (saturates) rather than wrap; the largest integer both faces
 * carry (a Lua integer is signed). */
#define CR_COUNT_MAX INT64_MAX

/*
 * What a rate limit decided since it was made or its counters were last
 * reset, exact (each verdict counted once, in the thread's own cell). A
 * shared region keeps them in the region: every process reads the host's
 * totals. Counters count what was committed, never fall (a reading is never
 * below an earlier one, but for would_refuse's move below) and saturate at
 * CR_COUNT_MAX rather than wrap (a counter that got there stays there, reset
 * or not). Requests and units:
 *   allow, check (commit), reserve: admitted or refused, with the cost;
 *     a refusal of a cost above what the limit ever admits at once is also
 *     unfittable;
 *   charge: admitted, with the units it committed (the cost, or what fitted
 *     under the debt bound when clipped);
 *   take: admitted with the units taken, or refused (max_cost units) when
 *     none fit; a take of 0 counts nothing;
 *   refund: units_refunded, the units it gave back (the cost, or what the key
 *     still held, a part of a unit counted whole); units_admitted stays;
 *   peek, check without commit, anchor: nothing;
 * would_refuse: refusals let through by a dry run (cr_limiter_would_refuse),
 * which are not counted as refused. evicted: live keys a keyed table evicted.
 * bans: bans a penalty started (a shared region's: by every process).
 * check_all: each item counts its own admissions; a composite refusal is one
 * refusal, of the item whose decision cr_check_all returns (*index), and the
 * items that had admitted count nothing (their units were given back); each
 * counted once the composite verdict is final.
 */
/* evicted: 0 for a Limiter; bans: 0 without a penalty */
#define CR_STATS_LIST(X) \
    X(admitted)          \
    X(refused)           \
    X(units_admitted)    \
    X(units_refused)     \
    X(units_refunded) X(unfittable) X(would_refuse) X(evicted) X(bans)
#define CR_STATS_FIELD_(name) uint64_t name;
typedef struct cr_stats {
    CR_STATS_LIST(CR_STATS_FIELD_)
} cr_stats;

/* What a concurrency limit did since it was made or last reset: acquires
 * (acquired, refused, with their units), units released by their holders,
 * units reclaimed (a dead holder's, an ended lease's), keys evicted (never:
 * a key holding units keeps its place; always 0), the units in flight now
 * and, when `peak_tracked`, the most in flight at once since the reset (else
 * peak is 0: not counted). Exact, as cr_stats; in a shared region, the
 * host's. in_flight is counted in the holdings themselves at the reading (the
 * cells held, those of a dead holder not yet reclaimed included): O(limit)
 * for one gauge, O(table) for a keyed one. */
#define CR_GAUGE_STATS_LIST(X) \
    X(acquired)                \
    X(refused)                 \
    X(units_acquired) X(units_refused) X(released) X(reclaimed) X(in_flight) X(peak) X(evicted)
typedef struct cr_gauge_stats {
    CR_GAUGE_STATS_LIST(CR_STATS_FIELD_)
    bool peak_tracked; /* made with `peak` (cr_gauge_open) */
} cr_gauge_stats;

/* Requests decided under one plan, or in one class (cr_stats_by). */
typedef struct cr_stats_row {
    char name[32]; /* the plan's or the class's, NUL-terminated */
    uint64_t admitted;
    uint64_t refused;
} cr_stats_row;

/*
 * What a rate limit decided by plan and by class, counted as cr_stats'
 * admitted and refused (every verdict those count, in the row of the plan
 * and the class it went under; would_refuse's move too), exact and summing
 * to them: a keyed table's plans (nplans 0 without plans), "default" first
 * as cr_keyed_plans names them; a limit's classes (npriorities 0 without),
 * sorted by name, a decision that names no class counted in the first class
 * of reserve 0 (whose room it spends). In a shared region, the host's.
 */
typedef struct cr_stats_by {
    size_t nplans;
    cr_stats_row plans[16]; /* CR_PLANS_MAX */
    size_t npriorities;
    cr_stats_row priorities[8]; /* CR_PRIORITIES_MAX */
} cr_stats_by;

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_STATS_H */
