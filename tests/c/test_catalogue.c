/*
 * The algorithm catalogue, the horizon, reservations and check_all through the
 * C API (the decisions themselves are pinned by tests/vectors/decisions.txt):
 *   - limits with an algorithm: names, clocks, errors;
 *   - the horizon: no `now` at or past 2^62 ns; 1000 calls at its last ns
 *     admit exactly burst (saturation used to admit them all);
 *   - window limiters read the realtime clock; allow()'s cached window end
 *     decides as check() does, whatever the times;
 *   - regions record their algorithm;
 *   - anchor: a late start spaces what follows; cr_wait on a window algorithm;
 *   - check_all: the tightest decision, a refusal spends nothing, the give-back;
 *   - concurrency: 4 threads and 4 processes (one shared region) at one frozen
 *     instant admit exactly a window's amount; threads hammering check_all over
 *     overlapping limits leave every limit at exactly bound - admissions.
 */
#include "cellrate.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECOND INT64_C(1000000000)
#define THREADS 4
#define EPOCH (INT64_C(1700000000) * SECOND) /* a realtime instant, a whole minute */

static cr_limit make(const char *algorithm, double rate, double period_s, cr_status *status)
{
    cr_limit limit;
    memset(&limit, 0, sizeof limit);
    cr_limit_args args = {.rate = rate, .period_s = period_s, .has_period = true};
    if (algorithm) {
        args.algorithm = algorithm;
        args.algorithm_len = strlen(algorithm);
    }
    *status = cr_limit_init(&limit, &args);
    return limit;
}

static cr_limit must(const char *algorithm, double rate, double period_s)
{
    cr_status status;
    cr_limit limit = make(algorithm, rate, period_s, &status);
    CHECK_EQ_I64(status, CR_OK, "%s %g/%g", algorithm ? algorithm : "(none)", rate, period_s);
    return limit;
}

static void test_limits(void)
{
    cr_status status;
    cr_limit gcra = must("gcra", 10, 1), none = must(NULL, 10, 1);
    CHECK(memcmp(&gcra, &none, sizeof gcra) == 0, "algorithm 'gcra' and none make the same limit");
    cr_limit bucket = must("token_bucket", 10, 1);
    CHECK(bucket.emission_ns == gcra.emission_ns && bucket.tolerance_ns == gcra.tolerance_ns &&
              bucket.algorithm == CR_ALGORITHM_TOKEN_BUCKET,
          "token_bucket");
    make("leaky", 10, 1, &status);
    CHECK_EQ_I64(status, CR_E_ALGORITHM, "unknown algorithm");
    CHECK_EQ_STR(cr_status_param(CR_E_ALGORITHM), "algorithm", "param");
    CHECK_EQ_STR(cr_status_param(CR_E_BURST_WINDOW), "burst", "param");
    CHECK_EQ_STR(cr_status_param(CR_E_RATE_WHOLE), "rate", "param");
    CHECK(strstr(cr_strerror(CR_E_RATE_WHOLE), "1/2s") != NULL, "suggests 1/2s");
    CHECK_EQ_STR(cr_status_param(CR_E_RATE_SLIDING_CEILING), "rate", "param");
    CHECK_EQ_STR(cr_status_param(CR_E_ITEMS), "items", "param");
    CHECK_EQ_STR(cr_status_param(CR_E_MAX_WAIT), "max_wait", "param");
    CHECK_EQ_STR(cr_algorithm_name((cr_algorithm)99), "", "out of range");

    cr_limit window = must("fixed_window", 100, 60);
    CHECK_EQ_STR(cr_clock_name(&window), "realtime", "windows read the realtime clock");
    CHECK_EQ_STR(cr_clock_name(&gcra), "fast", "gcra: the default clock");
    CHECK_EQ_I64(window.tolerance_ns, 60 * SECOND, "the window");
    CHECK_EQ_I64(window.burst, 100, "the amount");

    cr_limit_args args = {.rate = 10,
                          .algorithm = "sliding_window",
                          .algorithm_len = 14,
                          .clock = "fast",
                          .clock_len = 4};
    cr_limit limit;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_CLOCK_WINDOW, "fast clock with a window");
    args.clock = "realtime";
    args.clock_len = 8;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "realtime with a window");
    args.algorithm = NULL;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_CLOCK, "realtime with gcra");
    args = (cr_limit_args){.rate = 10,
                           .has_burst = true,
                           .burst = 10,
                           .algorithm = "fixed_window",
                           .algorithm_len = 12};
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_BURST_WINDOW, "burst with a window");
}

static void test_horizon(void)
{
    cr_limit limit = must(NULL, 10, 1);
    limit.burst = 5;
    limit.tolerance_ns = 5 * limit.emission_ns;
    cr_limiter *lim;
    CHECK(cr_limiter_new(&lim, &limit) == CR_OK, "new");
    cr_decision d;
    CHECK_EQ_I64(cr_limiter_check(lim, CR_HORIZON_NS, 1, true, &d), CR_E_NOW, "now at the horizon");
    CHECK_EQ_I64(cr_limiter_check(lim, INT64_MAX, 1, true, &d), CR_E_NOW, "now = INT64_MAX");
    int admitted = 0;
    for (int i = 0; i < 1000; i++) {
        bool ok;
        CHECK_EQ_I64(cr_limiter_allow(lim, CR_HORIZON_NS - 1, 1, &ok), CR_OK, "last ns");
        admitted += ok;
    }
    CHECK_EQ_I64(admitted, 5, "1000 calls at the last ns before the horizon admit burst");
    int64_t ns;
    CHECK_EQ_I64(cr_seconds_to_ns(9223372036.5, &ns), CR_E_NOW, "issue 8 defect 6's now");
    cr_status status;
    make(NULL, 2, 9.2e9, &status);
    CHECK_EQ_I64(status, CR_E_BURST_TOO_LARGE, "Limiter(2, period=9.2e9): tau past the horizon");
    cr_limiter_free(lim);
}

static void test_window_clock(void)
{
    cr_limit limit = must("fixed_window", 1, 3600);
    cr_limiter *lim;
    CHECK(cr_limiter_new(&lim, &limit) == CR_OK, "new");
    for (int attempt = 0; attempt < 3; attempt++) {
        cr_limiter_reset(lim);
        int64_t before = cr_realtime_ns();
        bool ok;
        CHECK(cr_limiter_allow(lim, CR_CLOCK, 1, &ok) == CR_OK && ok, "first unit");
        int64_t after = cr_realtime_ns();
        if (before / (3600 * SECOND) != after / (3600 * SECOND))
            continue; /* an hour boundary passed between the reads: try again */
        cr_decision d;
        CHECK(cr_limiter_check(lim, after, 1, false, &d) == CR_OK, "peek at the realtime now");
        CHECK(!d.allowed, "the unit counts in the clock's current hour");
        int64_t end = (after / (3600 * SECOND) + 1) * 3600 * SECOND;
        CHECK_EQ_I64(d.retry_after_ns, end - after, "retry at the next clock hour");
        break;
    }
    cr_limiter_free(lim);
}

/* allow() keeps the end of the current window in the limiter (fixed and
 * sliding window), used while it holds `now`; check() computes it afresh.
 * Driven alike by times that stay in a window, cross into the next, jump
 * ahead and step back (into the previous window, and further), the two
 * agree at every step, and so does a peek on each. */
static void test_window_end_cache(void)
{
    static const char *const names[] = {"fixed_window", "sliding_window"};
    for (int a = 0; a < 2; a++) {
        cr_limit limit = must(names[a], 5, 10);
        cr_limiter *cached, *fresh;
        CHECK(cr_limiter_new(&cached, &limit) == CR_OK && cr_limiter_new(&fresh, &limit) == CR_OK,
              "new %s", names[a]);
        uint64_t seed = 7;
        int64_t now = EPOCH;
        for (int step = 0; step < 20000; step++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            const unsigned draw = (unsigned)(seed >> 33);
            switch (draw % 8) {
            case 0: /* back into the previous window or further */
                now -= (int64_t)(draw % 25) * SECOND + (int64_t)(draw % 997);
                break;
            case 1: /* far ahead */
                now += (int64_t)(draw % 40) * SECOND;
                break;
            default: /* a little on, often into the next window */
                now += (int64_t)(draw % 3000) * 1000000;
                break;
            }
            const int64_t cost = (int64_t)(draw >> 8) % 3;
            bool ok;
            cr_decision d, peek;
            CHECK_EQ_I64(cr_limiter_allow(cached, now, cost, &ok), CR_OK, "allow");
            CHECK_EQ_I64(cr_limiter_check(fresh, now, cost, true, &d), CR_OK, "check");
            CHECK_EQ_I64(ok, d.allowed, "%s step %d: allow() as check()", names[a], step);
            CHECK_EQ_I64(cr_limiter_check(cached, now, 1, false, &peek), CR_OK, "peek");
            CHECK_EQ_I64(cr_limiter_check(fresh, now, 1, false, &d), CR_OK, "peek");
            CHECK_EQ_I64(peek.remaining, d.remaining, "%s step %d: remaining", names[a], step);
            CHECK_EQ_I64(peek.retry_after_ns, d.retry_after_ns, "%s step %d: retry_after", names[a],
                         step);
        }
        cr_limiter_free(cached);
        cr_limiter_free(fresh);
    }
}

static void test_region_algorithm(void)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/cellrate-catalogue-%d", (int)getpid());
    unlink(path);
    cr_limit gcra = must("gcra", 10, 1), none = must(NULL, 10, 1);
    cr_limit bucket = must("token_bucket", 10, 1), fixed = must("fixed_window", 10, 1);
    cr_limit sliding = must("sliding_window", 10, 1), fixed20 = must("fixed_window", 20, 1);
    cr_keyed *keyed = NULL, *again = NULL;
    CHECK_EQ_I64(cr_keyed_open(&keyed, &gcra, 10, path, 0600, CR_CHANGE_APPLY), CR_OK,
                 "gcra region");
    CHECK_EQ_I64(cr_keyed_open(&again, &none, 10, path, 0600, CR_CHANGE_APPLY), CR_OK,
                 "no name: same region");
    cr_keyed_free(again);
    CHECK_EQ_I64(cr_keyed_open(&again, &bucket, 10, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_ALGORITHM, "token_bucket on a gcra region");
    CHECK_EQ_I64(cr_keyed_open(&again, &fixed, 10, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_ALGORITHM, "fixed_window on a gcra region");
    cr_keyed_free(keyed);
    unlink(path);
    cr_limiter *lim = NULL, *other = NULL;
    CHECK_EQ_I64(cr_limiter_open(&lim, &fixed, path, 0600, CR_CHANGE_APPLY), CR_OK, "fixed region");
    CHECK_EQ_I64(cr_limiter_open(&other, &sliding, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_ALGORITHM, "sliding on fixed");
    CHECK_EQ_I64(cr_limiter_open(&other, &fixed20, path, 0600, CR_CHANGE_REFUSE), CR_E_SHARED_RATE,
                 "another window rate, refused");
    CHECK_EQ_I64(cr_limiter_open(&other, &gcra, path, 0600, CR_CHANGE_APPLY), CR_E_SHARED_ALGORITHM,
                 "gcra on fixed");
    cr_limiter_free(lim);
    unlink(path);
}

static void test_reserve_errors(void)
{
    cr_limit limit = must(NULL, 10, 1);
    cr_limiter *lim;
    cr_keyed *keyed;
    CHECK(cr_limiter_new(&lim, &limit) == CR_OK && cr_keyed_new(&keyed, &limit, 8) == CR_OK, "new");
    bool reserved;
    int64_t delay;
    CHECK_EQ_I64(cr_limiter_reserve(lim, 0, 1, -1, &reserved, &delay), CR_E_TIMEOUT, "timeout");
    CHECK_EQ_I64(cr_limiter_reserve(lim, 0, -1, 0, &reserved, &delay), CR_E_COST, "cost");
    CHECK_EQ_I64(cr_limiter_reserve(lim, -5, 1, 0, &reserved, &delay), CR_E_NOW, "now");
    CHECK_EQ_I64(cr_keyed_reserve(keyed, "k", 1, 0, CR_PLAN_DEFAULT, 1, -1, &reserved, &delay),
                 CR_E_TIMEOUT, "keyed");
    CHECK_EQ_I64(cr_limiter_refund(lim, 0, -1), CR_E_COST, "refund cost");
    CHECK_EQ_I64(cr_keyed_refund(keyed, "k", 1, CR_HORIZON_NS, CR_PLAN_DEFAULT, 1), CR_E_NOW,
                 "refund now");
    CHECK_EQ_I64(cr_keyed_refund(keyed, "absent", 6, 0, CR_PLAN_DEFAULT, 1), CR_OK,
                 "refund of an absent key");
    CHECK_EQ_I64((int64_t)cr_keyed_len(keyed), 0, "a refund claims no slot");
    cr_limiter_free(lim);
    cr_keyed_free(keyed);
}

/* An anchor spaces what follows from a late start, never less strictly; a
 * window has nothing to anchor. */
static void test_anchor(void)
{
    const int64_t T = SECOND / 10;
    cr_limit gcra = must(NULL, 10, 1), fixed = must("fixed_window", 2, 1);
    cr_limit burst_one = gcra;
    burst_one.burst = 1;
    burst_one.tolerance_ns = T;
    CHECK_EQ_I64(cr_anchor(&burst_one, 0, 5 * T, 1), 6 * T, "idle: as admitted now");
    CHECK_EQ_I64(cr_anchor(&burst_one, 9 * T, 5 * T, 1), 9 * T, "never less strict");
    CHECK_EQ_I64(cr_anchor(&burst_one, 0, 5 * T, 2), 0, "unfittable: nothing");
    CHECK_EQ_I64(cr_anchor(&gcra, 0, 5 * T, 3), 8 * T, "burst 10, 3 units");
    CHECK_EQ_I64(cr_anchor(&fixed, 123, EPOCH, 1), 123, "a window: unchanged");

    /* A reservation for 1 T ahead whose waiter wakes 0.3 T late: the next
     * unit is 1 T after the real start, not 0.7 T. */
    cr_limiter *lim;
    CHECK(cr_limiter_new(&lim, &burst_one) == CR_OK, "new");
    bool reserved;
    int64_t delay;
    cr_limiter_reserve(lim, 0, 1, CR_NEVER, &reserved, &delay);
    cr_limiter_reserve(lim, 0, 1, CR_NEVER, &reserved, &delay);
    CHECK_EQ_I64(delay, T, "queued one T ahead");
    CHECK_EQ_I64(cr_limiter_anchor(lim, T + 3 * T / 10, 1), CR_OK, "anchor");
    cr_limiter_reserve(lim, T + 3 * T / 10, 1, CR_NEVER, &reserved, &delay);
    CHECK_EQ_I64(delay, T, "spaced from the real start");
    CHECK_EQ_I64(cr_limiter_anchor(lim, 0, -1), CR_E_COST, "anchor cost");
    cr_limiter_free(lim);
}

/* cr_wait: a window's waiter sleeps into the next window instead of giving
 * up; a timeout or an unfittable cost gives up at once, spending nothing. */
static void test_wait(void)
{
    cr_limit fixed = must("fixed_window", 2, 0.05), hourly = must("fixed_window", 2, 3600);
    cr_limiter *lim, *slow;
    CHECK(cr_limiter_new(&lim, &fixed) == CR_OK && cr_limiter_new(&slow, &hourly) == CR_OK, "new");
    const cr_item item = {.limiter = lim}, slow_item = {.limiter = slow};
    bool admitted;
    int64_t slept;
    cr_decision refusal;
    int64_t start = cr_realtime_ns(); /* the windows' clock */
    for (int i = 0; i < 5; i++) {     /* 2 a window: three windows */
        CHECK_EQ_I64(cr_wait(&item, 1, CR_NEVER, &admitted, &slept, &refusal), CR_OK, "wait");
        CHECK(admitted, "unit %d admitted", i);
    }
    /* the last in the third window at least: a whole window after the first
     * (slept through, or paused through on a busy machine) */
    int64_t spanned = cr_realtime_ns() - start;
    CHECK(spanned >= SECOND / 20, "five units in %" PRId64 " ns", spanned);
    CHECK(cr_wait(&slow_item, 2, 0, &admitted, &slept, NULL) == CR_OK && admitted, "now");
    CHECK_EQ_I64(cr_wait(&slow_item, 1, SECOND / 10, &admitted, &slept, &refusal), CR_OK, "late");
    CHECK(!admitted && slept == 0 && refusal.retry_after_ns > SECOND / 10, "gave up at once");
    CHECK_EQ_I64(cr_wait(&slow_item, 3, CR_NEVER, &admitted, &slept, &refusal), CR_OK, "never");
    CHECK(!admitted && refusal.retry_after_ns == CR_NEVER, "unfittable");
    CHECK_EQ_I64(cr_wait(&item, 1, -1, &admitted, &slept, NULL), CR_E_TIMEOUT, "timeout");
    const cr_item neither = {0};
    CHECK_EQ_I64(cr_wait(&neither, 1, 0, &admitted, &slept, NULL), CR_E_ITEMS, "item");
    cr_limiter_free(lim);
    cr_limiter_free(slow);
}

static int64_t remaining_of(const cr_item *item, int64_t now)
{
    cr_decision d;
    if (item->limiter)
        cr_limiter_check(item->limiter, now, 1, false, &d);
    else
        cr_keyed_check(item->keyed, item->key, item->key_len, now, 1, false, &d);
    return d.allowed ? d.remaining + 1 : 0; /* the units available before this one */
}

static void test_check_all(void)
{
    cr_limit a_limit = must(NULL, 5, 1), b_limit = must("fixed_window", 2, 1);
    cr_limit c_limit = must("sliding_window", 3, 1);
    cr_limiter *a, *b;
    cr_keyed *c;
    CHECK(cr_limiter_new(&a, &a_limit) == CR_OK && cr_limiter_new(&b, &b_limit) == CR_OK &&
              cr_keyed_new(&c, &c_limit, 16) == CR_OK,
          "new");
    cr_item items[3] = {{.limiter = a}, {.limiter = b}, {.keyed = c, .key = "ip", .key_len = 2}};
    cr_decision d;
    size_t index = 99;
    CHECK_EQ_I64(cr_check_all(items, 0, EPOCH, 1, &d, &index), CR_E_ITEMS, "no items");
    CHECK_EQ_I64(cr_check_all(NULL, 1, EPOCH, 1, &d, &index), CR_E_ITEMS, "NULL items");
    cr_item bad[2] = {{.limiter = a}, {0}};
    CHECK_EQ_I64(cr_check_all(bad, 2, EPOCH, 1, &d, &index), CR_E_ITEMS, "an empty item");
    bad[1] = (cr_item){.limiter = a, .keyed = c, .key = "x", .key_len = 1};
    CHECK_EQ_I64(cr_check_all(bad, 2, EPOCH, 1, &d, &index), CR_E_ITEMS, "both kinds");
    CHECK_EQ_I64(cr_check_all(items, 3, EPOCH, -1, &d, &index), CR_E_COST, "cost");

    CHECK(cr_check_all(items, 3, EPOCH, 1, &d, &index) == CR_OK && d.allowed, "all admit");
    CHECK_EQ_I64((int64_t)index, 1, "the fewest remaining: b (1 left)");
    CHECK_EQ_I64(d.remaining, 1, "b's remaining");
    CHECK(cr_check_all(items, 3, EPOCH, 1, &d, &index) == CR_OK && d.allowed, "second");
    int64_t before[3];
    for (int i = 0; i < 3; i++)
        before[i] = remaining_of(&items[i], EPOCH);
    CHECK(cr_check_all(items, 3, EPOCH, 1, &d, &index) == CR_OK && !d.allowed, "b refuses");
    CHECK_EQ_I64((int64_t)index, 1, "the refusal is b's");
    CHECK_EQ_I64(d.retry_after_ns, SECOND, "b's retry: the next window");
    for (int i = 0; i < 3; i++)
        CHECK_EQ_I64(remaining_of(&items[i], EPOCH), before[i], "item %d spent nothing", i);

    /* a refused by cost: a and c refuse; the longest retry wins */
    CHECK(cr_check_all(items, 3, EPOCH + SECOND, 4, &d, &index) == CR_OK && !d.allowed, "cost 4");
    CHECK_EQ_I64(d.retry_after_ns, CR_NEVER, "b and c cannot ever fit 4");

    /* the same limiter twice: the peek admits the first, the last commits,
     * the first's commit refuses, and the last's unit is given back */
    cr_limit one = must("fixed_window", 1, 1);
    for (int k = 0; k < 3; k++) {
        cr_limit l = k == 0 ? one : k == 1 ? must(NULL, 1, 1) : must("sliding_window", 1, 1);
        cr_limiter *twice;
        CHECK(cr_limiter_new(&twice, &l) == CR_OK, "new");
        cr_item pair[2] = {{.limiter = twice}, {.limiter = twice}};
        CHECK(cr_check_all(pair, 2, EPOCH, 1, &d, &index) == CR_OK && !d.allowed,
              "%s listed twice with room for one", cr_algorithm_name(l.algorithm));
        CHECK_EQ_I64((int64_t)index, 0, "the first item's commit refused");
        CHECK_EQ_I64(remaining_of(&pair[0], EPOCH), 1, "%s: the last item's commit was given back",
                     cr_algorithm_name(l.algorithm));
        cr_limiter_free(twice);
    }
    cr_limiter_free(a);
    cr_limiter_free(b);
    cr_keyed_free(c);
}

/* ------------------------------------------------------------------------ */
/* Threads and processes at one frozen instant                               */

typedef struct {
    cr_limiter *limiter;
    cr_keyed *keyed;
    pthread_barrier_t *start;
    int attempts;
    bool reserve; /* alternate allow and reserve */
    int64_t admitted;
} frozen_worker;

static void *run_frozen(void *arg)
{
    frozen_worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < w->attempts; i++) {
        bool ok = false;
        int64_t delay = 0;
        if (w->reserve && i % 2) {
            if (w->limiter)
                cr_limiter_reserve(w->limiter, EPOCH + 7, 1, CR_NEVER, &ok, &delay);
            else
                cr_keyed_reserve(w->keyed, "k", 1, EPOCH + 7, CR_PLAN_DEFAULT, 1, CR_NEVER, &ok,
                                 &delay);
        } else if (w->limiter) {
            cr_limiter_allow(w->limiter, EPOCH + 7, 1, &ok);
        } else {
            cr_keyed_allow(w->keyed, "k", 1, EPOCH + 7, 1, &ok);
        }
        w->admitted += ok && delay == 0;
    }
    return NULL;
}

static int64_t frozen_threads(cr_limiter *limiter, cr_keyed *keyed, int attempts)
{
    pthread_t threads[THREADS];
    frozen_worker workers[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (frozen_worker){limiter, keyed, &start, attempts, true, 0};
        pthread_create(&threads[i], NULL, run_frozen, &workers[i]);
    }
    int64_t total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        total += workers[i].admitted;
    }
    pthread_barrier_destroy(&start);
    return total;
}

static void test_frozen_threads(void)
{
    static const char *const windows[] = {"fixed_window", "sliding_window"};
    for (int a = 0; a < 2; a++) {
        cr_limit limit = must(windows[a], 1000, 60);
        cr_limiter *lim;
        cr_keyed *keyed;
        CHECK(cr_limiter_new(&lim, &limit) == CR_OK && cr_keyed_new(&keyed, &limit, 8) == CR_OK,
              "new");
        int64_t by_limiter = frozen_threads(lim, NULL, 2000);
        int64_t by_keyed = frozen_threads(NULL, keyed, 2000);
        printf("%s: %d threads x 2000 at one instant: limiter %" PRId64 ", keyed %" PRId64
               " admitted (rate 1000)\n",
               windows[a], THREADS, by_limiter, by_keyed);
        CHECK_EQ_I64(by_limiter, 1000, "%s limiter: exactly the window's amount", windows[a]);
        CHECK_EQ_I64(by_keyed, 1000, "%s keyed: exactly the window's amount", windows[a]);
        cr_limiter_free(lim);
        cr_keyed_free(keyed);
    }
}

/* ThreadSanitizer emulates 16-byte atomics (a keyed slot, a shared Limiter's
 * {generation, state} pair) with a lock of its own process, so under it a
 * region's cross-process counts mean nothing (as in test_shared.c): those
 * run in the plain and ASan builds. */
#if defined(__SANITIZE_THREAD__)
#define SLOTS_ATOMIC_ACROSS_PROCESSES 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOTS_ATOMIC_ACROSS_PROCESSES 0
#endif
#endif
#ifndef SLOTS_ATOMIC_ACROSS_PROCESSES
#define SLOTS_ATOMIC_ACROSS_PROCESSES 1
#endif

static void test_frozen_processes(void)
{
    static const char *const windows[] = {"fixed_window", "sliding_window"};
    for (int a = 0; a < 2; a++) {
        for (int keyed_kind = 0; SLOTS_ATOMIC_ACROSS_PROCESSES && keyed_kind < 2; keyed_kind++) {
            char path[128];
            snprintf(path, sizeof path, "/dev/shm/cellrate-catalogue-p%d-%d-%d", (int)getpid(), a,
                     keyed_kind);
            unlink(path);
            cr_limit limit = must(windows[a], 500, 60);
            _Atomic int64_t *counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            CHECK(counts != MAP_FAILED, "mmap");
            atomic_store(&counts[0], 0);
            atomic_store(&counts[1], 0);
            pid_t pids[THREADS];
            for (int p = 0; p < THREADS; p++) {
                pids[p] = fork();
                if (pids[p] == 0) {
                    cr_limiter *lim = NULL;
                    cr_keyed *keyed = NULL;
                    cr_status status = keyed_kind ? cr_keyed_open(&keyed, &limit, 16, path, 0600,
                                                                  CR_CHANGE_APPLY)
                                                  : cr_limiter_open(&lim, &limit, path, 0600,
                                                                    CR_CHANGE_APPLY);
                    if (status != CR_OK)
                        _exit(3);
                    atomic_fetch_add(&counts[1], 1);
                    while (atomic_load(&counts[1]) < THREADS) /* start together */
                        ;
                    int64_t admitted = 0;
                    for (int i = 0; i < 1500; i++) {
                        bool ok;
                        if (keyed)
                            cr_keyed_allow(keyed, "k", 1, EPOCH + 7, 1, &ok);
                        else
                            cr_limiter_allow(lim, EPOCH + 7, 1, &ok);
                        admitted += ok;
                    }
                    atomic_fetch_add(&counts[0], admitted);
                    cr_limiter_free(lim);
                    cr_keyed_free(keyed);
                    _exit(0);
                }
            }
            int clean = 0;
            for (int p = 0; p < THREADS; p++) {
                int status;
                waitpid(pids[p], &status, 0);
                clean += WIFEXITED(status) && WEXITSTATUS(status) == 0;
            }
            CHECK_EQ_I64(clean, THREADS, "every process ran");
            int64_t total = atomic_load(&counts[0]);
            printf("%s %s: %d processes x 1500 at one instant: %" PRId64 " admitted (rate 500)\n",
                   windows[a], keyed_kind ? "keyed region" : "limiter region", THREADS, total);
            CHECK_EQ_I64(total, 500, "%s across processes: exactly the window's amount",
                         windows[a]);
            munmap((void *)counts, 4096);
            unlink(path);
        }
    }
}

/* check_all hammered by threads over overlapping sets of limits. */
enum { LIMITS = 4, ROUNDS = 3000 };

typedef struct {
    cr_item *items;
    pthread_barrier_t *start;
    unsigned seed;
    int64_t admitted_per_limit[LIMITS];
    int64_t admitted, refused;
} composite_worker;

static void *run_composites(void *arg)
{
    composite_worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int round = 0; round < ROUNDS; round++) {
        cr_item chosen[3];
        int which[3], n = 2 + (int)(rand_r(&w->seed) % 2);
        for (int i = 0; i < n; i++) {
            which[i] = (int)(rand_r(&w->seed) % LIMITS);
            chosen[i] = w->items[which[i]];
        }
        int64_t cost = 1 + (int64_t)(rand_r(&w->seed) % 3);
        cr_decision d;
        if (cr_check_all(chosen, (size_t)n, EPOCH + 7, cost, &d, NULL) != CR_OK)
            continue;
        if (d.allowed) {
            w->admitted++;
            for (int i = 0; i < n; i++)
                w->admitted_per_limit[which[i]] += cost;
        } else {
            w->refused++;
        }
    }
    return NULL;
}

static void test_check_all_threads(void)
{
    cr_limit limits[LIMITS] = {must(NULL, 1000, 60), must("token_bucket", 3000, 60),
                               must("fixed_window", 6000, 60), must("sliding_window", 20000, 60)};
    cr_limiter *a, *b, *c;
    cr_keyed *d;
    CHECK(cr_limiter_new(&a, &limits[0]) == CR_OK && cr_limiter_new(&b, &limits[1]) == CR_OK &&
              cr_limiter_new(&c, &limits[2]) == CR_OK && cr_keyed_new(&d, &limits[3], 8) == CR_OK,
          "new");
    cr_item items[LIMITS] = {
        {.limiter = a}, {.limiter = b}, {.limiter = c}, {.keyed = d, .key = "user", .key_len = 4}};
    pthread_t threads[THREADS];
    composite_worker workers[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].items = items;
        workers[i].start = &start;
        workers[i].seed = 1234u + (unsigned)i;
        pthread_create(&threads[i], NULL, run_composites, &workers[i]);
    }
    int64_t per_limit[LIMITS] = {0}, admitted = 0, refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        admitted += workers[i].admitted;
        refused += workers[i].refused;
        for (int l = 0; l < LIMITS; l++)
            per_limit[l] += workers[i].admitted_per_limit[l];
    }
    pthread_barrier_destroy(&start);
    printf("check_all: %d threads, %d composites: %" PRId64 " admitted, %" PRId64 " refused\n",
           THREADS, THREADS * ROUNDS, admitted, refused);
    for (int l = 0; l < LIMITS; l++) {
        int64_t bound = limits[l].burst, left = remaining_of(&items[l], EPOCH + 7);
        printf("  %-14s bound %" PRId64 ": admitted %" PRId64 ", left %" PRId64 "\n",
               cr_algorithm_name(limits[l].algorithm), bound, per_limit[l], left);
        CHECK(per_limit[l] <= bound, "limit %d admitted %" PRId64 " > %" PRId64, l, per_limit[l],
              bound);
        /* every unit taken by a refused composite was given back */
        CHECK_EQ_I64(left, bound - per_limit[l], "limit %d: left = bound - admitted", l);
    }
    CHECK(refused > 0 && admitted > 0, "both outcomes happened");
    cr_limiter_free(a);
    cr_limiter_free(b);
    cr_limiter_free(c);
    cr_keyed_free(d);
}

int main(void)
{
    test_limits();
    test_horizon();
    test_window_clock();
    test_window_end_cache();
    test_region_algorithm();
    test_reserve_errors();
    test_anchor();
    test_wait();
    test_check_all();
    test_frozen_threads();
    test_frozen_processes();
    test_check_all_threads();
    return check_summary("test_catalogue");
}
