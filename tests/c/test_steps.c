/*
 * A wait, one step at a time (cr_wait_step, cr_wait_leave, cr_line_join):
 * admission at the instant of a step, the process's line (first come, first
 * served, one interval apart), a waiter refused at its turn keeping its
 * place, a block put on the limit holding the waiters, giving up at once,
 * and the keyed table's lines. The steps read the real clock: every check
 * compares turns with each other or with the store's own instants, never
 * with a stopwatch.
 */
#include "cellrate.h"
#include "check.h"

#include <stdlib.h>

#define MS INT64_C(1000000)
#define SECOND INT64_C(1000000000)

static cr_limit limit_per_second(double rate)
{
    cr_limit_args args = {
        .rate = rate, .burst = 1, .has_burst = true, .clock = "monotonic", .clock_len = 9};
    cr_limit limit;
    cr_limit_init(&limit, &args);
    return limit;
}

static cr_wait_action step(const cr_item *item, int64_t cost, int64_t max_wait_ns, int64_t *turn,
                           int64_t *sleep_ns, cr_decision *refusal)
{
    cr_wait_action action = CR_WAIT_REFUSED;
    CHECK_EQ_I64(cr_wait_step(item, cost, max_wait_ns, turn, &action, sleep_ns, refusal), CR_OK,
                 "step");
    return action;
}

static void test_line_join(void)
{
    cr_limit limit = limit_per_second(10);
    int64_t turn;
    CHECK_EQ_I64(cr_line_join(&limit, 0, 5 * SECOND, 1, &turn), 5 * SECOND + 100 * MS, "tail");
    CHECK_EQ_I64(turn, 5 * SECOND, "an empty line: the store's instant");
    CHECK_EQ_I64(cr_line_join(&limit, 7 * SECOND, 5 * SECOND, 3, &turn), 7 * SECOND + 300 * MS,
                 "tail");
    CHECK_EQ_I64(turn, 7 * SECOND, "behind the line's last");
    CHECK_EQ_I64(cr_line_join(&limit, 0, INT64_MAX - 5, 1, &turn), CR_NEVER, "no overflow");
}

static void test_steps(void)
{
    cr_limit limit = limit_per_second(1); /* T = 1 s, burst 1: a stall of the machine up to a
                                               second changes no outcome below */
    cr_limiter *limiter;
    cr_limiter_new(&limiter, &limit);
    cr_item item = {.limiter = limiter};
    int64_t turn = CR_NO_TURN, sleep_ns;
    cr_decision refusal;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &turn, &sleep_ns, &refusal), CR_WAIT_GO,
                 "an idle limit admits at once");
    CHECK_EQ_I64(turn, CR_NO_TURN, "no place held");
    cr_decision peek;
    cr_limiter_check(limiter, CR_CLOCK, 1, false, &peek);
    CHECK(!peek.allowed, "the step's admission spent the unit");

    /* two waiters: the store admits the next unit at `ready`; the first
     * takes that turn, the second one interval after it */
    int64_t first = CR_NO_TURN, second = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &first, &sleep_ns, &refusal), CR_WAIT_SLEEP, "waits");
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &second, &sleep_ns, &refusal), CR_WAIT_SLEEP, "waits");
    CHECK_EQ_I64(second - first, SECOND, "in line, one interval apart");
    CHECK(sleep_ns > 0 && sleep_ns <= 2 * SECOND, "sleeps to its turn: %" PRId64, sleep_ns);
    int64_t again = second;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &again, &sleep_ns, &refusal), CR_WAIT_SLEEP,
                 "woken before its turn: sleeps on");
    CHECK_EQ_I64(again, second, "the same turn");

    /* a newcomer when the second leaves takes the turn it had */
    CHECK_EQ_I64(cr_wait_leave(&item, 1, second), CR_OK, "leave");
    int64_t third = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &third, &sleep_ns, &refusal), CR_WAIT_SLEEP, "waits");
    CHECK_EQ_I64(third, second, "the place given back is taken");

    /* not in time: refused at once, its place given back, the wait said */
    int64_t late = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, 500 * MS, &late, &sleep_ns, &refusal), CR_WAIT_REFUSED,
                 "behind two waiters, 500 ms is not enough");
    CHECK(!refusal.allowed && refusal.retry_after_ns > 1500 * MS, "retry_after %" PRId64,
          refusal.retry_after_ns);
    int64_t next = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &next, &sleep_ns, &refusal), CR_WAIT_SLEEP, "waits");
    CHECK_EQ_I64(next - third, SECOND, "the refused waiter left no gap");
    CHECK_EQ_I64(step(&item, 2, CR_NEVER, &late, &sleep_ns, &refusal), CR_WAIT_REFUSED,
                 "a cost above the burst never fits");
    CHECK_EQ_I64(refusal.retry_after_ns, CR_NEVER, "never");

    /* a block put on the limit: the first waiter, at its turn, is refused
     * by the store and keeps its place until the block ends */
    cr_signal block = {1, {{0, 20 * SECOND}}};
    bool pulled;
    cr_limiter_follow(limiter, CR_CLOCK, &block, 0, 1.0, &pulled);
    CHECK(pulled, "blocked");
    int64_t blocked = first;
    cr_sleep_ns(first - cr_clock_ns());
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &blocked, &sleep_ns, &refusal), CR_WAIT_SLEEP,
                 "its turn came, the block holds it");
    CHECK(blocked > first + 10 * SECOND, "kept its place, until the block ends");
    CHECK(sleep_ns > 10 * SECOND, "sleeps %" PRId64, sleep_ns);
    cr_wait_leave(&item, 1, blocked);
    cr_wait_leave(&item, 1, third);
    cr_wait_leave(&item, 1, next);
    CHECK_EQ_I64(cr_wait_step(NULL, 1, 0, &turn, NULL, NULL, NULL), CR_E_ITEMS, "no item");
    CHECK_EQ_I64(cr_wait_step(&item, 1, -1, &turn, NULL, NULL, NULL), CR_E_TIMEOUT, "timeout");
    CHECK_EQ_I64(cr_wait_step(&item, -1, 0, &turn, NULL, NULL, NULL), CR_E_COST, "cost");
    CHECK_EQ_I64(cr_wait_leave(NULL, 1, 0), CR_E_ITEMS, "no item");
    cr_limiter_free(limiter);
}

static void test_keys_wait_apart(void)
{
    cr_limit limit = limit_per_second(10);
    cr_keyed *keyed;
    cr_keyed_new(&keyed, &limit, 1000);
    char key[16];
    int64_t turns[80], sleep_ns;
    cr_decision refusal;
    /* every key drained, then one waiter each: its turn is its own key's
     * next instant, whatever the other keys' lines hold (past 64 keys at
     * once, a key waits without a line: the same turn for one waiter) */
    for (int k = 0; k < 80; k++) {
        snprintf(key, sizeof key, "key-%d", k);
        cr_item item = {.keyed = keyed, .key = key, .key_len = strlen(key)};
        cr_decision d;
        cr_keyed_check(keyed, key, strlen(key), CR_CLOCK, 1, true, &d);
        turns[k] = CR_NO_TURN;
        CHECK_EQ_I64(step(&item, 1, CR_NEVER, &turns[k], &sleep_ns, &refusal), CR_WAIT_SLEEP,
                     "%s waits", key);
        CHECK(sleep_ns <= 100 * MS, "%s: no wait behind the other keys: %" PRId64, key, sleep_ns);
    }
    for (int k = 0; k < 80; k++) {
        snprintf(key, sizeof key, "key-%d", k);
        cr_item item = {.keyed = keyed, .key = key, .key_len = strlen(key)};
        cr_wait_leave(&item, 1, turns[k]);
    }
    cr_keyed_free(keyed);
}

static void test_blocking_wait(void)
{
    cr_limit limit = limit_per_second(20); /* T = 50 ms */
    cr_limiter *limiter;
    cr_limiter_new(&limiter, &limit);
    cr_item item = {.limiter = limiter};
    bool admitted;
    int64_t slept;
    cr_decision refusal;
    /* four admissions at least three intervals apart, end to end: taken
     * around the waits (before the first, after the last), whatever the
     * machine's delays */
    const int64_t begin = cr_clock_ns();
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_I64(cr_wait(&item, 1, CR_NEVER, &admitted, &slept, &refusal), CR_OK, "wait");
        CHECK(admitted, "admitted");
    }
    CHECK(cr_clock_ns() - begin >= 150 * MS, "spaced: %" PRId64, cr_clock_ns() - begin);
    CHECK_EQ_I64(cr_wait(&item, 1, 10 * MS, &admitted, &slept, &refusal), CR_OK, "wait");
    CHECK(!admitted && slept == 0, "not within 10 ms: at once, without sleeping");
    cr_limiter_free(limiter);
}

int main(void)
{
    test_line_join();
    test_steps();
    test_keys_wait_apart();
    test_blocking_wait();
    return check_summary("test_steps");
}
