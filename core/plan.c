/*
 * The wait plan's rules, pure (docs/design/waiting.md): the deadline of a
 * wait, what a refused waiter does, and where it joins its process's line.
 * The caller passes now; nothing here reads a clock, sleeps or locks. The
 * steps on a store (core/wait.c) and every face's wait follow these.
 */
#include "cellrate/stores.h"

cr_status cr_wait_begin(cr_wait_plan *plan, int64_t cost, int64_t timeout_ns, int64_t now_ns)
{
    if (timeout_ns < 0)
        return CR_E_TIMEOUT;
    if (cost < 0)
        return CR_E_COST;
    plan->cost = cost;
    plan->turn_ns = CR_NO_TURN;
    plan->deadline_ns = timeout_ns == CR_NEVER || timeout_ns > INT64_MAX - now_ns
                            ? CR_NEVER
                            : now_ns + timeout_ns;
    return CR_OK;
}

cr_wait_action cr_wait_answer(const cr_wait_plan *plan, int64_t now_ns, int64_t wait_ns,
                              int64_t *sleep_ns)
{
    *sleep_ns = 0;
    if (wait_ns == CR_NEVER)
        return CR_WAIT_REFUSED;
    if (plan->deadline_ns != CR_NEVER) {
        const int64_t left_ns = now_ns < plan->deadline_ns ? plan->deadline_ns - now_ns : 0;
        if (wait_ns > left_ns)
            return CR_WAIT_TIMEOUT;
    }
    *sleep_ns = wait_ns > 0 ? wait_ns : 0;
    return CR_WAIT_SLEEP;
}

int64_t cr_line_join(const cr_limit *limit, int64_t tail_ns, int64_t ready_ns, int64_t cost,
                     int64_t *turn_ns)
{
    *turn_ns = ready_ns > tail_ns ? ready_ns : tail_ns;
    int64_t span, tail;
    if (__builtin_mul_overflow(cost, limit->emission_ns, &span) ||
        __builtin_add_overflow(*turn_ns, span, &tail))
        return CR_NEVER;
    return tail;
}
