/*
 * The pure decision functions of every algorithm (docs/design.md §1, §7, §9),
 * inlined into the stores and exported by decide.c. Integer only; nothing wraps or saturates: every
 * sum is bounded by the horizon (now < 2^62 ns, tolerance or window <= 2^62
 * or 2^60 ns), and a sum that could still overflow (a GCRA state pushed
 * beyond the horizon by reservations) is a refusal, which the exact
 * semantics would give anyway. Not part of the public API.
 *
 * State words (one int64 per key, 0 = a key never seen):
 *   gcra, token_bucket  the TAT.
 *   fixed_window        end + count: `end` the end of the key's window (a
 *                       multiple of the window P), 0 <= count <= rate < P.
 *   calendar            end + count: `end` the end of the key's period (a
 *                       local midnight), 0 <= count <= rate + max_debt <=
 *                       2^41, far below any period in ns.
 *   sliding_window      (k + 2) * P + prev * (rate + 1) + curr: k the index
 *                       of the key's current window [k*P, (k+1)*P), prev and
 *                       curr the counts of windows k - 1 and k, and
 *                       (rate + 1)^2 <= P.
 * In every case a state <= now is a key with no count that still matters
 * (GCRA: TAT <= now; fixed: its window ended; sliding: now >= (k+2)*P), the
 * same as an absent key, and states order by when they stop mattering: the
 * keyed table's reclamation and eviction read them as they read a TAT.
 */
#ifndef CELLRATE_DECIDE_H
#define CELLRATE_DECIDE_H

#include "calendar.h"
#include "cellrate/decision.h"
#include "cellrate/follow.h"

#include <string.h>

__extension__ typedef unsigned __int128 cr_u128;

/* The hot path: inlined into each store entry point, so that allow() (out
 * NULL) and the operation kind fold away. */
#define CR_HOT __attribute__((always_inline)) static inline

/* What a store does to a key's state. */
typedef enum {
    CR_OP_DECIDE,
    CR_OP_RESERVE,
    CR_OP_REFUND,
    CR_OP_ANCHOR,
    CR_OP_CHARGE,
    CR_OP_TAKE,
    CR_OP_FOLLOW,
    CR_OP_PRIORITY /* a decision of a priority class: its index in max_wait_ns */
} cr_op_kind;

typedef struct {
    cr_op_kind kind;
    int64_t cost;        /* CR_OP_TAKE: the most units to take; CR_OP_FOLLOW: pending */
    int64_t max_wait_ns; /* CR_OP_RESERVE: the longest acceptable delay, or CR_NEVER;
                            CR_OP_FOLLOW: its arguments (cr_follow_word) */
    int64_t delay_ns;    /* CR_OP_RESERVE: set to the delay of a reservation */
    int64_t taken;       /* set to the units CR_OP_TAKE took, CR_OP_CHARGE committed,
                            CR_OP_REFUND gave back */
    bool uncounted;      /* commits without counting (check_all counts once it is final) */
} cr_op;

/* CR_OP_FOLLOW's arguments: what a response said (cr_follow), and this
 * process's part of it. They travel in the op's max_wait_ns, as an address:
 * a word more in cr_op cost every entry point instructions (measured: check
 * +4, reserve +7 a call), for an operation of the slow path. */
typedef struct {
    const cr_signal *signal;
    double share;
    int64_t ban_ns; /* > 0: a penalty's ban of this long from now (signal unused) */
} cr_follow_args;

static inline int64_t cr_follow_word(const cr_follow_args *args) { return (int64_t)(intptr_t)args; }

static inline const cr_follow_args *cr_follow_args_of(const cr_op *op)
{
    return (const cr_follow_args *)(intptr_t)op->max_wait_ns;
}

static inline bool cr_is_window(const cr_limit *limit)
{
    return limit->algorithm >= CR_ALGORITHM_FIXED_WINDOW;
}

/* Validates `cost` and `now_ns` (a time before the horizon of
 * docs/design.md §1, or CR_CLOCK). */
static inline cr_status cr_check_args(int64_t now_ns, int64_t cost)
{
    if (cost < 0)
        return CR_E_COST;
    if ((now_ns < 0 && now_ns != CR_CLOCK) || now_ns >= CR_HORIZON_NS)
        return CR_E_NOW;
    return CR_OK;
}

/* floor(n / P) for 0 <= n < 2^63 and the window P, by one multiply with
 * window_inverse = floor((2^64 - 1) / P): the estimate is at most one below
 * the quotient (window_inverse >= 2^64/P - 1 and n < 2^64), never above. */
CR_HOT int64_t cr_window_index(const cr_limit *limit, int64_t n)
{
    const uint64_t window = (uint64_t)limit->tolerance_ns;
    uint64_t q = (uint64_t)(((cr_u128)(uint64_t)n * limit->window_inverse) >> 64);
    if ((uint64_t)n - q * window >= window)
        q++;
    return (int64_t)q;
}

/* floor(packed / (rate + 1)) for a sliding state's 0 <= packed < 2^62, by
 * one multiply with count_inverse = floor((2^64 - 1) / (rate + 1)), as above. */
CR_HOT int64_t cr_count_quotient(const cr_limit *limit, int64_t packed)
{
    const uint64_t radix = (uint64_t)limit->burst + 1;
    uint64_t q = (uint64_t)(((cr_u128)(uint64_t)packed * limit->count_inverse) >> 64);
    if ((uint64_t)packed - q * radix >= radix)
        q++;
    return (int64_t)q;
}

/* ------------------------------------------------------------------------ */
/* gcra and token_bucket                                                     */

/* `tau`: the tolerance the decision may spend, limit->tolerance_ns for a
 * decision without a class (the test below on it then folds away), a
 * class's tolerance_ns - reserve_ns (0 <= reserve_ns <= tolerance_ns) for
 * one in a class, so that an admission leaves at least reserve_ns of room
 * (docs/design/priorities.md). */
CR_HOT int64_t cr_gcra_decide(const cr_limit *limit, int64_t tat, int64_t now_ns, int64_t cost,
                              cr_decision *out, bool *allowed, int64_t tau)
{
    const int64_t T = limit->emission_ns;
    const int64_t base = tat > now_ns ? tat : now_ns;
    int64_t new_tat = tat, allow_at = 0, increment = 0;
    bool fits = true;

    if (cost == 0) {
        *allowed = true; /* a probe: always admitted, nothing to store */
    } else {
        int64_t next;
        /* one unit, the common cost: T <= tau (a burst is at least 1), no multiply;
         * a class's smaller tau may hold less than one unit, which only `out`
         * tells (retry_after never): the verdict alone needs no test, as
         * next - tau = base + T - tau > base >= now refuses it anyway */
        if (__builtin_expect(cost == 1, 1)) {
            increment = T;
            fits = tau == limit->tolerance_ns || !out || T <= tau;
        } else
            fits = !__builtin_mul_overflow(cost, T, &increment) && increment <= tau;
        *allowed = false;
        /* Unfittable: no wait would ever admit it. An overflowing sum is
         * refused: admission needs next <= now + tau < 2^63 (the horizon). */
        if (fits && !__builtin_add_overflow(base, increment, &next)) {
            allow_at = next - tau; /* both non-negative: cannot overflow */
            *allowed = now_ns >= allow_at;
            if (*allowed)
                new_tat = next;
        }
    }
    if (!out)
        return new_tat;

    out->allowed = *allowed;
    out->clipped = false;
    out->limit = limit->burst;
    if (*allowed && cost != 0) {
        out->remaining = (now_ns - allow_at) / T; /* 0 <= now - allow_at <= tau */
        out->retry_after_ns = 0;
        out->reset_after_ns = new_tat - now_ns;
        return new_tat;
    }
    /* The units that fit at `base`: room <= tau; below one unit the floor is
     * 0 or negative, as for every turned-away cost of 1, so no division.
     * now + tau < 2^63 by the horizon. */
    const int64_t room = (now_ns - base) + tau;
    out->remaining = room >= T ? room / T : 0;
    /* base + increment - tau - now, in an order that cannot overflow */
    out->retry_after_ns = *allowed ? 0 : fits ? (base - now_ns) - (tau - increment) : CR_NEVER;
    out->reset_after_ns = base - now_ns;
    return new_tat;
}

CR_HOT int64_t cr_gcra_reserve(const cr_limit *limit, int64_t tat, int64_t now_ns, int64_t cost,
                               int64_t max_wait_ns, bool *reserved, int64_t *delay_ns)
{
    const int64_t base = tat > now_ns ? tat : now_ns;
    int64_t increment, next;
    *reserved = false;
    *delay_ns = 0;
    if (cost == 0) {
        *reserved = true;
        return tat;
    }
    if (__builtin_mul_overflow(cost, limit->emission_ns, &increment) ||
        increment > limit->tolerance_ns || __builtin_add_overflow(base, increment, &next))
        return tat;
    const int64_t delay = next - limit->tolerance_ns - now_ns; /* > -2^63: no overflow */
    *delay_ns = delay > 0 ? delay : 0;
    if (*delay_ns > max_wait_ns) {
        *delay_ns = 0;
        return tat;
    }
    *reserved = true;
    return next;
}

/* *given: the units given back, a part of a unit counted whole (the span
 * restored, rounded up to units of T): at most `cost`. */
static inline int64_t cr_gcra_refund(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                     int64_t cost, int64_t *given)
{
    const int64_t T = limit->emission_ns;
    int64_t decrement;
    *given = 0;
    if (tat <= now_ns) /* idle: nothing left to give back */
        return tat;
    if (__builtin_mul_overflow(cost, T, &decrement) || tat - now_ns <= decrement) {
        const int64_t span = tat - now_ns; /* back to idle, never better */
        *given = span / T + (span % T != 0);
        return now_ns;
    }
    *given = cost;
    return tat - decrement;
}

/* Units reserved earlier that start only now (a waiter woken late): the
 * key is at least as spent as `cost` units admitted at now_ns to an idle
 * key, so that what follows is spaced from this real start, not from the
 * reserved instant (docs/design.md §9). Only ever later: max(). */
static inline int64_t cr_gcra_anchor(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                     int64_t cost)
{
    int64_t increment, started;
    if (__builtin_mul_overflow(cost, limit->emission_ns, &increment) ||
        increment > limit->tolerance_ns || __builtin_add_overflow(now_ns, increment, &started))
        return tat; /* unfittable: never reserved, nothing to anchor */
    return started > tat ? started : tat;
}

/* ------------------------------------------------------------------------ */
/* fixed_window                                                              */

/* The key's window end and count, at now_ns. */
typedef struct {
    int64_t end;
    int64_t count;
} cr_fixed_state;

/* The end of the window holding now_ns, (floor(now / P) + 1) * P <= now + P
 * < 2^63. With `cache` (a word that decisions share, 0 at first): the end
 * it holds while that window holds now_ns, else computed and stored there,
 * once a window, so that a common decision has no multiply between its
 * clock read and its compare-and-swap (docs/design/benchmarks.md). Any end
 * a racing thread stored is checked against now_ns before use. */
CR_HOT int64_t cr_window_end(const cr_limit *limit, int64_t *cache, int64_t now_ns)
{
    const int64_t window = limit->tolerance_ns;
    if (cache) {
        const int64_t cached = __atomic_load_n(cache, __ATOMIC_RELAXED);
        if (__builtin_expect(now_ns < cached && now_ns >= cached - window, 1))
            return cached;
    }
    const int64_t end = (cr_window_index(limit, now_ns) + 1) * window;
    if (cache)
        __atomic_store_n(cache, end, __ATOMIC_RELAXED);
    return end;
}

/* The key's window and count, `end` the end of the window holding now. */
CR_HOT cr_fixed_state cr_fixed_read_at(const cr_limit *limit, int64_t state, int64_t end)
{
    const int64_t window = limit->tolerance_ns;
    cr_fixed_state s;
    s.end = end;
    s.count = 0;
    if (state >= s.end) { /* the current window, or a later one (the clock stepped back) */
        if (state - s.end >= window)
            s.end = cr_window_index(limit, state) * window;
        s.count = state - s.end;
    } /* else: the key's window has ended: no count */
    return s;
}

CR_HOT cr_fixed_state cr_fixed_read(const cr_limit *limit, int64_t state, int64_t now_ns)
{
    return cr_fixed_read_at(limit, state, cr_window_end(limit, NULL, now_ns));
}

/* ------------------------------------------------------------------------ */
/* calendar: a fixed window whose window is a calendar period (§19)         */

/* The period holding now_ns: the cached one while it holds now_ns (one load,
 * no lock; a boundary passed costs one computation, in whichever thread
 * meets it first). */
CR_HOT void cr_calendar_period(const cr_limit *limit, int64_t now_ns, int64_t *start_ns,
                               int64_t *end_ns)
{
    const uint64_t cache = __atomic_load_n(&limit->calendar_cache, __ATOMIC_RELAXED);
    *start_ns = (int64_t)(cache >> CR_CALENDAR_LENGTH_BITS) * 1000000000;
    *end_ns = *start_ns +
              (int64_t)(cache & (((uint64_t)1 << CR_CALENDAR_LENGTH_BITS) - 1)) * 1000000000;
    if (__builtin_expect(now_ns < *start_ns || now_ns >= *end_ns, 0))
        cr_calendar_bounds(limit, now_ns, start_ns, end_ns);
}

CR_HOT cr_fixed_state cr_calendar_read(const cr_limit *limit, int64_t state, int64_t now_ns)
{
    int64_t start, end;
    cr_calendar_period(limit, now_ns, &start, &end);
    cr_fixed_state s = {end, 0};
    if (state >= end) { /* the current period, or a later one (the clock stepped back) */
        if (state - end > 2 * CR_CALENDAR_COUNT_MAX) {
            int64_t later_end;
            if (state >= CR_HORIZON_NS ||
                cr_period_bounds(limit->zone, limit->period, state, &s.end, &later_end) != CR_OK)
                return s; /* beyond the horizon: no count */
        }
        s.count = state - s.end;
    }
    return s;
}

/* The key's window (fixed) or period (calendar) and its count, at now_ns. */
CR_HOT cr_fixed_state cr_count_read(const cr_limit *limit, int64_t state, int64_t now_ns)
{
    return limit->algorithm == CR_ALGORITHM_CALENDAR ? cr_calendar_read(limit, state, now_ns)
                                                     : cr_fixed_read(limit, state, now_ns);
}

/* A decision of fixed_window or calendar on the key's window `s`. */
CR_HOT int64_t cr_fixed_decide(const cr_limit *limit, const cr_fixed_state s, int64_t state,
                               int64_t now_ns, int64_t cost, cr_decision *out, bool *allowed)
{
    const int64_t rate = limit->burst;
    int64_t new_state = state, count = s.count;

    if (cost == 0) {
        *allowed = true;
    } else {
        *allowed = cost <= rate - count;
        if (*allowed) {
            count += cost;
            new_state = s.end + count;
        }
    }
    if (!out)
        return new_state;
    out->allowed = *allowed;
    out->clipped = false;
    out->limit = rate;
    out->remaining = count < rate ? rate - count : 0; /* a charge may leave count > rate */
    out->retry_after_ns = *allowed ? 0 : cost > rate ? CR_NEVER : s.end - now_ns;
    out->reset_after_ns = count > 0 ? s.end - now_ns : 0;
    return new_state;
}

static inline int64_t cr_fixed_refund(const cr_limit *limit, int64_t state, int64_t now_ns,
                                      int64_t cost, int64_t *given)
{
    const cr_fixed_state s = cr_count_read(limit, state, now_ns);
    *given = cost < s.count ? cost : s.count;
    if (s.count == 0)
        return state; /* nothing counted now: the units, if any, went with their window */
    return s.end + (s.count - *given);
}

/* ------------------------------------------------------------------------ */
/* sliding_window                                                            */

/* The key's counts as seen at now_ns, and the current window. */
typedef struct {
    int64_t base;    /* (k + 2) * P for the current window k */
    int64_t start;   /* k * P; after now_ns only if the clock stepped back */
    int64_t elapsed; /* now - start, or 0 when start is after now */
    int64_t prev;
    int64_t curr;
} cr_sliding_state;

/* `end`: the end of the window holding now_ns (cr_window_end). */
CR_HOT cr_sliding_state cr_sliding_read_at(const cr_limit *limit, int64_t state, int64_t now_ns,
                                           int64_t end)
{
    const int64_t window = limit->tolerance_ns;
    const int64_t radix = limit->burst + 1;
    cr_sliding_state s;
    s.start = end - window;
    s.elapsed = now_ns - s.start;
    s.base = s.start + 2 * window; /* <= now + 2P < 2^63 */
    s.prev = s.curr = 0;
    if (state >= s.base) { /* the current window, or a later one (the clock stepped back) */
        if (state - s.base >= window) {
            s.base = cr_window_index(limit, state) * window;
            s.start = s.base - 2 * window;
            s.elapsed = 0; /* the previous window weighs fully: only stricter */
        }
        const int64_t packed = state - s.base; /* < (rate + 1)^2 <= P */
        s.prev = packed < radix ? 0 : cr_count_quotient(limit, packed);
        s.curr = packed - s.prev * radix;
    } else if (state >= s.base - window) { /* the previous window: its count is prev */
        const int64_t packed = state - (s.base - window);
        s.prev = packed - cr_count_quotient(limit, packed) * radix;
    }
    return s;
}

CR_HOT cr_sliding_state cr_sliding_read(const cr_limit *limit, int64_t state, int64_t now_ns)
{
    return cr_sliding_read_at(limit, state, now_ns, cr_window_end(limit, NULL, now_ns));
}

CR_HOT int64_t cr_sliding_pack(const cr_limit *limit, const cr_sliding_state *s)
{
    return s->base + s->prev * (limit->burst + 1) + s->curr;
}

/* Whether prev * (P - elapsed) / P + curr + cost <= rate, exactly. */
CR_HOT bool cr_sliding_fits(int64_t window, int64_t rate, int64_t prev, int64_t curr,
                            int64_t elapsed, int64_t cost)
{
    if (cost > rate - curr)
        return false;
    if (prev == 0)
        return true;
    return (cr_u128)prev * (uint64_t)(window - elapsed) <=
           (cr_u128)(uint64_t)(rate - curr - cost) * (uint64_t)window;
}

/* The least e in [0, P] with prev * (P - e) <= budget * P (budget >= 0):
 * P - floor(budget * P / prev). Returns P when prev is 0 and budget... never
 * called so: the caller checks prev > 0. */
static inline int64_t cr_sliding_earliest(int64_t window, int64_t prev, int64_t budget)
{
    const cr_u128 reach = (cr_u128)(uint64_t)budget * (uint64_t)window / (uint64_t)prev;
    return reach >= (cr_u128)window ? 0 : window - (int64_t)reach;
}

/* The wait until `cost` would be admitted with no other admission meanwhile
 * (cost <= rate): in this window as prev decays, else in the next (prev' =
 * curr), else the one after, which always fits. Exact, to the ns. */
static inline int64_t cr_sliding_retry(const cr_limit *limit, const cr_sliding_state *s,
                                       int64_t now_ns, int64_t cost)
{
    const int64_t window = limit->tolerance_ns, rate = limit->burst;
    const int64_t budget = rate - s->curr - cost;
    if (budget >= 0 && s->prev > 0) {
        const int64_t earliest = cr_sliding_earliest(window, s->prev, budget);
        if (earliest < window)
            return s->start + earliest - now_ns;
    }
    const int64_t next = s->start + window;
    if (s->curr <= rate - cost)
        return next - now_ns;
    const int64_t earliest = cr_sliding_earliest(window, s->curr, rate - cost);
    return next + earliest - now_ns; /* earliest == P: the window after next */
}

/* A decision of sliding_window on the key's counts `s` (cr_sliding_read). */
CR_HOT int64_t cr_sliding_decide(const cr_limit *limit, cr_sliding_state s, int64_t state,
                                 int64_t now_ns, int64_t cost, cr_decision *out, bool *allowed)
{
    const int64_t window = limit->tolerance_ns, rate = limit->burst;
    int64_t new_state = state;

    if (cost == 0) {
        *allowed = true;
    } else {
        *allowed = cr_sliding_fits(window, rate, s.prev, s.curr, s.elapsed, cost);
        if (*allowed) {
            /* curr is the low digit: within the key's own window, add to it */
            const bool same_window = state >= s.base && state - s.base < window;
            s.curr += cost;
            new_state = same_window ? state + cost : cr_sliding_pack(limit, &s);
        }
    }
    if (!out)
        return new_state;
    out->allowed = *allowed;
    out->clipped = false;
    out->limit = rate;
    /* rate - curr - ceil(prev * (P - elapsed) / P), at least 0 */
    const cr_u128 weighted = (cr_u128)s.prev * (uint64_t)(window - s.elapsed);
    const int64_t held = (int64_t)((weighted + (uint64_t)window - 1) / (uint64_t)window);
    out->remaining = rate - s.curr - held > 0 ? rate - s.curr - held : 0;
    out->retry_after_ns = *allowed      ? 0
                          : cost > rate ? CR_NEVER
                                        : cr_sliding_retry(limit, &s, now_ns, cost);
    out->reset_after_ns = s.curr > 0   ? s.start + 2 * window - now_ns
                          : s.prev > 0 ? s.start + window - now_ns
                                       : 0;
    return new_state;
}

static inline int64_t cr_sliding_refund(const cr_limit *limit, int64_t state, int64_t now_ns,
                                        int64_t cost, int64_t *given)
{
    cr_sliding_state s = cr_sliding_read(limit, state, now_ns);
    int64_t *count = s.curr > 0 ? &s.curr : &s.prev; /* taken in this window, else the last */
    *given = cost < *count ? cost : *count;
    if (*count == 0)
        return state;
    *count -= *given;
    return cr_sliding_pack(limit, &s);
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */

/*
 * One decision: returns the state to store, equal to `state` when nothing is
 * to be written, and says in *allowed whether the request is admitted. With
 * `out` NULL (the allow() path) that is all it works out. `algorithm` is
 * limit->algorithm; an entry point that passes a constant (one instance per
 * algorithm) keeps only that algorithm's code. `window_end`: cr_window_end's
 * cache for fixed_window and sliding_window, or NULL.
 */
CR_HOT int64_t cr_decision_of(const cr_limit *limit, cr_algorithm algorithm, int64_t *window_end,
                              int64_t state, int64_t now_ns, int64_t cost, cr_decision *out,
                              bool *allowed)
{
    switch (algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
        return cr_fixed_decide(
            limit, cr_fixed_read_at(limit, state, cr_window_end(limit, window_end, now_ns)), state,
            now_ns, cost, out, allowed);
    case CR_ALGORITHM_CALENDAR: /* a fixed window whose window is the zone's period */
        return cr_fixed_decide(limit, cr_calendar_read(limit, state, now_ns), state, now_ns, cost,
                               out, allowed);
    case CR_ALGORITHM_SLIDING_WINDOW:
        return cr_sliding_decide(
            limit,
            cr_sliding_read_at(limit, state, now_ns, cr_window_end(limit, window_end, now_ns)),
            state, now_ns, cost, out, allowed);
    default:
        return cr_gcra_decide(limit, state, now_ns, cost, out, allowed, limit->tolerance_ns);
    }
}

CR_HOT int64_t cr_decision_core(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                                cr_decision *out, bool *allowed)
{
    return cr_decision_of(limit, limit->algorithm, NULL, state, now_ns, cost, out, allowed);
}

/* A decision of the priority class `priority` (a valid index of
 * limit->priorities): gcra and token_bucket only (cr_priorities_set refuses
 * the windows, which decide here as without one). */
CR_HOT int64_t cr_priority_core(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                                int64_t priority, cr_decision *out, bool *allowed)
{
    if (__builtin_expect(cr_is_window(limit), 0))
        return cr_decision_core(limit, state, now_ns, cost, out, allowed);
    return cr_gcra_decide(limit, state, now_ns, cost, out, allowed,
                          limit->tolerance_ns - limit->priorities[priority].reserve_ns);
}

CR_HOT int64_t cr_reserve_core(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                               int64_t max_wait_ns, bool *reserved, int64_t *delay_ns)
{
    if (!cr_is_window(limit))
        return cr_gcra_reserve(limit, state, now_ns, cost, max_wait_ns, reserved, delay_ns);
    *delay_ns = 0; /* a window reserves only for now */
    return cr_decision_core(limit, state, now_ns, cost, NULL, reserved);
}

/* The full decision into `out`. */
static inline int64_t cr_decision_make(const cr_limit *limit, int64_t state, int64_t now_ns,
                                       int64_t cost, cr_decision *out)
{
    bool allowed;
    return cr_decision_core(limit, state, now_ns, cost, out, &allowed);
}

/* *given: the units given back (the stores count them). */
static inline int64_t cr_refund_core(const cr_limit *limit, int64_t state, int64_t now_ns,
                                     int64_t cost, int64_t *given)
{
    *given = 0;
    if (cost == 0)
        return state;
    switch (limit->algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
    case CR_ALGORITHM_CALENDAR:
        return cr_fixed_refund(limit, state, now_ns, cost, given);
    case CR_ALGORITHM_SLIDING_WINDOW:
        return cr_sliding_refund(limit, state, now_ns, cost, given);
    default:
        return cr_gcra_refund(limit, state, now_ns, cost, given);
    }
}

/* Windows count units in the window that admitted them: nothing to anchor. */
static inline int64_t cr_anchor_core(const cr_limit *limit, int64_t state, int64_t now_ns,
                                     int64_t cost)
{
    return cr_is_window(limit) ? state : cr_gcra_anchor(limit, state, now_ns, cost);
}

/* ------------------------------------------------------------------------ */
/* Charges (docs/design.md §9): `cost` units committed whatever the state,  */
/* the debt bounded by max_debt units beyond the limit. Each sets *committed */
/* to the units it committed (whole units: the counters count them) and    */
/* *clipped when they are fewer than `cost`.                                */

/* gcra: TAT' = max(TAT, now) + cost * T, at most the bound now + tau +
 * max_debt * T (and now + CR_DEBT_MAX_NS: a sum below 2^63, as now < 2^62).
 * Clipped: the most whole units under the bound; a TAT already beyond it (a
 * clock that stepped back, a debt carried by a live change) is kept. */
static inline int64_t cr_gcra_charge(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                     int64_t cost, int64_t *committed, bool *clipped)
{
    const int64_t T = limit->emission_ns;
    const int64_t base = tat > now_ns ? tat : now_ns;
    int64_t debt, depth = CR_DEBT_MAX_NS; /* tau + max_debt * T, at most the horizon */
    if (!__builtin_mul_overflow(limit->max_debt, T, &debt) &&
        debt <= CR_DEBT_MAX_NS - limit->tolerance_ns)
        depth = limit->tolerance_ns + debt;
    const int64_t room = now_ns + depth - base; /* may be negative: deeper already */
    const int64_t fit = room > 0 ? room / T : 0;
    *clipped = cost > fit;
    *committed = *clipped ? fit : cost;
    return *committed > 0 ? base + *committed * T : tat;
}

/* fixed_window: the count may pass the rate by max_debt, up to the window in
 * ns less one, the most `end + count` carries (count < P keeps the window
 * readable). */
static inline int64_t cr_fixed_charge(const cr_limit *limit, int64_t state, int64_t now_ns,
                                      int64_t cost, int64_t *committed, bool *clipped)
{
    const cr_fixed_state s = cr_count_read(limit, state, now_ns);
    /* >= 0: rate < P; a calendar's count may reach 2^41, far below any period */
    const int64_t packed = limit->algorithm == CR_ALGORITHM_CALENDAR
                               ? 2 * CR_CALENDAR_COUNT_MAX - limit->burst
                               : limit->tolerance_ns - 1 - limit->burst;
    const int64_t ceiling = limit->burst + (limit->max_debt < packed ? limit->max_debt : packed);
    const int64_t fit = ceiling > s.count ? ceiling - s.count : 0;
    *clipped = cost > fit;
    *committed = *clipped ? fit : cost;
    return *committed > 0 ? s.end + s.count + *committed : state;
}

/* sliding_window: the current count is a digit of radix rate + 1, so it
 * carries at most the rate: the window full, no debt whatever max_debt says. */
static inline int64_t cr_sliding_charge(const cr_limit *limit, int64_t state, int64_t now_ns,
                                        int64_t cost, int64_t *committed, bool *clipped)
{
    cr_sliding_state s = cr_sliding_read(limit, state, now_ns);
    const int64_t fit = limit->burst - s.curr;
    *clipped = cost > fit;
    *committed = *clipped ? fit : cost;
    if (*committed == 0)
        return state;
    s.curr += *committed;
    return cr_sliding_pack(limit, &s);
}

/* A charge: where check admits the units, it is that check, decision and
 * state (the allow path costs what check costs). Else the key goes into
 * debt: committed whatever the state, refused, with the retry_after a unit
 * would get now (a peek of cost 1 on the state charged) and that state's
 * remaining and reset_after. *fit: check admitted them. */
CR_HOT int64_t cr_charge_core(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                              cr_decision *out, bool *fit, int64_t *committed)
{
    const int64_t checked = cr_decision_core(limit, state, now_ns, cost, out, fit);
    if (__builtin_expect(*fit, 1)) {
        *committed = cost;
        return checked;
    }
    bool clipped, refused;
    int64_t charged;
    switch (limit->algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
    case CR_ALGORITHM_CALENDAR:
        charged = cr_fixed_charge(limit, state, now_ns, cost, committed, &clipped);
        break;
    case CR_ALGORITHM_SLIDING_WINDOW:
        charged = cr_sliding_charge(limit, state, now_ns, cost, committed, &clipped);
        break;
    default:
        charged = cr_gcra_charge(limit, state, now_ns, cost, committed, &clipped);
        break;
    }
    if (out) {
        cr_decision_core(limit, charged, now_ns, 1, out, &refused);
        out->allowed = false;
        out->clipped = clipped;
    }
    return charged;
}

/* Take: as many units as fit now (the remaining of a probe), at most
 * max_cost, admitted as one decision. */
CR_HOT int64_t cr_take_core(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t max_cost,
                            int64_t *taken)
{
    cr_decision probe;
    bool admitted;
    cr_decision_core(limit, state, now_ns, 0, &probe, &admitted);
    *taken = probe.remaining < max_cost ? probe.remaining : max_cost;
    return cr_decision_core(limit, state, now_ns, *taken, NULL, &admitted);
}

/* ------------------------------------------------------------------------ */
/* Following a provider (docs/design.md §18): a state pulled into line with  */
/* what a response said. Only ever stricter: every rule is a max.           */

/* floor(remaining * share) exactly, share (in (0, 1]) read as its IEEE 754
 * bits: mantissa * 2^exponent; less pending, at least 0. */
static inline int64_t cr_follow_ours(int64_t remaining, int64_t pending, double share)
{
    if (share < 1.0) {
        uint64_t bits;
        memcpy(&bits, &share, sizeof bits);
        const uint64_t biased = (bits >> 52) & 0x7ff, fraction = bits & ((UINT64_C(1) << 52) - 1);
        const uint64_t mantissa = biased ? fraction | (UINT64_C(1) << 52) : fraction;
        const int64_t shift = biased ? 1075 - (int64_t)biased : 1074; /* >= 53: share < 1 */
        const cr_u128 product = (cr_u128)(uint64_t)remaining * mantissa;
        remaining = shift >= 128 ? 0 : (int64_t)(product >> shift);
    }
    return remaining > pending ? remaining - pending : 0;
}

/* gcra, token_bucket: the least TAT from which, admitting units one after
 * the other from now, the one after `remaining` comes no earlier than now + T
 * (the burst spent down to `remaining`), and for a wait (remaining 0) no
 * earlier than now + within either. Unit k comes at TAT + k*T - tau. A
 * remaining above 0 says nothing of when more come: the answer that says 0
 * says until when, and holds the limit then. */
static inline int64_t cr_gcra_follow(const cr_limit *limit, int64_t tat, int64_t now_ns,
                                     int64_t remaining, int64_t within_ns)
{
    const int64_t T = limit->emission_ns;
    const int64_t beyond = remaining == 0 && within_ns > T ? within_ns - T : 0;
    /* now + tau + beyond < 2^62 + 2^62 + 2^42: no overflow */
    const cr_u128 top = (cr_u128)(uint64_t)now_ns + (uint64_t)limit->tolerance_ns +
                        (uint64_t)beyond;
    const cr_u128 spent = (cr_u128)(uint64_t)remaining * (uint64_t)T;
    if (spent >= top)
        return tat;
    int64_t floor_tat = (int64_t)(top - spent);
    if (floor_tat > now_ns + CR_DEBT_MAX_NS)
        floor_tat = now_ns + CR_DEBT_MAX_NS;
    return floor_tat > now_ns && floor_tat > tat ? floor_tat : tat;
}

/* fixed_window: its count raised to rate - remaining in the key's window; a
 * wait (remaining 0) past the window's end fills the window holding its last
 * instant (a window's state cannot stop part-way). */
static inline int64_t cr_fixed_follow(const cr_limit *limit, int64_t state, int64_t now_ns,
                                      int64_t remaining, int64_t within_ns)
{
    const int64_t rate = limit->burst, window = limit->tolerance_ns;
    const int64_t last = now_ns + (within_ns > 0 ? within_ns - 1 : 0);
    const cr_fixed_state s = cr_fixed_read(limit, state, now_ns);
    if (last >= s.end && remaining == 0) {
        int64_t end = (cr_window_index(limit, last) + 1) * window;
        if (end < s.end)
            end = s.end;
        const int64_t count = s.count > rate ? s.count : rate; /* a debt stays */
        const int64_t full = end + count;
        return full > state && (end > s.end || count > s.count) ? full : state;
    }
    if (remaining >= rate || rate - remaining <= s.count)
        return state;
    return s.end + (rate - remaining);
}

/* calendar: its count raised to rate - remaining in the key's period; a
 * wait (remaining 0) fills the period (a provider's wait past its end is the
 * provider's: the next period starts fresh). */
static inline int64_t cr_calendar_follow(const cr_limit *limit, int64_t state, int64_t now_ns,
                                         int64_t remaining)
{
    const int64_t rate = limit->burst;
    const cr_fixed_state s = cr_calendar_read(limit, state, now_ns);
    if (remaining >= rate || rate - remaining <= s.count)
        return state;
    return s.end + (rate - remaining);
}

/* sliding_window: the current count raised so that no more than remaining
 * fit now, and for a wait none until its end (as prev decays) within the
 * key's window; a wait past it fills the window holding its last instant,
 * previous count too. */
static inline int64_t cr_sliding_follow(const cr_limit *limit, int64_t state, int64_t now_ns,
                                        int64_t remaining, int64_t within_ns)
{
    const int64_t rate = limit->burst, window = limit->tolerance_ns;
    const int64_t last = now_ns + (within_ns > 0 ? within_ns - 1 : 0);
    cr_sliding_state s = cr_sliding_read(limit, state, now_ns);
    const int64_t window_end = s.start + window;
    if (last >= window_end && remaining == 0) {
        int64_t start = cr_window_index(limit, last) * window;
        if (start < s.start)
            start = s.start;
        cr_sliding_state full = s;
        full.start = start;
        full.base = start + 2 * window;
        full.prev = full.curr = rate;
        const int64_t packed = cr_sliding_pack(limit, &full);
        return packed > state ? packed : state;
    }
    /* the instant whose decay counts: now, or a wait's last instant */
    const int64_t until = remaining > 0 ? now_ns : last;
    const int64_t elapsed = until > s.start ? until - s.start : 0;
    const cr_u128 weighted = (cr_u128)(uint64_t)s.prev * (uint64_t)(window - elapsed);
    const int64_t held = (int64_t)((weighted + (uint64_t)window - 1) / (uint64_t)window);
    if (remaining >= rate || rate - held - remaining <= s.curr)
        return state;
    s.curr = rate - held - remaining;
    return cr_sliding_pack(limit, &s);
}

/* cr_follow (core/follow.c exports it): inline here, so that the stores'
 * entry points call nothing that could touch their locals. */
static inline int64_t cr_follow_core(const cr_limit *limit, int64_t state, int64_t now_ns,
                                     const cr_signal *signal, int64_t pending, double share)
{
    if (!signal)
        return state;
    const int count = signal->count < CR_BOUNDS_MAX ? signal->count : CR_BOUNDS_MAX;
    for (int i = 0; i < count; i++) {
        const cr_bound *bound = &signal->bound[i];
        if (bound->remaining < 0 || bound->within_ns < 0)
            continue; /* never written by cr_signal_read: a caller's own signal */
        const int64_t within = bound->within_ns < CR_FOLLOW_MAX_NS ? bound->within_ns
                                                                   : CR_FOLLOW_MAX_NS;
        const int64_t remaining = cr_follow_ours(bound->remaining, pending, share);
        switch (limit->algorithm) {
        case CR_ALGORITHM_FIXED_WINDOW:
            state = cr_fixed_follow(limit, state, now_ns, remaining, within);
            break;
        case CR_ALGORITHM_SLIDING_WINDOW:
            state = cr_sliding_follow(limit, state, now_ns, remaining, within);
            break;
        case CR_ALGORITHM_CALENDAR:
            state = cr_calendar_follow(limit, state, now_ns, remaining);
            break;
        default:
            state = cr_gcra_follow(limit, state, now_ns, remaining, within);
            break;
        }
    }
    return state;
}

/* A penalty's ban (core/penalty.c): the key refused until now + ban_ns, as a
 * provider's wait holds it (remaining 0 within the ban), without the cap on
 * a provider's wait. gcra: one unit admissible at the ban's end exactly;
 * windows: every window up to the one holding its last instant full;
 * calendar: the period full (a ban past its end holds until it). */
static inline int64_t cr_ban_core(const cr_limit *limit, int64_t state, int64_t now_ns,
                                  int64_t ban_ns)
{
    switch (limit->algorithm) {
    case CR_ALGORITHM_FIXED_WINDOW:
        return cr_fixed_follow(limit, state, now_ns, 0, ban_ns);
    case CR_ALGORITHM_SLIDING_WINDOW:
        return cr_sliding_follow(limit, state, now_ns, 0, ban_ns);
    case CR_ALGORITHM_CALENDAR:
        return cr_calendar_follow(limit, state, now_ns, 0);
    default:
        return cr_gcra_follow(limit, state, now_ns, 0, ban_ns);
    }
}

/* A decision turned away by a penalty's ban of `left_ns` more: nothing
 * admissible, and retry_after (reset_after at least) to the ban's end. */
static inline void cr_penalty_decision(cr_decision *out, int64_t left_ns)
{
    out->remaining = 0;
    if (out->retry_after_ns < left_ns)
        out->retry_after_ns = left_ns;
    if (out->reset_after_ns < left_ns)
        out->reset_after_ns = left_ns;
}

/* A store's operation on one state word; *ok: admitted / reserved / fit (charge) /
 * took a unit (take) / pulled (follow) / (refund, anchor) true. */
CR_HOT int64_t cr_apply(const cr_limit *limit, int64_t state, int64_t now_ns, cr_op *op,
                        cr_decision *out, bool *ok)
{
    switch (op->kind) {
    case CR_OP_RESERVE:
        return cr_reserve_core(limit, state, now_ns, op->cost, op->max_wait_ns, ok, &op->delay_ns);
    case CR_OP_REFUND:
        *ok = true;
        return cr_refund_core(limit, state, now_ns, op->cost, &op->taken);
    case CR_OP_ANCHOR:
        *ok = true;
        return cr_anchor_core(limit, state, now_ns, op->cost);
    case CR_OP_CHARGE:
        return cr_charge_core(limit, state, now_ns, op->cost, out, ok, &op->taken);
    case CR_OP_FOLLOW: {
        const cr_follow_args *follow = cr_follow_args_of(op);
        const int64_t followed = follow->ban_ns > 0
                                     ? cr_ban_core(limit, state, now_ns, follow->ban_ns)
                                     : cr_follow_core(limit, state, now_ns, follow->signal,
                                                      op->cost, follow->share);
        *ok = followed != state;
        return followed;
    }
    case CR_OP_PRIORITY:
        return cr_priority_core(limit, state, now_ns, op->cost, op->max_wait_ns, out, ok);
    case CR_OP_TAKE: {
        const int64_t taken = cr_take_core(limit, state, now_ns, op->cost, &op->taken);
        *ok = op->taken > 0;
        return taken;
    }
    default:
        return cr_decision_core(limit, state, now_ns, op->cost, out, ok);
    }
}

#endif
