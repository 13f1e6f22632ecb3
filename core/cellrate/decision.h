/*
 * cellrate/decision.h: the pure decisions (decide, reserve, refund, anchor,
 * charge, take) and the carry of a live change.
 *
 * A part of cellrate.h (include <cellrate.h>). A decision is a pure function
 * of (limit, state, now, cost): state in, decision and the state to store out
 * (docs/design.md §1). The stores (cellrate/stores.h) apply these to their
 * state words; a caller that keeps the state itself calls them directly.
 */
#ifndef CELLRATE_DECISION_H
#define CELLRATE_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* The deepest debt a charge may leave whatever max_debt says (docs/design.md
 * §9): a key's GCRA state is at most now + 2^62 ns (so below 2^63). Windows
 * carry a count up to their packed ceiling (see cr_charge). */
#define CR_DEBT_MAX_NS CR_HORIZON_NS

/* The cost of a call that names none. */
#define CR_DEFAULT_COST 1

/* A decision: what check() answers. A plain value. */
typedef struct cr_decision {
    bool allowed;
    int64_t limit;          /* = burst */
    int64_t remaining;      /* units that would still be admitted right after */
    int64_t retry_after_ns; /* 0 when allowed; CR_NEVER when the cost can never fit */
    int64_t reset_after_ns; /* until the key is back to a full burst */
    bool clipped;           /* a charge that met the debt bound and dropped the rest */
} cr_decision;

/* The checks every decision makes of its call's arguments, without a store:
 * CR_E_COST unless cost >= 0, CR_E_NOW unless now_ns is CR_CLOCK or in
 * [0, CR_HORIZON_NS). For a store kept elsewhere (Redis) that decides by the
 * core's rules and must refuse what the core refuses. Pure; thread-safe. */
cr_status cr_check_call(int64_t now_ns, int64_t cost);

/*
 * One decision, pure (docs/design.md §1 and §7): `state` is the key's stored
 * state word (0 for a key never seen; GCRA: its TAT), `now_ns` in
 * [0, CR_HORIZON_NS) on the limit's clock, `cost` >= 0. Fills `out` and
 * returns the state to store: equal to `state` when nothing is to be written
 * (turned away, or cost 0). Never wraps and never saturates.
 */
int64_t cr_decide(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out);

/*
 * A reservation, pure: commits `cost` units at the earliest instant they fit
 * if that is at most `max_wait_ns` after `now_ns` (CR_NEVER: any wait).
 * Returns the state to store and sets *delay_ns to the wait (0: now) and
 * *reserved; when not reserved (beyond max_wait, unfittable, or a window
 * algorithm that cannot admit now: windows reserve only with delay 0) the
 * state is returned unchanged. Cost 0 reserves nothing, with delay 0.
 */
int64_t cr_reserve(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                   int64_t max_wait_ns, bool *reserved, int64_t *delay_ns);

/*
 * A refund, pure: gives back `cost` units taken earlier (a cancelled
 * reservation; check_all's give-back) and returns the state to store. Never
 * makes a key better than idle; units of a window that has ended are gone
 * and give nothing back.
 */
int64_t cr_refund(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost);

/*
 * An anchor, pure: `cost` units reserved earlier start only at `now_ns` (a
 * waiter woken after its instant). Returns the state of a key at least as
 * spent as if they had been admitted at `now_ns` (GCRA: max(TAT, now + cost *
 * T)), so that later units are spaced from this real start instead of
 * catching up on the reserved instants; never less strict. Windows: `state`
 * (their units count in the window that admitted them).
 */
int64_t cr_anchor(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost);

/*
 * A charge, pure (docs/design.md §9): commits `cost` units whatever the
 * state; the key may go into debt, and while it is every request is refused
 * with its exact retry_after. The debt is bounded by limit->max_debt units
 * beyond the limit: gcra, token_bucket: TAT' = max(TAT, now) + cost * T, at
 * most now + tau + max_debt * T (and now + CR_DEBT_MAX_NS). fixed_window: the
 * count may pass the rate by max_debt, and at most to period_ns - 1 (the
 * packed ceiling; the debt ends with its window). sliding_window: the current
 * count carries at most the rate (its packed ceiling: no debt; the window
 * full weighs on the next as it decays). A charge past the bound commits the
 * most whole units that fit under it (none when the key is there already: a
 * deeper state is kept, never lowered) and says so: out->clipped. `out` (may
 * be NULL) is the Decision of check when the units fit; else allowed false,
 * retry_after the wait for one unit, remaining and reset_after of the state
 * charged. Cost 0 is a probe. Returns the state to store.
 */
int64_t cr_charge(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out);

/*
 * A take, pure: admits as many units as fit now, at most `max_cost` (>= 0),
 * in one decision; *taken is their number (0 when none fits). Returns the
 * state to store.
 */
int64_t cr_take(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t max_cost,
                int64_t *taken);

/*
 * A live change, pure (docs/design.md §4): the state under `to` of a key
 * whose state under `from` is `state`, at `now_ns`. What carries is units
 * used. gcra and token_bucket: used = max(0, TAT - now) / T_from exactly, and
 * TAT' = now + ceil(used * T_to) (the span clipped at CR_HORIZON_NS: a debt
 * that far stays refused, never admitted sooner). Windows: the counts carry as
 * counts, clipped at the new rate, in the new windows holding `now_ns`. An idle
 * key, and a change of max_debt alone or none (algorithm, T, tau and burst
 * the same), keep `state`: a debt carries whole, max_debt bounds charges.
 * Pre-condition: the same algorithm on both sides (see cr_limit_reconfigurable).
 */
int64_t cr_carry(const cr_limit *from, const cr_limit *to, int64_t state, int64_t now_ns);

/* Whether `a` and `b` make the same decisions, charges included (algorithm,
 * T, tau, burst, max_debt). */
bool cr_limit_same(const cr_limit *a, const cr_limit *b);

/* CR_OK when `from` may change live to `to`, else
 * CR_E_RECONFIGURE_ALGORITHM (the algorithm differs). */
cr_status cr_limit_reconfigurable(const cr_limit *from, const cr_limit *to);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_DECISION_H */
