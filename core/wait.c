/*
 * Waiting until units are admitted (docs/design.md §9), one step at a time:
 * cr_wait_step says whether to start, sleep or give up; Python's wait and
 * acquire sleep in the interpreter between steps (python/cellrate/_wait.py),
 * and cr_wait (Lua's wait) sleeps in C. The faces wait alike.
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
#include "limiter.h"
#include "line.h"

static bool item_valid(const cr_item *item)
{
    return item && !item->limiter != !item->keyed && !(item->keyed && !item->key && item->key_len);
}

static const cr_limit *item_limit(const cr_item *item)
{
    return item->limiter ? cr_limiter_limit(item->limiter) : cr_keyed_limit(item->keyed);
}

static cr_status item_admit(const cr_item *item, int64_t now_ns, int64_t cost, bool *admitted)
{
    int64_t delay_ns;
    if (item->limiter)
        return cr_limiter_reserve(item->limiter, now_ns, cost, 0, admitted, &delay_ns);
    return cr_keyed_reserve(item->keyed, item->key, item->key_len, now_ns, cost, 0, admitted,
                            &delay_ns);
}

static cr_status item_peek(const cr_item *item, int64_t now_ns, int64_t cost, cr_decision *out)
{
    if (item->limiter)
        return cr_limiter_check(item->limiter, now_ns, cost, false, out);
    return cr_keyed_check(item->keyed, item->key, item->key_len, now_ns, cost, false, out);
}

static cr_lines *item_lines(const cr_item *item, uint64_t *fingerprint, bool make)
{
    if (item->limiter)
        return cr_limiter_lines(item->limiter, fingerprint, make);
    return cr_keyed_lines(item->keyed, item->key, item->key_len, fingerprint, make);
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

cr_status cr_wait_leave(const cr_item *item, int64_t cost, int64_t turn_ns)
{
    if (!item_valid(item))
        return CR_E_ITEMS;
    if (turn_ns == CR_NO_TURN)
        return CR_OK;
    const cr_limit *limit = item_limit(item);
    line_change change = {limit, cost, cr_read_clock(limit), 0, turn_ns, 0, LEAVE};
    line_apply(item, &change);
    return CR_OK;
}

cr_status cr_wait_step(const cr_item *item, int64_t cost, int64_t max_wait_ns, int64_t *turn_ns,
                       cr_wait_action *step, int64_t *sleep_ns, cr_decision *refusal)
{
    if (!item_valid(item))
        return CR_E_ITEMS;
    if (max_wait_ns < 0)
        return CR_E_TIMEOUT;
    cr_status status = cr_check_args(CR_CLOCK, cost);
    if (status != CR_OK)
        return status;
    const cr_limit *limit = item_limit(item);
    const int64_t now_ns = cr_read_clock(limit);
    const bool first = *turn_ns == CR_NO_TURN;
    *sleep_ns = 0;
    line_change change = {limit, cost, now_ns, now_ns, *turn_ns, now_ns, READ};
    if (!first && now_ns < *turn_ns) { /* woken early: its turn is still to come */
        *step = CR_WAIT_SLEEP;
        *sleep_ns = *turn_ns - now_ns;
        return CR_OK;
    }
    /* a newcomer behind waiters of this process joins the line behind them */
    const bool behind = first && anyone_waiting(item, now_ns) && line_apply(item, &change) &&
                        change.tail_ns > now_ns;
    cr_decision decision;
    if (!behind) {
        bool admitted;
        if ((status = item_admit(item, now_ns, cost, &admitted)) != CR_OK)
            return status;
        if (admitted) {
            *turn_ns = CR_NO_TURN;
            *step = CR_WAIT_GO;
            return CR_OK;
        }
    }
    if ((status = item_peek(item, now_ns, cost, &decision)) != CR_OK)
        return status;
    if (decision.retry_after_ns == CR_NEVER) {
        if (!first)
            cr_wait_leave(item, cost, *turn_ns);
        *turn_ns = CR_NO_TURN;
        *step = CR_WAIT_REFUSED;
        if (refusal)
            *refusal = decision;
        return CR_OK;
    }
    /* a peek that admits after a refusal: another thread gave units back
     * meanwhile; the next step, at once, tries again */
    change.ready_ns = now_ns + (decision.allowed ? 0 : decision.retry_after_ns);
    change.turn_ns = change.ready_ns;
    change.what = first ? JOIN : KEEP;
    if (!line_apply(item, &change))
        change.turn_ns = change.ready_ns; /* no line: its own retry_after */
    const int64_t wait_ns = change.turn_ns - now_ns;
    if (wait_ns > max_wait_ns) {
        cr_wait_leave(item, cost, change.turn_ns);
        *turn_ns = CR_NO_TURN;
        *step = CR_WAIT_REFUSED;
        if (refusal) {
            *refusal = decision;
            refusal->allowed = false;
            refusal->retry_after_ns = wait_ns;
        }
        return CR_OK;
    }
    *turn_ns = change.turn_ns;
    *step = CR_WAIT_SLEEP;
    *sleep_ns = wait_ns;
    return CR_OK;
}

cr_status cr_wait(const cr_item *item, int64_t cost, int64_t timeout_ns, bool *admitted,
                  int64_t *slept_ns, cr_decision *refusal)
{
    if (!item_valid(item))
        return CR_E_ITEMS;
    if (timeout_ns < 0)
        return CR_E_TIMEOUT;
    const int64_t start_ns = cr_clock_ns();
    const int64_t deadline_ns = timeout_ns > INT64_MAX - start_ns ? CR_NEVER
                                                                  : start_ns + timeout_ns;
    int64_t turn_ns = CR_NO_TURN;
    *admitted = false;
    *slept_ns = 0;
    for (;;) {
        int64_t max_wait_ns = CR_NEVER, sleep_ns;
        if (deadline_ns != CR_NEVER) {
            const int64_t now_ns = cr_clock_ns();
            max_wait_ns = now_ns < deadline_ns ? deadline_ns - now_ns : 0;
        }
        cr_wait_action step;
        cr_decision decision;
        const cr_status status = cr_wait_step(item, cost, max_wait_ns, &turn_ns, &step, &sleep_ns,
                                              &decision);
        if (status != CR_OK) {
            cr_wait_leave(item, cost, turn_ns);
            return status;
        }
        if (step == CR_WAIT_GO) {
            *admitted = true;
            return CR_OK;
        }
        if (step == CR_WAIT_REFUSED) {
            if (refusal)
                *refusal = decision;
            return CR_OK;
        }
        cr_sleep_ns(sleep_ns);
        *slept_ns += sleep_ns;
    }
}
