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
 */
#include "cellrate.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The state of a retired cell: below every state (all are >= 0). */
#define CR_STATE_MOVED INT64_MIN

typedef struct limiter_cell limiter_cell;
struct limiter_cell {
    _Atomic int64_t *tat; /* own_tat, or the TAT in a shared region */
    cr_limit limit;
    limiter_cell *_Atomic next;           /* set before the cell is retired */
    limiter_cell *older;                  /* the cells before it, freed with the limiter */
    _Alignas(64) _Atomic int64_t own_tat; /* a cache line of its own */
};

struct cr_limiter {
    limiter_cell *_Atomic cell; /* the current cell */
    cr_region region;           /* base is NULL for a limiter of this process alone */
    pthread_mutex_t changing;   /* serializes live changes; decisions never take it */
};

static limiter_cell *cell_new(const cr_limit *limit, int64_t state, limiter_cell *older)
{
    limiter_cell *cell = aligned_alloc(64, sizeof *cell);
    if (!cell)
        return NULL;
    memset(cell, 0, sizeof *cell);
    atomic_init(&cell->own_tat, state);
    atomic_init(&cell->next, NULL);
    cell->tat = &cell->own_tat;
    cell->limit = *limit;
    cell->older = older;
    return cell;
}

cr_status cr_limiter_open(cr_limiter **out, const cr_limit *limit, const char *path, int64_t mode)
{
    cr_limiter *limiter = malloc(sizeof *limiter);
    limiter_cell *cell = cell_new(limit, 0, NULL);
    if (!limiter || !cell) {
        free(limiter);
        free(cell);
        return CR_E_NOMEM;
    }
    memset(limiter, 0, sizeof *limiter);
    pthread_mutex_init(&limiter->changing, NULL);
    if (path) {
        cr_region_spec spec = {.kind = CR_REGION_LIMITER, .capacity = 1};
        cr_status status = cr_region_open(&limiter->region, &spec, limit, path, mode);
        if (status != CR_OK) {
            pthread_mutex_destroy(&limiter->changing);
            free(limiter);
            free(cell);
            return status;
        }
        cell->tat = limiter->region.tat;
    }
    atomic_init(&limiter->cell, cell);
    *out = limiter;
    return CR_OK;
}

cr_status cr_limiter_new(cr_limiter **out, const cr_limit *limit)
{
    return cr_limiter_open(out, limit, NULL, 0);
}

void cr_limiter_free(cr_limiter *limiter)
{
    if (!limiter)
        return;
    cr_region_close(&limiter->region);
    limiter_cell *cell = atomic_load_explicit(&limiter->cell, memory_order_relaxed);
    while (cell) {
        limiter_cell *older = cell->older;
        free(cell);
        cell = older;
    }
    pthread_mutex_destroy(&limiter->changing);
    free(limiter);
}

static limiter_cell *current_cell(const cr_limiter *limiter)
{
    /* cr_limiter_free alone writes through a const limiter's cells */
    return atomic_load_explicit(&((cr_limiter *)limiter)->cell, memory_order_acquire);
}

const cr_limit *cr_limiter_limit(const cr_limiter *limiter)
{
    return &current_cell(limiter)->limit;
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
    limiter_cell *cell = current_cell(limiter);
    now_ns = cr_resolve_now(&cell->limit, now_ns); /* a change keeps the clock */
    int64_t state = atomic_load_explicit(cell->tat, memory_order_acquire);
    for (;;) {
        if (__builtin_expect(state == CR_STATE_MOVED, 0)) {
            /* retired by a live change: its successor holds the state */
            cell = atomic_load_explicit(&cell->next, memory_order_acquire);
            state = atomic_load_explicit(cell->tat, memory_order_acquire);
            continue;
        }
        int64_t new_state = cr_apply(&cell->limit, state, now_ns, op, out, ok);
        /* A turn-away, a probe or a peek writes nothing. On a lost race the
         * CAS reloads `state` and the decision is made again from it. */
        if (new_state == state || !commit ||
            atomic_compare_exchange_weak_explicit(cell->tat, &state, new_state,
                                                  memory_order_acq_rel, memory_order_acquire))
            return CR_OK;
    }
}

cr_status cr_limiter_check(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool commit,
                           cr_decision *out)
{
    bool allowed;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, commit, out, &allowed);
}

cr_status cr_limiter_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, allowed);
}

cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, false, NULL, allowed);
}

cr_status cr_limiter_reserve(cr_limiter *limiter, int64_t now_ns, int64_t cost, int64_t max_wait_ns,
                             bool *reserved, int64_t *delay_ns)
{
    if (max_wait_ns < 0)
        return CR_E_TIMEOUT;
    cr_op op = {CR_OP_RESERVE, cost, max_wait_ns, 0, 0};
    cr_status status = limiter_apply(limiter, now_ns, &op, true, NULL, reserved);
    *delay_ns = op.delay_ns;
    return status;
}

cr_status cr_limiter_refund(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_REFUND, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, &done);
}

cr_status cr_limiter_anchor(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_ANCHOR, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, &done);
}

cr_status cr_limiter_charge(cr_limiter *limiter, int64_t now_ns, int64_t cost, cr_decision *out)
{
    bool fit;
    cr_op op = {CR_OP_CHARGE, cost, 0, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, out, &fit);
}

cr_status cr_limiter_take(cr_limiter *limiter, int64_t now_ns, int64_t max_cost, int64_t *taken)
{
    bool took;
    if (max_cost < 0)
        return CR_E_MAX_COST;
    cr_op op = {CR_OP_TAKE, max_cost, 0, 0, 0};
    cr_status status = limiter_apply(limiter, now_ns, &op, true, NULL, &took);
    if (status == CR_OK)
        *taken = op.taken;
    return status;
}

void cr_limiter_reset(cr_limiter *limiter)
{
    limiter_cell *cell = current_cell(limiter);
    int64_t state = atomic_load_explicit(cell->tat, memory_order_acquire);
    for (;;) {
        if (state == CR_STATE_MOVED) {
            cell = atomic_load_explicit(&cell->next, memory_order_acquire);
            state = atomic_load_explicit(cell->tat, memory_order_acquire);
        } else if (atomic_compare_exchange_weak_explicit(cell->tat, &state, 0, memory_order_acq_rel,
                                                         memory_order_acquire)) {
            return;
        }
    }
}

cr_status cr_limiter_reconfigure(cr_limiter *limiter, const cr_limit *limit, int64_t now_ns)
{
    if (limiter->region.base)
        return CR_E_SHARED_RECONFIGURE;
    cr_status status = cr_check_args(now_ns, 0);
    if (status != CR_OK)
        return status;
    pthread_mutex_lock(&limiter->changing);
    limiter_cell *cell = current_cell(limiter);
    status = cr_limit_reconfigurable(&cell->limit, limit);
    if (status != CR_OK || cr_limit_identical(&cell->limit, limit)) {
        pthread_mutex_unlock(&limiter->changing); /* the same limit: nothing changes */
        return status;
    }
    cr_limit kept = *limit;
    kept.fast_clock = cell->limit.fast_clock;
    now_ns = cr_resolve_now(&cell->limit, now_ns);
    limiter_cell *next = cell_new(&kept, 0, cell);
    if (!next) {
        pthread_mutex_unlock(&limiter->changing);
        return CR_E_NOMEM;
    }
    atomic_store_explicit(&cell->next, next, memory_order_release);
    /* Retire the cell at the state its successor carries; a decision that
     * committed meanwhile makes the swap fail, and the carry is made again. */
    int64_t state = atomic_load_explicit(cell->tat, memory_order_acquire);
    do {
        atomic_store_explicit(&next->own_tat, cr_carry(&cell->limit, &kept, state, now_ns),
                              memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(cell->tat, &state, CR_STATE_MOVED,
                                                    memory_order_acq_rel, memory_order_acquire));
    atomic_store_explicit(&limiter->cell, next, memory_order_release);
    pthread_mutex_unlock(&limiter->changing);
    return CR_OK;
}
