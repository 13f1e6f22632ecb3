/*
 * Waiting until units are admitted (docs/design/waiting.md), one step at a
 * time: cr_wait_step says whether to start, sleep or give up, by the plan's
 * pure rules (core/plan.c) and the store's answer at the step's instant.
 * Every face drives these steps and only sleeps between them: Python's wait,
 * acquire and the decorators (python/cellrate/_wait.py), nginx's `wait`
 * (lua/cellrate/nginx.lua, ngx.sleep), and cr_wait (Lua's wait) in C.
 *
 * Why every start is an admission at its real instant: a reservation commits
 * units at a future instant, and the sleeper that holds it wakes after that
 * instant by however long the machine keeps it; the waiter behind, woken on
 * time, then starts closer to it than the limit allows (a late wake-up and a
 * short gap: three starts of "2/second" within one second). Deciding at the
 * real instant, against the store, keeps the limit's bound on the starts
 * themselves, and sees a block a provider's 429 put on the limit meanwhile.
 * The process's line (core/line.c) orders the waiters and spreads their
 * wake-ups; it holds no units. The deadline is the face's: a step takes the
 * wait that remains (a timeout is elapsed time, on CLOCK_MONOTONIC).
 */
#include "cellrate/clock.h"
#include "cellrate/stores.h"
#include "decide.h"
#include "fastclock.h"
#include "keyed.h"
#include "cellrate/plans.h"
#include "limiter.h"
#include "line.h"

/* CR_E_ITEMS for an item that is neither a limiter nor a keyed table and a
 * key, CR_E_PLAN for a plan its table lacks. */
static cr_status item_status(const cr_item *item)
{
    if (!item || !item->limiter == !item->keyed || (item->keyed && !item->key && item->key_len))
        return CR_E_ITEMS;
    if (item->keyed ? !cr_keyed_plan_limit(item->keyed, item->plan) : item->plan != CR_PLAN_DEFAULT)
        return CR_E_PLAN;
    return CR_OK;
}

static const cr_limit *item_limit(const cr_item *item)
{
    return item->limiter ? cr_limiter_limit(item->limiter)
                         : cr_keyed_plan_limit(item->keyed, item->plan);
}

static cr_status item_admit(const cr_item *item, int64_t now_ns, int64_t cost, bool *admitted)
{
    int64_t delay_ns;
    if (item->limiter)
        return cr_limiter_reserve(item->limiter, now_ns, cost, 0, admitted, &delay_ns);
    return cr_keyed_reserve(item->keyed, item->key, item->key_len, now_ns, item->plan, cost, 0,
                            admitted, &delay_ns);
}

static cr_status item_peek(const cr_item *item, int64_t now_ns, int64_t cost, cr_decision *out)
{
    if (item->limiter)
        return cr_limiter_check(item->limiter, now_ns, cost, false, out);
    return cr_keyed_check_plan(item->keyed, item->key, item->key_len, now_ns, cost, item->plan, -1,
                               false, out, NULL);
}

static cr_lines *item_lines(const cr_item *item, uint64_t *fingerprint, bool make)
{
    if (item->limiter)
        return cr_limiter_lines(item->limiter, fingerprint, make);
    return cr_keyed_lines(item->keyed, item->key, item->key_len, fingerprint, make);
}

/* What a step does to its key's line, under the line's lock. */
typedef struct {
    const cr_limit *limit;
    int64_t cost;
    int64_t now_ns;
    int64_t ready_ns; /* JOIN, KEEP: when the store would admit the units */
    int64_t turn_ns;  /* JOIN: set; KEEP, LEAVE: the waiter's */
    int64_t tail_ns;  /* READ: set */
    enum { READ, JOIN, KEEP, LEAVE } what;
} line_change;

static int64_t change_line(int64_t tail, void *context)
{
    line_change *change = context;
    int64_t span = change->cost;
    if (__builtin_mul_overflow(change->cost, change->limit->emission_ns, &span))
        span = CR_NEVER;
    switch (change->what) {
    case READ:
        change->tail_ns = tail;
        return tail;
    case JOIN:
        return cr_line_join(change->limit, tail, change->ready_ns, change->cost, &change->turn_ns);
    case KEEP: { /* a waiter refused at its turn keeps its place; newcomers come after it */
        int64_t after;
        if (__builtin_add_overflow(change->ready_ns, span, &after))
            after = CR_NEVER;
        return after > tail ? after : tail;
    }
    default: /* LEAVE: the place's span given back, never before now */
        if (tail <= change->now_ns)
            return tail;
        return tail - change->now_ns > span ? tail - span : change->now_ns;
    }
}

/* Applies `change` to the item's line: false when it has none (out of
 * memory, or a keyed table's lines all taken): the waiter goes without. */
static bool line_apply(const cr_item *item, line_change *change)
{
    uint64_t fingerprint;
    cr_lines *lines = item_lines(item, &fingerprint, true);
    return lines && cr_lines_apply(lines, fingerprint, change->now_ns, change_line, change);
}

/* Whether a line of the store's may still hold waiters of this process (its
 * latest tail is to come): a newcomer of a store without any tries the store
 * at once, taking no lock. */
static bool anyone_waiting(const cr_item *item, int64_t now_ns)
{
    uint64_t fingerprint;
    const cr_lines *lines = item_lines(item, &fingerprint, false);
    return lines && cr_lines_latest(lines) > now_ns;
}

cr_status cr_wait_leave(const cr_item *item, cr_wait_plan *plan, int64_t store_now_ns)
{
    cr_status valid = item_status(item);
    if (valid != CR_OK)
        return valid;
    if (plan->turn_ns == CR_NO_TURN)
        return CR_OK;
    const cr_limit *limit = item_limit(item);
    line_change change = {limit, plan->cost, cr_resolve_now(limit, store_now_ns), 0, plan->turn_ns,
                          0,     LEAVE};
    line_apply(item, &change);
    plan->turn_ns = CR_NO_TURN;
    return CR_OK;
}

/* Gives up: the place given back, the store's decision as the refusal. */
static cr_status give_up(const cr_item *item, cr_wait_plan *plan, int64_t now_ns, int64_t wait_ns,
                         const cr_decision *decision, cr_decision *refusal)
{
    cr_wait_leave(item, plan, now_ns);
    if (refusal) {
        *refusal = *decision;
        refusal->allowed = false;
        refusal->retry_after_ns = wait_ns;
    }
    return CR_OK;
}

cr_status cr_wait_step(const cr_item *item, cr_wait_plan *plan, int64_t now_ns,
                       int64_t store_now_ns, cr_wait_action *action, int64_t *sleep_ns,
                       cr_decision *refusal)
{
    cr_status valid = item_status(item);
    if (valid != CR_OK)
        return valid;
    const int64_t cost = plan->cost;
    cr_status status = cr_check_args(store_now_ns, cost);
    if (status != CR_OK)
        return status;
    const cr_limit *limit = item_limit(item);
    const int64_t at_ns = cr_resolve_now(limit, store_now_ns);
    const bool first = plan->turn_ns == CR_NO_TURN;
    *sleep_ns = 0;
    line_change change = {limit, cost, at_ns, at_ns, plan->turn_ns, at_ns, READ};
    if (!first && at_ns < plan->turn_ns) { /* woken early: its turn is still to come */
        *action = CR_WAIT_SLEEP;
        *sleep_ns = plan->turn_ns - at_ns;
        return CR_OK;
    }
    /* a newcomer behind waiters of this process joins the line behind them */
    const bool behind = first && anyone_waiting(item, at_ns) && line_apply(item, &change) &&
                        change.tail_ns > at_ns;
    if (!behind) {
        bool admitted;
        if ((status = item_admit(item, at_ns, cost, &admitted)) != CR_OK)
            return status;
        if (admitted) {
            plan->turn_ns = CR_NO_TURN;
            *action = CR_WAIT_GO;
            return CR_OK;
        }
    }
    cr_decision decision;
    if ((status = item_peek(item, at_ns, cost, &decision)) != CR_OK)
        return status;
    if (decision.retry_after_ns == CR_NEVER) {
        *action = cr_wait_answer(plan, now_ns, CR_NEVER, sleep_ns);
        return give_up(item, plan, at_ns, CR_NEVER, &decision, refusal);
    }
    /* a peek that admits after a refusal: another thread gave units back
     * meanwhile; the next step, at once, tries again */
    change.ready_ns = at_ns + (decision.allowed ? 0 : decision.retry_after_ns);
    change.turn_ns = change.ready_ns;
    change.what = first ? JOIN : KEEP;
    if (!line_apply(item, &change))
        change.turn_ns = change.ready_ns; /* no line: its own retry_after */
    const int64_t wait_ns = change.turn_ns - at_ns;
    plan->turn_ns = change.turn_ns;
    *action = cr_wait_answer(plan, now_ns, wait_ns, sleep_ns);
    if (*action != CR_WAIT_SLEEP)
        return give_up(item, plan, at_ns, wait_ns, &decision, refusal);
    return CR_OK;
}

cr_status cr_wait(const cr_item *item, int64_t cost, int64_t timeout_ns, bool *admitted,
                  int64_t *slept_ns, cr_decision *refusal)
{
    cr_status valid = item_status(item);
    if (valid != CR_OK)
        return valid;
    /* without a deadline no step needs the time on its clock */
    const bool timed = timeout_ns != CR_NEVER;
    cr_wait_plan plan;
    cr_status status = cr_wait_begin(&plan, cost, timeout_ns, timed ? cr_clock_ns() : 0);
    if (status != CR_OK)
        return status;
    *admitted = false;
    *slept_ns = 0;
    for (;;) {
        cr_wait_action action;
        int64_t sleep_ns;
        if ((status = cr_wait_step(item, &plan, timed ? cr_clock_ns() : 0, CR_CLOCK, &action,
                                   &sleep_ns, refusal)) != CR_OK) {
            cr_wait_leave(item, &plan, CR_CLOCK);
            return status;
        }
        if (action != CR_WAIT_SLEEP) {
            *admitted = action == CR_WAIT_GO;
            return CR_OK;
        }
        cr_sleep_ns(sleep_ns);
        *slept_ns += sleep_ns;
    }
}
