/*
 * Several limits as one (docs/design.md §8): peek every item but the last;
 * if all admit, commit the last (the call's first write, so a refusal there
 * has written nothing), then each other in turn, giving back what was
 * committed when one refuses on commit (another thread took its units
 * between the peek and the commit).
 *
 * Why this is enough: every commit is an ordinary admission of its own limit,
 * so no limit ever admits more than its bound. A refused composite commits
 * nothing (refused at the peek) or gives back exactly the cost to each item it
 * took from, at the same instant it took it, and a refund of cost units is the
 * inverse of their admission (docs/design.md §9). No lock is held, so no
 * order of items can deadlock.
 */
#include "fastclock.h"
#include "keyed.h"
#include "cellrate/plans.h"
#include "limiter.h"

/* The clocks an item may read, each read at most once per call. */
typedef struct {
    int64_t given; /* CR_CLOCK: read each clock as needed */
    int64_t read[3];
    bool have[3];
} composite_clock;

static const cr_limit *item_limit(const cr_item *item)
{
    return item->limiter ? cr_limiter_limit(item->limiter)
                         : cr_keyed_plan_limit(item->keyed, item->plan);
}

static int64_t item_now(composite_clock *clock, const cr_item *item)
{
    if (clock->given != CR_CLOCK)
        return clock->given;
    const cr_limit *limit = item_limit(item);
    const int which = cr_is_window(limit) ? 2 : limit->fast_clock ? 1 : 0;
    if (!clock->have[which]) {
        clock->read[which] = cr_read_clock(limit);
        clock->have[which] = true;
    }
    return clock->read[which];
}

/* A check; a commit counts nothing (the composite counts once it is final). */
static cr_status item_check(const cr_item *item, int64_t now_ns, int64_t cost, bool commit,
                            cr_decision *out)
{
    if (!commit)
        return item->limiter ? cr_limiter_check(item->limiter, now_ns, cost, false, out)
                             : cr_keyed_check_plan(item->keyed, item->key, item->key_len, now_ns,
                                                   cost, item->plan, -1, false, out, NULL);
    if (item->limiter)
        return cr_limiter_uncounted(item->limiter, now_ns, CR_OP_DECIDE, cost, out);
    return cr_keyed_uncounted(item->keyed, item->key, item->key_len, now_ns, item->plan,
                              CR_OP_DECIDE, cost, out);
}

static void item_peek_allowed(const cr_item *item, int64_t now_ns, int64_t cost, bool *allowed)
{
    if (item->limiter)
        cr_limiter_peek_allowed(item->limiter, now_ns, cost, allowed);
    else
        cr_keyed_peek_allowed(item->keyed, item->key, item->key_len, now_ns, item->plan, cost,
                              allowed);
}

/* The plan an item decides under (a Limiter's: "default"). */
static int32_t item_plan(const cr_item *item) { return item->keyed ? item->plan : CR_PLAN_DEFAULT; }

static const cr_counts *item_counts(const cr_item *item)
{
    return item->limiter ? cr_limiter_counts(item->limiter) : cr_keyed_counts(item->keyed);
}

/* Gives back an admission of the composite: its units (counted nowhere, as
 * the admission was not). */
static void item_give_back(const cr_item *item, int64_t now_ns, int64_t cost)
{
    if (item->limiter)
        cr_limiter_uncounted(item->limiter, now_ns, CR_OP_REFUND, cost, NULL);
    else
        cr_keyed_uncounted(item->keyed, item->key, item->key_len, now_ns, item->plan, CR_OP_REFUND,
                           cost, NULL);
}

void cr_item_would_refuse(const cr_item *item, int64_t cost)
{
    if (item && !item->limiter != !item->keyed)
        cr_count_would_refuse(item_counts(item), cost, item_plan(item), -1);
}

/* Whether `a` is tighter than `b`: a refusal with a longer wait, or an
 * admission with fewer units left. */
static bool tighter(const cr_decision *a, const cr_decision *b)
{
    if (a->allowed != b->allowed)
        return !a->allowed;
    if (!a->allowed)
        return a->retry_after_ns > b->retry_after_ns;
    return a->remaining < b->remaining;
}

cr_status cr_check_all(const cr_item *items, size_t count, int64_t now_ns, int64_t cost,
                       cr_decision *out, size_t *index)
{
    cr_status status = cr_check_args(now_ns, cost);
    if (status != CR_OK)
        return status;
    if (!items || count == 0)
        return CR_E_ITEMS;
    for (size_t i = 0; i < count; i++) {
        if (!items[i].limiter == !items[i].keyed ||
            (items[i].keyed && !items[i].key && items[i].key_len))
            return CR_E_ITEMS;
        if (items[i].keyed ? !cr_keyed_plan_limit(items[i].keyed, items[i].plan)
                           : items[i].plan != CR_PLAN_DEFAULT)
            return CR_E_PLAN;
    }

    composite_clock clock = {.given = now_ns};
    const size_t last = count - 1;
    cr_decision decision, tightest = {0};
    size_t chosen = 0;
    for (int attempt = 0;; attempt++) {
        /* The peek: the allow() path of each item but the last, writing nothing. */
        bool all = true, refused = false;
        for (size_t i = 0; i < last && all; i++)
            item_peek_allowed(&items[i], item_now(&clock, &items[i]), cost, &all);
        if (all) {
            /* The last item's commit is the call's first write: a refusal there
             * has written nothing, like a refusal at the peek. So has a commit
             * that failed (a region's lock held past its bound): its status is
             * the call's, never its decision, which was not stored. */
            status = item_check(&items[last], item_now(&clock, &items[last]), cost, true,
                                &decision);
            if (status != CR_OK)
                return status;
            tightest = decision;
            chosen = last;
            if (decision.allowed) {
                for (size_t i = 0; i < last; i++) { /* the other commits */
                    status = item_check(&items[i], item_now(&clock, &items[i]), cost, true,
                                        &decision);
                    if (status != CR_OK || !decision.allowed) {
                        /* lost a race since the peek, or failed: give back */
                        item_give_back(&items[last], item_now(&clock, &items[last]), cost);
                        for (size_t j = 0; j < i; j++)
                            item_give_back(&items[j], item_now(&clock, &items[j]), cost);
                        if (status != CR_OK)
                            return status;
                        tightest = decision;
                        chosen = i;
                        break;
                    }
                    if (tighter(&decision, &tightest)) {
                        tightest = decision;
                        chosen = i;
                    }
                }
                break;
            }
            refused = true;
        }
        /* Refused, nothing written: the refusal with the longest wait. */
        for (size_t i = 0; i < count; i++) {
            item_check(&items[i], item_now(&clock, &items[i]), cost, false, &decision);
            if (!decision.allowed && (!refused || tighter(&decision, &tightest))) {
                tightest = decision;
                chosen = i;
                refused = true;
            }
        }
        if (refused)
            break;
        /* Every item admits now (another thread gave back what refused us a
         * moment ago): decide again, a bounded number of times. */
        if (attempt == 2) {
            tightest = decision; /* still refused, to be retried at once */
            tightest.allowed = false;
            tightest.retry_after_ns = 0;
            chosen = last;
            break;
        }
    }
    /* The verdict, final: each item's admission, or one refusal at the item
     * whose decision is returned. */
    for (size_t i = 0; i < count; i++)
        if (tightest.allowed || i == chosen) {
            cr_count_verdict(item_counts(&items[i]), tightest.allowed, cost,
                             item_limit(&items[i])->burst);
            cr_count_by_verdict(item_counts(&items[i]), item_plan(&items[i]), -1, tightest.allowed,
                                1);
        }
    *out = tightest;
    if (index)
        *index = chosen;
    return CR_OK;
}
