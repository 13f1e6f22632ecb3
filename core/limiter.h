/* What the Limiter (core/limiter.c) offers the units above it: check_all's
 * peek and uncounted commits. Not part of the public API. */
#ifndef CELLRATE_LIMITER_H
#define CELLRATE_LIMITER_H

#include "cellrate/stores.h"
#include "counters.h"
#include "line.h"

/* A commit of `kind` (CR_OP_DECIDE: check; CR_OP_REFUND) that counts nothing:
 * check_all counts its items once the composite verdict is final, so that no
 * counter ever takes back what it counted. */
cr_status cr_limiter_uncounted(cr_limiter *limiter, int64_t now_ns, cr_op_kind kind, int64_t cost,
                               cr_decision *out);

/* Whether `cost` would be admitted now, writing nothing (check_all's peek:
 * the allow() path, without remaining or times). */
cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);

/* The limiter's counters (check_all counts its items there). */
const cr_counts *cr_limiter_counts(const cr_limiter *limiter);

/* The limiter's line of waiters in this process (cr_wait_step; with `make`,
 * made on its first use; NULL: none, or out of memory); *fingerprint, its
 * key's there: 1. */
cr_lines *cr_limiter_lines(cr_limiter *limiter, uint64_t *fingerprint, bool make);

#endif
