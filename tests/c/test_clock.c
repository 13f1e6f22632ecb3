/* The clocks: the fast clock follows CLOCK_MONOTONIC and never steps back,
 * within a thread or across threads; a limit on it decides as on the other. */
#include "cellrate.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The fast clock's line may be this far from CLOCK_MONOTONIC (it aims at
 * about a microsecond; the margin absorbs a preempted reader). */
#define TOLERANCE_NS 50000
#define RUN_NS 300000000 /* 0.3 s: many re-anchorings (every 2 ms) */

static void test_follows_monotonic(void)
{
    int64_t start = cr_clock_ns(), worst = 0, previous = cr_fast_clock_ns();
    long reads = 0, backwards = 0, outside = 0;
    for (int64_t now = start; now - start < RUN_NS; now = cr_clock_ns()) {
        int64_t before = cr_clock_ns();
        int64_t fast = cr_fast_clock_ns();
        int64_t after = cr_clock_ns();
        reads++;
        backwards += fast < previous;
        previous = fast;
        int64_t off = fast < before ? before - fast : fast > after ? fast - after : 0;
        if (off > worst)
            worst = off;
        outside += off > TOLERANCE_NS;
    }
    printf("fast clock (%s): %ld reads over %.1f s, farthest from CLOCK_MONOTONIC %" PRId64 " ns\n",
           cr_fast_clock_is_tsc() ? "TSC" : "clock_gettime", reads, RUN_NS / 1e9, worst);
    CHECK(reads > 1000, "reads %ld", reads);
    CHECK_EQ_I64(backwards, 0, "a later read was earlier");
    /* A preempted reader can land one read outside; never many. */
    CHECK(outside <= reads / 1000, "%ld of %ld reads beyond %d ns", outside, reads, TOLERANCE_NS);
}

/* Thread A publishes each reading; thread B, having seen a reading, reads the
 * clock. The counter is read without a fence, so B's reading may come out a
 * little earlier (the CPU read the counter before the load completed), but
 * never by more than that reordering: no step of the line may show. */
typedef struct {
    _Atomic int64_t published;
    _Atomic int stop;
    long earlier, checks;
    int64_t worst;
} relay;

static void *publisher(void *arg)
{
    relay *r = arg;
    while (!atomic_load(&r->stop))
        atomic_store(&r->published, cr_fast_clock_ns());
    return NULL;
}

static void test_monotonic_across_threads(void)
{
    relay r = {.published = 0, .stop = 0, .earlier = 0, .checks = 0, .worst = 0};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, publisher, &r) == 0, "pthread_create");
    int64_t start = cr_clock_ns();
    while (cr_clock_ns() - start < RUN_NS) {
        int64_t seen = atomic_load(&r.published);
        int64_t mine = cr_fast_clock_ns();
        r.checks++;
        if (mine < seen) {
            r.earlier++;
            if (seen - mine > r.worst)
                r.worst = seen - mine;
        }
    }
    atomic_store(&r.stop, 1);
    pthread_join(thread, NULL);
    printf("fast clock across threads: %ld of %ld reads earlier than one seen before them, "
           "by %" PRId64 " ns at most\n",
           r.earlier, r.checks, r.worst);
    CHECK(r.checks > 1000, "checks %ld", r.checks);
    CHECK(r.worst <= TOLERANCE_NS, "a read %" PRId64 " ns earlier than one seen before it",
          r.worst);
}

static void test_limit_on_the_fast_clock(void)
{
    static const char *const names[] = {"monotonic", "fast"};
    for (int i = 0; i < 2; i++) {
        cr_limit limit;
        cr_limit_args args = {.rate = 1000,
                              .has_burst = true,
                              .burst = 5,
                              .clock = names[i],
                              .clock_len = strlen(names[i])};
        CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "clock %s", names[i]);
        CHECK(limit.fast_clock == (i == 1), "clock %s", names[i]);
        cr_limiter *lim;
        CHECK_EQ_I64(cr_limiter_new(&lim, &limit), CR_OK, "clock %s", names[i]);
        /* A pause between two decisions longer than the burst's 5 ms (a busy
         * machine) forfeits the units it could not spend: they are not owed
         * afterwards. Each decision happens between `before` and `after`, so
         * `after - previous before` bounds the pause from above. */
        int64_t start = cr_clock_ns(), admitted = 0, spanned = 0, lost = 0;
        int64_t previous_before = start;
        for (;;) {
            int64_t before = cr_clock_ns();
            if (before - start >= 50000000)
                break;
            bool ok;
            cr_limiter_allow(lim, CR_CLOCK, 1, &ok);
            admitted += ok;
            int64_t after = cr_clock_ns();
            if (after - previous_before > 5000000)
                lost += after - previous_before - 5000000;
            previous_before = before;
            spanned = before - start;
        }
        int64_t elapsed = cr_clock_ns() - start;
        /* burst + one per ms, and the reading may be a little ahead. */
        int64_t most = 5 + elapsed / 1000000 + 1;
        int64_t fewest = 5 + (spanned - lost) / 1000000 - 2;
        CHECK(admitted <= most && admitted >= fewest,
              "clock %s: %" PRId64 " admitted in %" PRId64 " ns", names[i], admitted, elapsed);
        cr_limiter_free(lim);
    }
    cr_limit limit;
    cr_limit_args bad = {.rate = 1, .clock = "tsc", .clock_len = 3};
    CHECK_EQ_I64(cr_limit_init(&limit, &bad), CR_E_CLOCK, "unknown clock");
    bad.clock = "fastest";
    bad.clock_len = 4; /* a prefix that spells a name is that name */
    CHECK_EQ_I64(cr_limit_init(&limit, &bad), CR_OK, "length-delimited name");
    bad.clock_len = 7;
    CHECK_EQ_I64(cr_limit_init(&limit, &bad), CR_E_CLOCK, "length-delimited name");
}

/* cr_sleep_ns sleeps at least the time asked, and no sleep for <= 0. */
static void test_sleep(void)
{
    const int64_t asked[] = {1000000, 3000000, 20000000};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        const int64_t start = cr_clock_ns();
        cr_sleep_ns(asked[i]);
        const int64_t slept = cr_clock_ns() - start;
        CHECK(slept >= asked[i] && slept < asked[i] + 1000000000,
              "asked %" PRId64 " ns, slept %" PRId64 " ns", asked[i], slept);
    }
    const int64_t start = cr_clock_ns();
    cr_sleep_ns(0);
    cr_sleep_ns(-5);
    cr_sleep_ns(INT64_MIN);
    CHECK(cr_clock_ns() - start < 100000000, "no sleep for a duration <= 0");
}

int main(void)
{
    test_sleep();
    test_follows_monotonic();
    test_monotonic_across_threads();
    test_limit_on_the_fast_clock();
    return check_summary("test_clock");
}
