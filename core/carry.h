/*
 * Live change (docs/design.md §4; core/carry.c): the limits a store has had,
 * and what a state under one of them is under another. Not part of the
 * public API.
 */
#ifndef CELLRATE_CARRY_H
#define CELLRATE_CARRY_H

#include "cellrate/decision.h"

/* Whether a change to `b` would change nothing of `a` (its decisions, and the
 * rate and period it reports). */
static inline bool cr_limit_identical(const cr_limit *a, const cr_limit *b)
{
    return cr_limit_same(a, b) && a->rate == b->rate && a->period_s == b->period_s;
}

/* The state of a key with everything used at `now_ns` under `limit`: what a
 * keyed table carries a live key to when its limit is no longer known. */
int64_t cr_full(const cr_limit *limit, int64_t now_ns);

/* A limit a store has had: never changed once made, freed with the store.
 * Generations count changes: 0 for the first limit (of the store, or of the
 * shared region), one more per change. */
typedef struct cr_generation cr_generation;
struct cr_generation {
    cr_limit limit;
    uint64_t generation;
    int64_t changed_at;         /* the instant of the change that made it current */
    const cr_generation *older; /* the one this process knew before (NULL: none) */
};

#endif
