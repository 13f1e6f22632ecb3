/* The clocks: the fast clock follows CLOCK_MONOTONIC and never steps back,
 * within a thread or across threads; a limit on it decides as on the other. */
#include "books.h"
#include "cellrate.h"
#include "check.h"
#include "fastclock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The fast clock's line may be this far from CLOCK_MONOTONIC (it aims at
 * about a microsecond; the margin absorbs a preempted reader). */
#define TOLERANCE_NS 50000
#define RUN_NS 300000000 /* 0.3 s: many re-anchorings (every 2 ms) */

/* `clock` read between two reads of `reference`, for RUN_NS: how far a
 * reading falls outside its bracket, and (`monotone`) that none steps back.
 * The realtime clock may: its offset is measured anew at each anchor. */
static void follows(const char *name, int64_t (*clock)(void), int64_t (*reference)(void),
                    bool monotone)
{
    int64_t start = cr_clock_ns(), worst = 0, previous = clock();
    long reads = 0, backwards = 0, outside = 0;
    for (int64_t now = start; now - start < RUN_NS; now = cr_clock_ns()) {
        int64_t before = reference();
        int64_t read = clock();
        int64_t after = reference();
        reads++;
        backwards += read < previous;
        previous = read;
        int64_t off = read < before ? before - read : read > after ? read - after : 0;
        if (off > worst)
            worst = off;
        outside += off > TOLERANCE_NS;
    }
    printf("%s (%s): %ld reads over %.1f s, farthest from its reference %" PRId64 " ns\n", name,
           cr_fast_clock_is_tsc() ? "TSC" : "clock_gettime", reads, RUN_NS / 1e9, worst);
    CHECK(reads > 1000, "reads %ld", reads);
    if (monotone)
        CHECK_EQ_I64(backwards, 0, "%s: a later read was earlier", name);
    /* A preempted reader can land one read outside; never many. */
    CHECK(outside <= reads / 1000, "%ld of %ld reads beyond %d ns", outside, reads, TOLERANCE_NS);
}

/* The window algorithms' clock: CLOCK_REALTIME read from the same line (its
 * offset from CLOCK_MONOTONIC taken at each anchor), as a window limit reads it. */
static cr_limit window_limit;
static int64_t window_clock(void) { return cr_read_clock(&window_limit); }

static void test_follows_the_kernels_clocks(void)
{
    follows("fast clock, against CLOCK_MONOTONIC", cr_fast_clock_ns, cr_clock_ns, true);
    cr_limit_args args = {.rate = 10, .algorithm = "fixed_window", .algorithm_len = 12};
    CHECK_EQ_I64(cr_limit_init(&window_limit, &args), CR_OK, "a window limit");
    follows("realtime, against CLOCK_REALTIME", window_clock, cr_realtime_ns, false);
}

/* Thread A publishes each reading; thread B, having seen a reading, reads the
 * clock. The counter is read without a fence, so B's reading may come out a
 * little earlier (the CPU read the counter before the load completed), but
 * never by more than that reordering: no step of the line may show. */
typedef struct {
    int64_t (*clock)(void);
    _Atomic int64_t published;
    _Atomic int stop;
    long earlier, checks;
    int64_t worst;
} relay;

static void *publisher(void *arg)
{
    relay *r = arg;
    while (!atomic_load(&r->stop))
        atomic_store(&r->published, r->clock());
    return NULL;
}

static int64_t default_clock(void) { return cr_monotonic_now(); }

/* The fast clock may come out a little earlier than a reading seen before
 * (`slack`); the default clock reads the counter ordered: never (0). */
static void monotonic_across_threads(const char *name, int64_t (*clock)(void), int64_t slack)
{
    relay r = {.clock = clock, .published = 0, .stop = 0, .earlier = 0, .checks = 0, .worst = 0};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, publisher, &r) == 0, "pthread_create");
    int64_t start = cr_clock_ns();
    while (cr_clock_ns() - start < RUN_NS) {
        int64_t seen = atomic_load(&r.published);
        int64_t mine = clock();
        r.checks++;
        if (mine < seen) {
            r.earlier++;
            if (seen - mine > r.worst)
                r.worst = seen - mine;
        }
    }
    atomic_store(&r.stop, 1);
    pthread_join(thread, NULL);
    printf("%s clock across threads: %ld of %ld reads earlier than one seen before them, "
           "by %" PRId64 " ns at most\n",
           name, r.earlier, r.checks, r.worst);
    CHECK(r.checks > 1000, "checks %ld", r.checks);
    CHECK(r.worst <= slack, "%s: a read %" PRId64 " ns earlier than one seen before it", name,
          r.worst);
}

static void test_monotonic_across_threads(void)
{
    monotonic_across_threads("fast", cr_fast_clock_ns, TOLERANCE_NS);
    monotonic_across_threads("default", default_clock, 0);
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
        /* burst + one per ms (§1's bound, exact), and a reading may be a
         * little ahead; the floor counts what was decided (books.h). */
        books run;
        int64_t start = cr_clock_ns(), admitted = 0, idle = 0;
        books_open(&run, start, limit.emission_ns, limit.tolerance_ns);
        for (;;) {
            int64_t before = cr_clock_ns();
            if (before - start >= 50000000)
                break;
            bool ok;
            cr_limiter_allow(lim, CR_CLOCK, 1, &ok);
            books_record(&run, before, cr_clock_ns(), ok);
            admitted += ok;
        }
        int64_t elapsed = cr_clock_ns() - start;
        int64_t most = 5 + elapsed / 1000000 + 1, fewest = books_fewest(&run, 1, &idle);
        CHECK(admitted <= most && admitted >= fewest,
              "clock %s: %" PRId64 " admitted in %" PRId64 " ns (%" PRId64 " to %" PRId64
              "; %" PRId64 " ns maybe idle)",
              names[i], admitted, elapsed, fewest, most, idle);
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

/* A counter that jumps, driven through cr_fast_line_move with made-up pairs
 * (CLOCK_MONOTONIC, counter) on a line of the test's own: a counter at 2
 * ticks per ns, which a migration or a suspend moves by `offset` ticks. */
typedef struct {
    cr_fast_line line;
    int64_t real;    /* CLOCK_MONOTONIC now */
    uint64_t offset; /* where the counter stands against 2 * real */
    int64_t last;    /* the latest time the line gave */
} jumping;

static uint64_t counter(const jumping *j) { return (uint64_t)(2 * j->real) + j->offset; }

/* The time at `real`: from the line where it holds the counter, else by a move. */
static int64_t time_at(jumping *j, int64_t real)
{
    j->real = real;
    int64_t now;
    if (!cr_fast_line_time(&j->line, counter(j), &now))
        now = cr_fast_line_move(&j->line, real, counter(j));
    j->last = now;
    return now;
}

/* Reads every 100 us for `ns`: each within `slack` of CLOCK_MONOTONIC. */
static void run_for(jumping *j, int64_t ns, int64_t slack, const char *what)
{
    long far = 0, back = 0;
    for (int64_t end = j->real + ns; j->real < end;) {
        int64_t previous = j->last;
        int64_t now = time_at(j, j->real + 100000);
        far += now > j->real + slack || now < j->real - slack;
        back += now < previous;
    }
    CHECK_EQ_I64(far, 0, "%s: readings beyond %" PRId64 " ns of CLOCK_MONOTONIC", what, slack);
    CHECK_EQ_I64(back, 0, "%s: readings back", what);
}

static void test_counter_jumps(void)
{
    jumping j;
    memset(&j, 0, sizeof j);
    j.offset = 1000;
    j.real = 5000000000; /* 5 s after boot */
    CHECK_EQ_I64(time_at(&j, j.real), j.real, "calibrating: CLOCK_MONOTONIC itself");
    run_for(&j, 20000000, 1000, "steady");
    CHECK(atomic_load(&j.line.span) != 0, "a line after calibration");

    /* Ahead by 10 s (a migration to a host whose counter is ahead): the line
     * does not hold the reading, and the move drops the line. */
    j.offset += 20000000000u;
    int64_t before = j.real + 100000;
    CHECK_EQ_I64(time_at(&j, before), before, "after a jump ahead: CLOCK_MONOTONIC");
    CHECK_EQ_I64(atomic_load(&j.line.span), 0, "the line dropped after a jump ahead");
    run_for(&j, 20000000, 1000, "after a jump ahead");

    /* Back by 10 s (a suspend that reset the counter). */
    j.offset -= 20000000000u;
    before = j.real + 100000;
    CHECK_EQ_I64(time_at(&j, before), before, "after a jump back: CLOCK_MONOTONIC");
    CHECK_EQ_I64(atomic_load(&j.line.span), 0, "the line dropped after a jump back");
    run_for(&j, 20000000, 1000, "after a jump back");

    /* Ahead by 0.5 ms inside a window: the readings until the line's end are
     * ahead by that much at most; the next move sees the rate change and
     * drops the line. */
    j.offset += 1000000;
    long moved = 0;
    for (int i = 0; i < 40 && !moved; i++) {
        int64_t now = time_at(&j, j.real + 100000);
        CHECK(now <= j.real + 500000 + 1000, "a small jump ahead: %" PRId64 " ns ahead",
              now - j.real);
        moved = atomic_load(&j.line.span) == 0;
    }
    CHECK(moved, "a small jump ahead caught at the next move");
    run_for(&j, 20000000, 1000, "after a small jump ahead");

    /* A re-anchor made late (no reading for 5 ms: a preempted thread) starts
     * at CLOCK_MONOTONIC: it does not carry a slope that was not 1 (this
     * line's, catching up after a window of a slowed counter) past the end. */
    for (int i = 0; i < 20; i++) {
        j.offset -= 400; /* 0.2% slow for 2 ms */
        time_at(&j, j.real + 100000);
    }
    run_for(&j, 2000000, 10000, "after a slowed window");
    int64_t late = j.real + 5000000;
    int64_t now = time_at(&j, late);
    CHECK(now >= late && now <= late + 1000,
          "a late re-anchor: %" PRId64 " ns from CLOCK_MONOTONIC", now - late);

    /* A counter that slows by 500 ppm (as NTP slews CLOCK_MONOTONIC) is no
     * jump: the line follows it. */
    long drops = 0;
    for (int i = 0; i < 200; i++) {
        j.offset -= 100; /* 100 of the 200000 ticks of each 100 us */
        time_at(&j, j.real + 100000);
        drops += atomic_load(&j.line.span) == 0;
    }
    CHECK_EQ_I64(drops, 0, "a slewed counter drops no line");
    CHECK(j.last >= j.real - 2000 && j.last <= j.real + 2000, "a slewed counter followed: %" PRId64,
          j.last - j.real);
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
    /* (a bound a busy machine's pauses cannot reach; a sleep of -5 ns or of
     * INT64_MIN taken as a length would be far longer) */
    CHECK(cr_clock_ns() - start < 10000000000, "no sleep for a duration <= 0");
}

int main(void)
{
    test_sleep();
    test_follows_the_kernels_clocks();
    test_monotonic_across_threads();
    test_limit_on_the_fast_clock();
    test_counter_jumps();
    return check_summary("test_clock");
}
