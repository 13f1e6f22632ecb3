/* One key: a single atomic TAT. */
#include "cellrate.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>

struct cr_limiter {
    _Alignas(64) _Atomic int64_t tat; /* a cache line of its own */
    cr_limit limit;
};

cr_status cr_limiter_new(cr_limiter **out, const cr_limit *limit)
{
    cr_limiter *limiter = aligned_alloc(64, sizeof *limiter);
    if (!limiter)
        return CR_E_NOMEM;
    atomic_init(&limiter->tat, 0);
    limiter->limit = *limit;
    *out = limiter;
    return CR_OK;
}

void cr_limiter_free(cr_limiter *limiter) { free(limiter); }

const cr_limit *cr_limiter_limit(const cr_limiter *limiter) { return &limiter->limit; }

cr_status cr_limiter_check(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool commit,
                           cr_decision *out)
{
    cr_status status = cr_check_args(&now_ns, cost);
    if (status != CR_OK)
        return status;
    int64_t tat = atomic_load_explicit(&limiter->tat, memory_order_acquire);
    for (;;) {
        int64_t new_tat = cr_decide(&limiter->limit, tat, now_ns, cost, out);
        /* A turn-away, a probe or a peek writes nothing. On a lost race the
         * CAS reloads `tat` and the decision is made again from it. */
        if (new_tat == tat || !commit ||
            atomic_compare_exchange_weak_explicit(&limiter->tat, &tat, new_tat,
                                                  memory_order_acq_rel, memory_order_acquire))
            return CR_OK;
    }
}

void cr_limiter_reset(cr_limiter *limiter)
{
    atomic_store_explicit(&limiter->tat, 0, memory_order_release);
}
