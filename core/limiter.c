/* One key: a single atomic TAT. */
#include "cellrate.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct cr_limiter {
    _Atomic int64_t *tat; /* own_tat, or the TAT in a shared region */
    cr_limit limit;
    cr_region region; /* base is NULL for a limiter of this process alone */
    _Alignas(64) _Atomic int64_t own_tat; /* a cache line of its own */
};

cr_status cr_limiter_open(cr_limiter **out, const cr_limit *limit, const char *path,
                          int64_t mode)
{
    cr_limiter *limiter = aligned_alloc(64, sizeof *limiter);
    if (!limiter)
        return CR_E_NOMEM;
    memset(limiter, 0, sizeof *limiter);
    atomic_init(&limiter->own_tat, 0);
    limiter->tat = &limiter->own_tat;
    limiter->limit = *limit;
    if (path) {
        cr_region_spec spec = {.kind = CR_REGION_LIMITER, .capacity = 1};
        cr_status status = cr_region_open(&limiter->region, &spec, limit, path, mode);
        if (status != CR_OK) {
            free(limiter);
            return status;
        }
        limiter->tat = limiter->region.tat;
    }
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
    free(limiter);
}

const cr_limit *cr_limiter_limit(const cr_limiter *limiter) { return &limiter->limit; }

/* Applies `op` by compare-and-swap; `out` NULL decides admission alone (the
 * allow() path). */
__attribute__((always_inline)) static inline cr_status limiter_apply(cr_limiter *limiter, int64_t now_ns, cr_op *op,
                                      bool commit, cr_decision *out, bool *ok)
{
    cr_status status = cr_check_args(now_ns, op->cost);
    if (status != CR_OK)
        return status;
    now_ns = cr_resolve_now(&limiter->limit, now_ns);
    int64_t state = atomic_load_explicit(limiter->tat, memory_order_acquire);
    for (;;) {
        int64_t new_state = cr_apply(&limiter->limit, state, now_ns, op, out, ok);
        /* A turn-away, a probe or a peek writes nothing. On a lost race the
         * CAS reloads `state` and the decision is made again from it. */
        if (new_state == state || !commit ||
            atomic_compare_exchange_weak_explicit(limiter->tat, &state, new_state,
                                                  memory_order_acq_rel, memory_order_acquire))
            return CR_OK;
    }
}

cr_status cr_limiter_check(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool commit,
                           cr_decision *out)
{
    bool allowed;
    cr_op op = {CR_OP_DECIDE, cost, 0, 0};
    return limiter_apply(limiter, now_ns, &op, commit, out, &allowed);
}

cr_status cr_limiter_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, allowed);
}

cr_status cr_limiter_peek_allowed(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                                  bool *allowed)
{
    cr_op op = {CR_OP_DECIDE, cost, 0, 0};
    return limiter_apply(limiter, now_ns, &op, false, NULL, allowed);
}

cr_status cr_limiter_reserve(cr_limiter *limiter, int64_t now_ns, int64_t cost,
                             int64_t max_wait_ns, bool *reserved, int64_t *delay_ns)
{
    if (max_wait_ns < 0)
        return CR_E_TIMEOUT;
    cr_op op = {CR_OP_RESERVE, cost, max_wait_ns, 0};
    cr_status status = limiter_apply(limiter, now_ns, &op, true, NULL, reserved);
    *delay_ns = op.delay_ns;
    return status;
}

cr_status cr_limiter_refund(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_REFUND, cost, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, &done);
}

cr_status cr_limiter_anchor(cr_limiter *limiter, int64_t now_ns, int64_t cost)
{
    bool done;
    cr_op op = {CR_OP_ANCHOR, cost, 0, 0};
    return limiter_apply(limiter, now_ns, &op, true, NULL, &done);
}

void cr_limiter_reset(cr_limiter *limiter)
{
    atomic_store_explicit(limiter->tat, 0, memory_order_release);
}
