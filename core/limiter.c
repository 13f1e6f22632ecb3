/*
 * One key: a single atomic TAT.
 *
 * A live change (docs/design.md §4) must never let a decision read the
 * new limit with the old state or the reverse. The limit and its state live
 * together in a cell that never changes its limit; the limiter points at the
 * current cell. A change builds the next cell with the carried state, then
 * retires the current one by swapping its state for CR_STATE_MOVED, which no
 * decision can have read: a decision that read the old state fails its
 * compare-and-swap and decides again, in the next cell. A decision that
 * commits nothing decided from one cell's limit and state, read before the
 * retirement: it is ordered before the change. The decision path reads one
 * pointer more than before (the cell, in the limiter's read-only line).
 * Retired cells stay until the limiter is freed: a decision may still hold
 * one, and nothing on the hot path says when it lets go.
 *
 * In a shared region the state is the region's pair {generation, state},
 * changed by one 16-byte compare-and-swap: the generation says which limit
 * wrote the state. A decision first follows the region's generation (one
 * read of its change line), then carries a state written under an older
 * limit before deciding (docs/design.md §4). Cells there are this process's
 * view of the region's limits; their own TAT is unused.
 */
#include "limiter.h"
#include "carry.h"
#include "priority.h"
#include "fastclock.h"
#include "region.h"
#include "penalty.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The state of a retired cell: below every state (all are >= 0). */
#define CR_STATE_MOVED INT64_MIN

typedef struct limiter_cell limiter_cell;
struct limiter_cell {
    cr_generation limit;                  /* first: a cell is its limit's generation */
    limiter_cell *_Atomic next;           /* set before the cell is retired */
    _Alignas(64) _Atomic int64_t own_tat; /* a cache line of its own */
    int64_t window_end; /* fixed and sliding window: cr_window_end's cache, in the line a
                           decision swaps anyway */
    /* the tolerance each class may spend (tolerance_ns - reserve_ns), made
     * with the cell: a class's allow() loads its bound as a plain one loads
     * tolerance_ns */
    int64_t class_tau_ns[CR_PRIORITIES_MAX];
};

struct cr_limiter {
    limiter_cell *_Atomic cell; /* the current cell */
    cr_region region;           /* base is NULL for a limiter of this process alone */
    pthread_mutex_t changing;   /* serializes live changes; decisions never take it */
    const cr_limit *replaced;   /* the region's limit that opening replaced, or NULL */
    cr_counts counts;           /* this process's block, or the region's */
    cr_lines *_Atomic lines;    /* this process's waiters (cr_wait_step), made on first use */
    cr_penalty_box *penalty;    /* the penalty box, or NULL (set before the first decision) */
};

static limiter_cell *cell_new(const cr_limit *limit, int64_t state, limiter_cell *older)
{
    limiter_cell *cell = aligned_alloc(64, sizeof *cell);
    if (!cell)
        return NULL;
    memset(cell, 0, sizeof *cell);
    atomic_init(&cell->own_tat, state);
    atomic_init(&cell->next, NULL);
    cell->limit.limit = *limit;
    cell->limit.older = older ? &older->limit : NULL;
    for (int32_t c = 0; c < limit->npriorities; c++)
        cell->class_tau_ns[c] = limit->tolerance_ns - limit->priorities[c].reserve_ns;
    return cell;
}

static limiter_cell *older_cell(const limiter_cell *cell)
{
    return (limiter_cell *)cell->limit.older; /* every generation of a limiter is a cell */
}

/* Carries the region's state to the generation of `cell`, when a state of
 * an older one is there (a Limiter's one state is converted by each change). */
static void convert_shared(cr_limiter *limiter, const limiter_cell *cell, int64_t now_ns)
{
    cr_pair *pair = limiter->region.limiter_state;
    for (;;) {
        const uint64_t generation = cr_pair_word(pair);
        const int64_t state = cr_pair_state(pair);
        if (cr_pair_word(pair) != generation)
            continue;
        if (generation >= cell->limit.generation)
            return;
        const int64_t carried = cr_carry_since(&limiter->region, CR_PLAN_DEFAULT, &cell->limit,
                                               generation, state, now_ns);
        if (cr_pair_cas(pair, cr_pair_make(generation, state),
                        cr_pair_make(cell->limit.generation, carried)))
            return;
    }
}

/* Opens the region and follows its limit, or changes it to this one. */
static cr_status open_shared(cr_limiter *limiter, limiter_cell *cell, const char *path,
                             int64_t mode, cr_on_change on_change)
{
    cr_region_spec spec = {.kind = CR_REGION_LIMITER, .capacity = 1};
    cr_status status = cr_region_open(&limiter->region, &spec, &cell->limit.limit, path, mode);
    if (status != CR_OK)
        return status;
    /* the region's box: every process counts strikes there, under the region's penalty */
    status = cr_penalty_box_region(&limiter->penalty, limiter->region.penalty, 1,
                                   limiter->region.seed);
    if (status != CR_OK) {
        cr_region_close(&limiter->region);
        return status;
    }
    cr_lock *lock = cr_region_change_lock(&limiter->region);
    status = cr_lock_acquire(lock);
    if (status == CR_OK) {
        cr_limit *replaced = calloc(1, sizeof *replaced);
        bool changed = false;
        status = replaced ? cr_region_join(&limiter->region, &cell->limit.limit, on_change,
                                           cr_read_clock(&cell->limit.limit), &cell->limit,
                                           replaced, &changed)
                          : CR_E_NOMEM;
        if (status == CR_OK && changed) {
            convert_shared(limiter, cell, cell->limit.changed_at);
            limiter->replaced = replaced;
        } else {
            free(replaced);
        }
        cr_lock_release(lock);
    }
    if (status != CR_OK) {
        cr_penalty_box_free(limiter->penalty);
        limiter->penalty = NULL;
        cr_region_close(&limiter->region);
    }
    return status;
}

cr_status cr_limiter_open(cr_limiter **out, const cr_limit *limit, const char *path, int64_t mode,
                          cr_on_change on_change)
{
    if (on_change != CR_CHANGE_APPLY && on_change != CR_CHANGE_REFUSE)
        return CR_E_ON_CHANGE;
    cr_limiter *limiter = malloc(sizeof *limiter);
    limiter_cell *cell = cell_new(limit, 0, NULL);
    if (!limiter || !cell) {
        free(limiter);
        free(cell);
        return CR_E_NOMEM;
    }
    memset(limiter, 0, sizeof *limiter);
    pthread_mutex_init(&limiter->changing, NULL);
    cr_status status = CR_OK;
    if (path) {
        status = open_shared(limiter, cell, path, mode, on_change);
        if (status == CR_OK)
            cr_counters_join(&limiter->counts, limiter->region.counters, limiter->region.by,
                             CR_COUNTER_LANES);
    } else if (!cr_counters_new(&limiter->counts)) {
        status = CR_E_NOMEM;
    } else if (limit->npriorities > 0 && !cr_counters_by_new(&limiter->counts)) {
        cr_counters_leave(&limiter->counts); /* counted by class */
        status = CR_E_NOMEM;
    }
    if (status != CR_OK) {
        pthread_mutex_destroy(&limiter->changing);
        free(limiter);
        free(cell);
        return status;
    }
    atomic_init(&limiter->cell, cell);
    atomic_init(&limiter->lines, NULL);
    *out = limiter;
    return CR_OK;
}

cr_status cr_limiter_set_sync(cr_limiter *limiter, double seconds)
{
    return cr_region_set_sync(&limiter->region, seconds);
}

cr_status cr_limiter_new(cr_limiter **out, const cr_limit *limit)
{
    return cr_limiter_open(out, limit, NULL, 0, CR_CHANGE_APPLY);
}

void cr_limiter_free(cr_limiter *limiter)
{
    if (!limiter)
        return;
    cr_counters_leave(&limiter->counts);
    cr_region_close(&limiter->region);
    limiter_cell *cell = atomic_load_explicit(&limiter->cell, memory_order_relaxed);
    while (cell) {
        limiter_cell *older = older_cell(cell);
        free(cell);
        cell = older;
    }
    free((cr_limit *)limiter->replaced);
    cr_lines_free(atomic_load_explicit(&limiter->lines, memory_order_relaxed));
    cr_penalty_box_free(limiter->penalty);
    pthread_mutex_destroy(&limiter->changing);
    free(limiter);
}

cr_lines *cr_limiter_lines(cr_limiter *limiter, uint64_t *fingerprint, bool make)
{
    *fingerprint = 1;
    cr_lines *lines = atomic_load_explicit(&limiter->lines, memory_order_acquire);
    if (lines || !make)
        return lines;
    cr_lines *made = cr_lines_new(1);
    if (made && !atomic_compare_exchange_strong_explicit(
                    &limiter->lines, &lines, made, memory_order_acq_rel, memory_order_acquire)) {
        cr_lines_free(made); /* another thread made it first: `lines` is its */
        return lines;
    }
    return made;
}

const cr_limit *cr_limiter_replaced(const cr_limiter *limiter) { return limiter->replaced; }

static limiter_cell *current_cell(const cr_limiter *limiter)
{
    /* cr_limiter_free alone writes through a const limiter's cells */
    return atomic_load_explicit(&((cr_limiter *)limiter)->cell, memory_order_acquire);
}

const cr_limit *cr_limiter_limit(const cr_limiter *limiter)
{
    return &current_cell(limiter)->limit.limit;
}

/* The cell of the region's current generation, made when this process
 * meets a change another made. */
static cr_status follow(cr_limiter *limiter, limiter_cell **cell)
{
    pthread_mutex_lock(&limiter->changing);
    limiter_cell *current = current_cell(limiter);
    limiter_cell *next = cell_new(&current->limit.limit, 0, current);
    cr_status status = next ? cr_region_adopt(&limiter->region, CR_PLAN_DEFAULT, &current->limit,
                                              &next->limit)
                            : CR_E_NOMEM;
    if (status == CR_OK && next->limit.generation != current->limit.generation)
        atomic_store_explicit(&limiter->cell, next, memory_order_release);
    else
        free(next);
    pthread_mutex_unlock(&limiter->changing);
    *cell = current_cell(limiter);
    return status;
}

/* limiter_apply in a shared region: out of line, so that the entry points
 * of a limiter of one process keep their lean frame. */
__attribute__((noinline)) static cr_status shared_apply(cr_limiter *limiter, int64_t now_ns,
                                                        cr_op *op, bool commit, cr_decision *out,
                                                        bool *ok)
{
    limiter_cell *cell = current_cell(limiter);
    cr_status status = CR_OK;
    if (commit)
        cr_region_tick(&limiter->region);
    if (__builtin_expect(cr_region_generation(&limiter->region) != cell->limit.generation, 0) &&
        (status = follow(limiter, &cell)) != CR_OK)
        return status;
    now_ns = cr_resolve_now(&cell->limit.limit, now_ns);
    cr_pair *pair = limiter->region.limiter_state;
    for (;;) {
        const uint64_t generation = cr_pair_word(pair);
        const int64_t state = cr_pair_state(pair);
        if (cr_pair_word(pair) != generation)
            continue; /* torn by a concurrent write: read again */
        if (__builtin_expect(generation != cell->limit.generation, 0)) {
            if (generation > cell->limit.generation) {
                const uint64_t seen = cell->limit.generation;
                if ((status = follow(limiter, &cell)) != CR_OK) /* a newer limit wrote it */
                    return status;
                if (cell->limit.generation == seen &&
                    cr_region_generation(&limiter->region) == seen)
                    /* a generation the region never had (a damaged file): fully used,
                     * never a fresh allowance, and never a loop */
                    cr_pair_cas(pair, cr_pair_make(generation, state),
                                cr_pair_make(seen, cr_full(&cell->limit.limit, now_ns)));
            } else {
                convert_shared(limiter, cell, now_ns);
            }
            continue;
        }
        int64_t new_state = cr_apply(&cell->limit.limit, state, now_ns, op, out, ok);
        if (new_state == state || !commit ||
            cr_pair_cas(pair, cr_pair_make(generation, state),
                        cr_pair_make(generation, new_state))) {
            cr_count_op(&limiter->counts, &cell->limit.limit, op, commit, *ok, CR_PLAN_DEFAULT);
            return CR_OK;
        }
    }
}

/* Applies `op` by compare-and-swap; `out` NULL decides admission alone (the
 * allow() path). */
__attribute__((always_inline)) static inline cr_status limiter_apply(cr_limiter *limiter,
                                                                     int64_t now_ns, cr_op *op,
                                                                     bool commit, cr_decision *out,
                                                                     bool *ok)
{
    cr_status status = cr_check_args(now_ns, op->cost);
    if (status != CR_OK)
        return status;
    if (limiter->region.base)
        return shared_apply(limiter, now_ns, op, commit, out, ok);
    limiter_cell *cell = current_cell(limiter);
    now_ns = cr_resolve_now(&cell->limit.limit, now_ns); /* a change keeps the clock */
    int64_t state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
    for (;;) {
        if (__builtin_expect(state == CR_STATE_MOVED, 0)) {
            /* retired by a live change: its successor holds the state */
            cell = atomic_load_explicit(&cell->next, memory_order_acquire);
            state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
            continue;
        }
        int64_t new_state = cr_apply(&cell->limit.limit, state, now_ns, op, out, ok);
        /* A turn-away, a probe or a peek writes nothing. On a lost race the
         * CAS reloads `state` and the decision is made again from it. */
        if (new_state == state || !commit ||
            atomic_compare_exchange_weak_explicit(&cell->own_tat, &state, new_state,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            cr_count_op(&limiter->counts, &cell->limit.limit, op, commit, *ok, CR_PLAN_DEFAULT);
            return CR_OK;
        }
    }
}

/* limiter_apply out of line, for the operations off the admission path (a
 * wait's reservation, refund, anchor, follow, a look, a ban): the admission
 * entry points inline limiter_apply, each copy specialised to its operation;
 * one shared copy for the rest keeps the core quick to build. */
__attribute__((noinline)) static cr_status limiter_apply_op(cr_limiter *limiter, int64_t now_ns,
                                                            cr_op *op, bool commit,
                                                            cr_decision *out, bool *ok)
{
    return limiter_apply(limiter, now_ns, op, commit, out, ok);
}

/* A turn-away under a penalty: a strike, a ban written into the state when
 * it starts one, and the decision's retry_after to the ban's end. Out of
 * line: a limit without a penalty pays one test of a refusal. */
__attribute__((noinline, cold)) static void limiter_penalize(cr_limiter *limiter, int64_t now_ns,
                                                             cr_decision *out)
{
    now_ns = cr_resolve_now(cr_limiter_limit(limiter), now_ns);
    bool started;
    const int64_t ban_end = cr_penalty_box_refused(limiter->penalty, "", 0, now_ns, &started);
    if (ban_end == 0)
        return;
    if (started) {
        const cr_follow_args args = {NULL, 1.0, ban_end - now_ns};
        cr_op op = {CR_OP_FOLLOW, 0, cr_follow_word(&args), 0, 0, false};
        bool pulled;
        (void)limiter_apply_op(limiter, now_ns, &op, true, NULL, &pulled);
    }
    if (out)
        cr_penalty_decision(out, ban_end - now_ns);
}

cr_status cr_limiter_set_penalty(cr_limiter *limiter, const cr_penalty *penalty)
{
    if (limiter->region.base) /* the region's penalty: the newest wins */
        return cr_penalty_box_set(limiter->penalty, penalty);
    cr_penalty_box *box;
    cr_status status = cr_penalty_box_new(&box, penalty, 1);
    if (status != CR_OK)
        return status;
    cr_penalty_box_free(limiter->penalty);
    limiter->penalty = box;
    return CR_OK;
}

cr_status cr_limiter_check(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool commit,
                           cr_decision *out)
{
    bool allowed;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    const cr_status status = limiter_apply(limiter, now_ns, &op, commit, out, &allowed);
    if (__builtin_expect(status == CR_OK && !allowed, 0) && limiter->penalty && commit)
        limiter_penalize(limiter, now_ns, out);
    return status;
}

/* allow() through limiter_apply: the shared region, the windows, bad
 * arguments. */
__attribute__((noinline)) static cr_status allow_apply(cr_limiter *limiter, int64_t now_ns,
                                                       int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    const cr_status status = limiter_apply(limiter, now_ns, &op, true, NULL, allowed);
    if (status == CR_OK && !*allowed && limiter->penalty)
        limiter_penalize(limiter, now_ns, NULL);
    return status;
}

/* A class's decision through limiter_apply: out NULL decides admission alone. */
__attribute__((noinline)) static cr_status
priority_apply(cr_limiter *limiter, int64_t now_ns, int64_t cost, int32_t priority, bool *allowed)
{
    cr_op op = {CR_OP_PRIORITY, cost, priority, 0, 0, false};
    return limiter_apply(limiter, now_ns, &op, true, NULL, allowed);
}

static cr_status fixed_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);
static cr_status sliding_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);
static cr_status calendar_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);

/* The common allow(): a limiter of this process (a change keeps the
 * algorithm and the clock), its decision limiter_apply's, with nothing kept
 * across the compare-and-swap but the cell and the time, and the verdict
 * stored once it is final. `classed` (a constant): a decision in the class
 * at `priority` (an index checked here, a negative one too), else a plain
 * one (cr_limiter_allow's path has no class in it). `algorithm` (a constant):
 * CR_ALGORITHM_GCRA for gcra and token_bucket, whose entry calls nothing on
 * its common path and keeps no registers; a window algorithm for its own
 * instance (window_allow), out of that entry's frame: a calendar's decision
 * may call (its boundary), and the windows have no classes (a change keeps
 * the algorithm: the cell's says which instance decides). */
__attribute__((always_inline)) static inline cr_status
allow_fast(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool classed, int32_t priority,
           bool *allowed, cr_algorithm algorithm)
{
    const bool window = algorithm >= CR_ALGORITHM_FIXED_WINDOW;
    limiter_cell *cell = current_cell(limiter);
    if (classed &&
        __builtin_expect((uint32_t)priority >= (uint32_t)cell->limit.limit.npriorities,
                         0)) /* a negative index too; the classes: kept by every change */
        return cr_priority_check(&cell->limit.limit, priority);
    if (classed && priority < 0)
        __builtin_unreachable(); /* checked above: no sign test in the counting */
    if (!window && __builtin_expect(cr_is_window(&cell->limit.limit), 0)) {
        switch (cell->limit.limit.algorithm) { /* no classes: priority < 0 */
        case CR_ALGORITHM_FIXED_WINDOW:
            return fixed_allow(limiter, now_ns, cost, allowed);
        case CR_ALGORITHM_SLIDING_WINDOW:
            return sliding_allow(limiter, now_ns, cost, allowed);
        default:
            return calendar_allow(limiter, now_ns, cost, allowed);
        }
    }
    if (__builtin_expect(limiter->region.base != NULL || cr_check_args(now_ns, cost) != CR_OK, 0))
        return !classed ? allow_apply(limiter, now_ns, cost, allowed)
                        : priority_apply(limiter, now_ns, cost, priority, allowed);
    int64_t line_ns;
    if (now_ns == CR_CLOCK) {
        if (!__builtin_expect(window ? cr_window_line_time(&line_ns)
                                     : cr_steady_line_time(&cell->limit.limit, &line_ns),
                              1))
            return !classed ? allow_apply(limiter, now_ns, cost, allowed)
                            : priority_apply(limiter, now_ns, cost, priority, allowed);
        now_ns = line_ns;
    }
    int64_t state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
    bool admitted;
    for (;;) {
        if (__builtin_expect(state == CR_STATE_MOVED, 0)) {
            cell = atomic_load_explicit(&cell->next, memory_order_acquire);
            state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
            continue;
        }
        const int64_t tau = classed ? cell->class_tau_ns[priority] : cell->limit.limit.tolerance_ns;
        const int64_t new_state = window ? cr_decision_of(&cell->limit.limit, algorithm,
                                                          &cell->window_end, state, now_ns, cost,
                                                          NULL, &admitted)
                                         : cr_gcra_decide(&cell->limit.limit, state, now_ns, cost,
                                                          NULL, &admitted, tau);
        if (new_state == state ||
            atomic_compare_exchange_weak_explicit(&cell->own_tat, &state, new_state,
                                                  memory_order_acq_rel, memory_order_acquire))
            break;
    }
    *allowed = admitted;
    if (__builtin_expect(!admitted, 0) && !classed && limiter->penalty)
        limiter_penalize(limiter, now_ns, NULL);
    return (cr_status)cr_count_own_tail(&limiter->counts, admitted, cost, cell->limit.limit.burst,
                                        classed ? priority : -1); /* a class's: by class too */
}

/* allow() of a window algorithm in one process, an instance for each.
 * Through limiter_apply it cost twice gcra's instructions (saved registers,
 * the operation on the stack, the general counting, every algorithm's
 * code) and kept the clock's read further from the swap
 * (docs/design/benchmarks.md). */
__attribute__((noinline)) static cr_status fixed_allow(cr_limiter *limiter, int64_t now_ns,
                                                       int64_t cost, bool *allowed)
{
    return allow_fast(limiter, now_ns, cost, false, -1, allowed, CR_ALGORITHM_FIXED_WINDOW);
}

__attribute__((noinline)) static cr_status sliding_allow(cr_limiter *limiter, int64_t now_ns,
                                                         int64_t cost, bool *allowed)
{
    return allow_fast(limiter, now_ns, cost, false, -1, allowed, CR_ALGORITHM_SLIDING_WINDOW);
}

__attribute__((noinline)) static cr_status calendar_allow(cr_limiter *limiter, int64_t now_ns,
                                                          int64_t cost, bool *allowed)
{
    return allow_fast(limiter, now_ns, cost, false, -1, allowed, CR_ALGORITHM_CALENDAR);
}

cr_status cr_limiter_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed)
{
    return allow_fast(limiter, now_ns, cost, false, -1, allowed, CR_ALGORITHM_GCRA);
}

/* A class's check or peek (into `out`) through limiter_apply: out of line, so
 * that the allow() path of cr_limiter_check_priority keeps its lean frame. */
__attribute__((noinline)) static cr_status priority_check(cr_limiter *limiter, int64_t now_ns,
                                                          int64_t cost, int32_t priority,
                                                          bool commit, cr_decision *out,
                                                          bool *allowed)
{
    cr_status status = cr_priority_check(cr_limiter_limit(limiter), priority);
    if (status != CR_OK)
        return status; /* the classes never change: a live change keeps them */
    cr_op op = {CR_OP_PRIORITY, cost, priority, 0, 0, false};
    bool verdict = false;
    status = limiter_apply(limiter, now_ns, &op, commit, out, &verdict);
    if (allowed)
        *allowed = verdict;
    return status;
}

cr_status cr_limiter_check_priority(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                                    int32_t priority, bool commit, cr_decision *out, bool *allowed)
{
    if (__builtin_expect(out != NULL || !commit, 0))
        return priority_check(limiter, now_ns, cost, priority, commit, out, allowed);
    return cr_limiter_allow_priority(limiter, now_ns, cost, priority, allowed);
}

cr_status cr_limiter_allow_priority(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                                    int32_t priority, bool *allowed)
{
    return allow_fast(limiter, now_ns, cost, true, priority, allowed, CR_ALGORITHM_GCRA);
}

cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0, false};
    return limiter_apply_op(limiter, now_ns, &op, false, NULL, allowed);
}

cr_status cr_limiter_reserve(cr_limiter *limiter, int64_t now_ns, int64_t cost, int64_t max_wait_ns,
                             bool *reserved, int64_t *delay_ns)
{
    if (max_wait_ns < 0)
        return CR_E_TIMEOUT;
    cr_op op = {CR_OP_RESERVE, cost, max_wait_ns, 0, 0, false};
    cr_status status = limiter_apply_op(limiter, now_ns, &op, true, NULL, reserved);
    *delay_ns = op.delay_ns;
    return status;
}

cr_status cr_limiter_refund(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_REFUND, cost, 0, 0, 0, false};
    return limiter_apply_op(limiter, now_ns, &op, true, NULL, &done);
}

cr_status cr_limiter_anchor(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_ANCHOR, cost, 0, 0, 0, false};
    return limiter_apply_op(limiter, now_ns, &op, true, NULL, &done);
}

cr_status cr_limiter_charge(cr_limiter *limiter, int64_t now_ns, int64_t cost, cr_decision *out)
{
    bool fit;
    cr_op op = {CR_OP_CHARGE, cost, 0, 0, 0, false};
    return limiter_apply(limiter, now_ns, &op, true, out, &fit);
}

cr_status cr_limiter_uncounted(cr_limiter *limiter, int64_t now_ns, cr_op_kind kind, int64_t cost,
                               cr_decision *out)
{
    bool ok;
    cr_op op = {kind, cost, 0, 0, 0, true};
    return limiter_apply_op(limiter, now_ns, &op, true, out, &ok);
}

cr_status cr_limiter_take(cr_limiter *limiter, int64_t now_ns, int64_t max_cost, int64_t *taken)
{
    bool took;
    if (max_cost < 0)
        return CR_E_MAX_COST;
    cr_op op = {CR_OP_TAKE, max_cost, 0, 0, 0, false};
    cr_status status = limiter_apply(limiter, now_ns, &op, true, NULL, &took);
    if (status == CR_OK)
        *taken = op.taken;
    return status;
}

cr_status cr_limiter_follow(cr_limiter *limiter, int64_t now_ns, const cr_signal *signal,
                            int64_t pending, double share, bool *pulled)
{
    cr_status status = cr_follow_check(pending, share);
    if (status != CR_OK)
        return status;
    const cr_follow_args args = {signal, share, 0};
    cr_op op = {CR_OP_FOLLOW, pending, cr_follow_word(&args), 0, 0, false};
    *pulled = false;
    return limiter_apply_op(limiter, now_ns, &op, true, NULL, pulled);
}

void cr_limiter_reset(cr_limiter *limiter)
{
    limiter_cell *cell = current_cell(limiter);
    if (limiter->penalty)
        cr_penalty_box_release(limiter->penalty, "", 0);
    if (limiter->region.base) {
        /* idle under every limit: the current generation, or the one that wrote */
        cr_pair *pair = limiter->region.limiter_state;
        for (;;) {
            const uint64_t generation = cr_pair_word(pair);
            const int64_t state = cr_pair_state(pair);
            if (cr_pair_cas(pair, cr_pair_make(generation, state), cr_pair_make(generation, 0)))
                return;
        }
    }
    int64_t state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
    for (;;) {
        if (state == CR_STATE_MOVED) {
            cell = atomic_load_explicit(&cell->next, memory_order_acquire);
            state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
        } else if (atomic_compare_exchange_weak_explicit(
                       &cell->own_tat, &state, 0, memory_order_acq_rel, memory_order_acquire)) {
            return;
        }
    }
}

/* The change in a shared region, under both locks: the region's limit
 * becomes `next`'s, and the state is carried to it. */
static void change_shared(cr_limiter *limiter, limiter_cell *next)
{
    next->limit.generation = cr_region_publish(&limiter->region, CR_PLAN_DEFAULT,
                                               &next->limit.limit, next->limit.changed_at);
    atomic_store_explicit(&limiter->cell, next, memory_order_release);
    convert_shared(limiter, next, next->limit.changed_at);
}

/* The change of a limiter of one process, under `changing`. */
static void change_own(cr_limiter *limiter, limiter_cell *cell, limiter_cell *next)
{
    next->limit.generation = cell->limit.generation + 1;
    atomic_store_explicit(&cell->next, next, memory_order_release);
    /* Retire the cell at the state its successor carries; a decision that
     * committed meanwhile makes the swap fail, and the carry is made again. */
    int64_t state = atomic_load_explicit(&cell->own_tat, memory_order_acquire);
    do {
        atomic_store_explicit(
            &next->own_tat,
            cr_carry(&cell->limit.limit, &next->limit.limit, state, next->limit.changed_at),
            memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&cell->own_tat, &state, CR_STATE_MOVED,
                                                    memory_order_acq_rel, memory_order_acquire));
    atomic_store_explicit(&limiter->cell, next, memory_order_release);
}

cr_status cr_limiter_reconfigure(cr_limiter *limiter, const cr_limit *limit, int64_t now_ns)
{
    cr_status status = cr_check_args(now_ns, 0);
    if (status != CR_OK)
        return status;
    cr_lock *lock = cr_region_change_lock(&limiter->region);
    if (lock && (status = cr_lock_acquire(lock)) != CR_OK)
        return status;
    limiter_cell *cell = NULL;
    if (lock)
        status = follow(limiter, &cell); /* changes start from the region's latest */
    pthread_mutex_lock(&limiter->changing);
    cell = current_cell(limiter);
    if (status == CR_OK)
        status = cr_limit_reconfigurable(&cell->limit.limit, limit);
    if (status == CR_OK && lock)
        status = cr_region_room(&limiter->region, limit); /* a calendar's zone */
    cr_limit kept = *limit;
    cr_priorities_keep(&kept, &cell->limit.limit); /* the classes stay the limiter's */
    if (status == CR_OK && !cr_limit_identical(&cell->limit.limit, &kept)) {
        kept.fast_clock = cell->limit.limit.fast_clock;
        limiter_cell *next = cell_new(&kept, 0, cell);
        if (next) {
            next->limit.changed_at = cr_resolve_now(&cell->limit.limit, now_ns);
            if (lock)
                change_shared(limiter, next);
            else
                change_own(limiter, cell, next);
        } else {
            status = CR_E_NOMEM;
        }
    }
    pthread_mutex_unlock(&limiter->changing);
    if (lock)
        cr_lock_release(lock);
    return status;
}

const cr_counts *cr_limiter_counts(const cr_limiter *limiter) { return &limiter->counts; }

uint64_t cr_limiter_bans(cr_limiter *limiter)
{
    return limiter->penalty ? cr_penalty_box_bans(limiter->penalty) : 0;
}

void cr_limiter_stats(const cr_limiter *limiter, cr_stats *out)
{
    cr_counters_rate_stats(limiter->counts.block, limiter->counts.nlanes, 0, out);
    out->bans = limiter->penalty ? cr_penalty_box_bans(limiter->penalty) : 0;
}

void cr_limiter_stats_by(const cr_limiter *limiter, cr_stats_by *out)
{
    cr_counters_stats_by(&limiter->counts, NULL, cr_limiter_limit(limiter), out);
}

cr_status cr_limiter_reset_stats(cr_limiter *limiter)
{
    if (limiter->penalty)
        cr_penalty_box_reset_bans(limiter->penalty);
    return cr_counts_reset(&limiter->counts, cr_region_change_lock(&limiter->region), 0);
}

void cr_limiter_would_refuse(cr_limiter *limiter, int64_t cost, int32_t priority)
{
    cr_count_would_refuse(&limiter->counts, cost, CR_PLAN_DEFAULT, priority);
}
