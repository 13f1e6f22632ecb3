/*
 * A wait, one step at a time (cr_wait_begin, cr_wait_answer, cr_wait_step,
 * cr_wait_leave, cr_line_join): tests/vectors/wait.txt (the reference
 * model's, tests/model/wait_model.py) on every algorithm with explicit times;
 * admission at the instant of a step, the process's line (first come, first
 * served, one interval apart), a waiter refused at its turn keeping its
 * place, a block put on the limit holding the waiters, giving up at once,
 * and the keyed table's lines. The steps read the real clock: every check
 * compares turns with each other or with the store's own instants, never
 * with a stopwatch.
 */
#include "cellrate.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A step at most `max_wait_ns` from now (the deadline's clock stands at 0),
 * for the waiter whose place is *turn; the store reads its own clock. */
static cr_wait_action step(const cr_item *item, int64_t cost, int64_t max_wait_ns, int64_t *turn,
                           int64_t *sleep_ns, cr_decision *refusal)
{
    cr_wait_action action = CR_WAIT_REFUSED;
    cr_wait_plan plan = {cost, max_wait_ns, *turn};
    CHECK_EQ_I64(cr_wait_step(item, &plan, 0, CR_CLOCK, &action, sleep_ns, refusal), CR_OK, "step");
    *turn = plan.turn_ns;
    return action;
}

static cr_status leave(const cr_item *item, int64_t cost, int64_t turn)
{
    cr_wait_plan plan = {cost, CR_NEVER, turn};
    return cr_wait_leave(item, &plan, CR_CLOCK);
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
    CHECK_EQ_I64(leave(&item, 1, second), CR_OK, "leave");
    int64_t third = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, CR_NEVER, &third, &sleep_ns, &refusal), CR_WAIT_SLEEP, "waits");
    CHECK_EQ_I64(third, second, "the place given back is taken");

    /* not in time: refused at once, its place given back, the wait said */
    int64_t late = CR_NO_TURN;
    CHECK_EQ_I64(step(&item, 1, 500 * MS, &late, &sleep_ns, &refusal), CR_WAIT_TIMEOUT,
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
    leave(&item, 1, blocked);
    leave(&item, 1, third);
    leave(&item, 1, next);
    cr_wait_plan plan;
    cr_wait_action action;
    CHECK_EQ_I64(cr_wait_begin(&plan, 1, 0, 0), CR_OK, "begin");
    CHECK_EQ_I64(cr_wait_step(NULL, &plan, 0, CR_CLOCK, &action, &sleep_ns, NULL), CR_E_ITEMS,
                 "no item");
    CHECK_EQ_I64(cr_wait_begin(&plan, 1, -1, 0), CR_E_TIMEOUT, "timeout");
    CHECK_EQ_I64(cr_wait_begin(&plan, -1, 0, 0), CR_E_COST, "cost");
    CHECK_EQ_I64(leave(NULL, 1, 0), CR_E_ITEMS, "no item");
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
        leave(&item, 1, turns[k]);
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

/* tests/vectors/wait.txt: each scenario on a new limiter, the deadline's
 * clock and the store's both at the line's now. */
#define WAITERS 64

typedef struct {
    char name[16];
    cr_wait_plan plan;
} named_plan;

static int64_t vector_ns(const char *word)
{
    return strcmp(word, "never") == 0 ? CR_NEVER : strtoll(word, NULL, 10);
}

static cr_wait_action action_named(const char *word)
{
    if (strcmp(word, "go") == 0)
        return CR_WAIT_GO;
    if (strcmp(word, "sleep") == 0)
        return CR_WAIT_SLEEP;
    return strcmp(word, "refused") == 0 ? CR_WAIT_REFUSED : CR_WAIT_TIMEOUT;
}

static cr_wait_plan *plan_named(named_plan *plans, int *count, const char *name)
{
    for (int i = 0; i < *count; i++)
        if (strcmp(plans[i].name, name) == 0)
            return &plans[i].plan;
    if (*count == WAITERS)
        return NULL;
    snprintf(plans[*count].name, sizeof plans[*count].name, "%s", name);
    return &plans[(*count)++].plan;
}

static void test_wait_vectors(const char *dir)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/wait.txt", dir);
    FILE *file = fopen(path, "r");
    CHECK(file != NULL, "open %s", path);
    if (!file)
        return;
    cr_limiter *limiter = NULL;
    cr_item item = {0};
    named_plan plans[WAITERS];
    int count = 0, number = 0, steps = 0;
    while (fgets(line, sizeof line, file)) {
        number++;
        char kind[16], a[32], b[32], c[32], d[32], e[32];
        int words = sscanf(line, "%15s %31s %31s %31s %31s %31s", kind, a, b, c, d, e);
        if (words < 1 || kind[0] == '#')
            continue;
        if (strcmp(kind, "answer") == 0 && words == 6) {
            cr_wait_plan plan = {1, vector_ns(a), CR_NO_TURN};
            int64_t sleep_ns = -1;
            CHECK_EQ_I64(cr_wait_answer(&plan, vector_ns(b), vector_ns(c), &sleep_ns),
                         action_named(d), "line %d", number);
            CHECK_EQ_I64(sleep_ns, vector_ns(e), "line %d: sleep", number);
        } else if (strcmp(kind, "limit") == 0 && words == 5) {
            if (limiter)
                cr_limiter_free(limiter);
            const bool window = strstr(a, "window") != NULL;
            cr_limit_args args = {.rate = strtod(b, NULL),
                                  .period_s = (double)strtoll(c, NULL, 10) / 1e9,
                                  .has_period = true,
                                  .burst = window ? 0 : strtoll(d, NULL, 10),
                                  .has_burst = !window,
                                  .algorithm = a,
                                  .algorithm_len = strlen(a)};
            cr_limit limit;
            CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "line %d: limit", number);
            CHECK_EQ_I64(cr_limiter_new(&limiter, &limit), CR_OK, "line %d: limiter", number);
            item = (cr_item){.limiter = limiter};
            count = 0;
        } else if (strcmp(kind, "begin") == 0 && words == 5) {
            cr_wait_plan *plan = plan_named(plans, &count, a);
            CHECK(plan != NULL, "line %d: too many waiters", number);
            if (plan)
                CHECK_EQ_I64(cr_wait_begin(plan, strtoll(b, NULL, 10), vector_ns(c), vector_ns(d)),
                             CR_OK, "line %d: begin", number);
        } else if (strcmp(kind, "step") == 0 && words == 6) {
            cr_wait_plan *plan = plan_named(plans, &count, a);
            const int64_t now_ns = vector_ns(b);
            cr_wait_action action = CR_WAIT_GO;
            int64_t sleep_ns = -1;
            cr_decision refusal = {0};
            CHECK_EQ_I64(cr_wait_step(&item, plan, now_ns, now_ns, &action, &sleep_ns, &refusal),
                         CR_OK, "line %d: step", number);
            CHECK_EQ_I64(action, action_named(c), "line %d: action", number);
            CHECK_EQ_I64(sleep_ns, vector_ns(d), "line %d: sleep", number);
            if (strcmp(e, "-") != 0)
                CHECK_EQ_I64(refusal.retry_after_ns, vector_ns(e), "line %d: retry", number);
            if (action != CR_WAIT_SLEEP)
                CHECK_EQ_I64(plan->turn_ns, CR_NO_TURN, "line %d: no place held", number);
            steps++;
        } else if (strcmp(kind, "leave") == 0 && words == 3) {
            CHECK_EQ_I64(cr_wait_leave(&item, plan_named(plans, &count, a), vector_ns(b)), CR_OK,
                         "line %d: leave", number);
        } else {
            CHECK(false, "line %d: not understood: %s", number, line);
        }
    }
    fclose(file);
    if (limiter)
        cr_limiter_free(limiter);
    CHECK(steps > 300, "steps %d", steps);
}

int main(int argc, char **argv)
{
    test_wait_vectors(argc > 1 ? argv[1] : "tests/vectors");
    test_line_join();
    test_steps();
    test_keys_wait_apart();
    test_blocking_wait();
    return check_summary("test_steps");
}
