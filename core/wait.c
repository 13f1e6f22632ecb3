/*
 * Waiting until units are admitted (docs/design.md §9): the blocking wait of
 * a face that sleeps in C (Lua's wait()). Python's wait/acquire take the same
 * steps over the compiled reserve and peek, sleeping in the interpreter
 * (python/cellrate/_wait.py), so the two faces wait alike.
 *
 * Why a loop: a reservation is all GCRA needs (it commits the units at their
 * instant, and the waiter sleeps once), but a window algorithm reserves only
 * "now", so its waiter sleeps the retry_after of a peek and tries again. The
 * deadline is on CLOCK_MONOTONIC whatever the limit's clock: a timeout is
 * elapsed time.
 */
#include "cellrate/clock.h"
#include "cellrate/stores.h"

static cr_status item_reserve(const cr_item *item, int64_t cost, int64_t max_wait_ns,
                              bool *reserved, int64_t *delay_ns)
{
    if (item->limiter)
        return cr_limiter_reserve(item->limiter, CR_CLOCK, cost, max_wait_ns, reserved, delay_ns);
    return cr_keyed_reserve(item->keyed, item->key, item->key_len, CR_CLOCK, cost, max_wait_ns,
                            reserved, delay_ns);
}

static cr_status item_anchor(const cr_item *item, int64_t cost)
{
    if (item->limiter)
        return cr_limiter_anchor(item->limiter, CR_CLOCK, cost);
    return cr_keyed_anchor(item->keyed, item->key, item->key_len, CR_CLOCK, cost);
}

static cr_status item_peek(const cr_item *item, int64_t cost, cr_decision *out)
{
    if (item->limiter)
        return cr_limiter_check(item->limiter, CR_CLOCK, cost, false, out);
    return cr_keyed_check(item->keyed, item->key, item->key_len, CR_CLOCK, cost, false, out);
}

/* What is left of the wait until `deadline_ns` (CR_NEVER: any wait), >= 0. */
static int64_t wait_left(int64_t deadline_ns)
{
    if (deadline_ns == CR_NEVER)
        return CR_NEVER;
    const int64_t now_ns = cr_clock_ns();
    return now_ns < deadline_ns ? deadline_ns - now_ns : 0;
}

cr_status cr_wait(const cr_item *item, int64_t cost, int64_t timeout_ns, bool *admitted,
                  int64_t *slept_ns, cr_decision *refusal)
{
    if (!item || !item->limiter == !item->keyed || (item->keyed && !item->key && item->key_len))
        return CR_E_ITEMS;
    if (timeout_ns < 0)
        return CR_E_TIMEOUT;
    const int64_t start_ns = cr_clock_ns();
    const int64_t deadline_ns = timeout_ns > INT64_MAX - start_ns ? CR_NEVER
                                                                  : start_ns + timeout_ns;
    *admitted = false;
    *slept_ns = 0;
    int64_t max_wait_ns = timeout_ns;
    for (;;) {
        bool reserved = false;
        int64_t delay_ns = 0;
        cr_status status = item_reserve(item, cost, max_wait_ns, &reserved, &delay_ns);
        if (status != CR_OK)
            return status;
        if (reserved) {
            *admitted = true;
            if (delay_ns == 0)
                return CR_OK;
            /* Woken after the instant (as a sleep always is, by a little):
             * what follows is spaced from now, the real start. */
            cr_sleep_ns(delay_ns);
            *slept_ns += delay_ns;
            return item_anchor(item, cost);
        }
        /* Not reserved: the peek says why. Never (unfittable) or not in time
         * gives up with nothing spent; else (a window algorithm, or a window
         * that rolled over meanwhile) sleep its retry_after and reserve again. */
        cr_decision decision;
        status = item_peek(item, cost, &decision);
        if (status != CR_OK)
            return status;
        if (!decision.allowed) {
            if (decision.retry_after_ns == CR_NEVER ||
                decision.retry_after_ns > wait_left(deadline_ns)) {
                if (refusal)
                    *refusal = decision;
                return CR_OK;
            }
            cr_sleep_ns(decision.retry_after_ns);
            *slept_ns += decision.retry_after_ns;
        }
        max_wait_ns = wait_left(deadline_ns);
    }
}
