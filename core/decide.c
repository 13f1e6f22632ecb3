/* The pure decisions (docs/design.md §1, §7, §9): the exported faces of
 * core/decide.h, for callers that keep the state themselves. */
#include "decide.h"

cr_status cr_check_call(int64_t now_ns, int64_t cost) { return cr_check_args(now_ns, cost); }

int64_t cr_decide(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out)
{
    return cr_decision_make(limit, state, now_ns, cost, out);
}

int64_t cr_reserve(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                   int64_t max_wait_ns, bool *reserved, int64_t *delay_ns)
{
    return cr_reserve_core(limit, state, now_ns, cost, max_wait_ns, reserved, delay_ns);
}

int64_t cr_refund(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost)
{
    int64_t given;
    return cr_refund_core(limit, state, now_ns, cost, &given);
}

int64_t cr_anchor(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost)
{
    return cr_anchor_core(limit, state, now_ns, cost);
}

int64_t cr_charge(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t cost,
                  cr_decision *out)
{
    bool fit;
    int64_t committed;
    return cr_charge_core(limit, state, now_ns, cost, out, &fit, &committed);
}

int64_t cr_take(const cr_limit *limit, int64_t state, int64_t now_ns, int64_t max_cost,
                int64_t *taken)
{
    return cr_take_core(limit, state, now_ns, max_cost, taken);
}
