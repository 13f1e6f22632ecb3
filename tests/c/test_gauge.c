/*
 * Concurrency gauges (docs/design.md §15): bad input, exact counts, keys
 * that come and go, leases, threads and processes that never hold more than
 * the limit (counted here, not by the gauge), and holders SIGKILLed at
 * random instants whose units come back while the living keep theirs.
 */
#include "cellrate.h"
#include "check.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0 /* TSan cannot follow processes: those tests run without it */
#endif

#define HOLDERS 8
#define CYCLES 10000
#define LIMIT 5
#define KILLS 200

static char dir[64];

static const char *region_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void test_bad_input(void)
{
    cr_gauge *gauge = NULL;
    CHECK_EQ_I64(cr_gauge_open(&gauge, 0, false, 0, 0, false, NULL, 0), CR_E_LIMIT, "limit 0");
    CHECK_EQ_I64(cr_gauge_open(&gauge, -3, false, 0, 0, false, NULL, 0), CR_E_LIMIT, "limit < 0");
    CHECK_EQ_I64(cr_gauge_open(&gauge, CR_GAUGE_MAX_LIMIT + 1, false, 0, 0, false, NULL, 0),
                 CR_E_LIMIT, "limit above the maximum");
    CHECK_EQ_I64(cr_gauge_open(&gauge, 5, true, 0, 0, false, NULL, 0), CR_E_CAPACITY, "capacity 0");
    CHECK_EQ_I64(cr_gauge_open(&gauge, 5, false, 0, -1, false, NULL, 0), CR_E_LEASE, "lease < 0");
    CHECK_EQ_STR(cr_status_param(CR_E_LIMIT), "limit", "E_LIMIT names limit");
    CHECK_EQ_STR(cr_status_param(CR_E_HOLD_COST), "cost", "E_HOLD_COST names cost");
    CHECK_EQ_STR(cr_status_param(CR_E_LEASE), "lease", "E_LEASE names lease");
    int64_t ns = 7;
    const double bad_leases[] = {0.0, -1.0, 1e300, -0.0};
    for (size_t i = 0; i < sizeof bad_leases / sizeof *bad_leases; i++)
        CHECK_EQ_I64(cr_lease_from_seconds(bad_leases[i], &ns), CR_E_LEASE, "lease %g",
                     bad_leases[i]);
    CHECK_EQ_I64(cr_lease_from_seconds(0.0 / 0.0, &ns), CR_E_LEASE, "lease NaN");
    CHECK_EQ_I64(cr_lease_from_seconds(1.5, &ns), CR_OK, "lease 1.5 s");
    /* the checks of the stores that hold units elsewhere (Redis) are cr_gauge_open's */
    CHECK_EQ_I64(cr_gauge_check(0, 1), CR_E_LIMIT, "check: limit 0");
    CHECK_EQ_I64(cr_gauge_check(CR_GAUGE_MAX_LIMIT + 1, 1), CR_E_LIMIT, "check: limit too high");
    CHECK_EQ_I64(cr_gauge_check(CR_GAUGE_MAX_LIMIT, 0), CR_E_HOLD_COST, "check: cost 0");
    CHECK_EQ_I64(cr_gauge_check(1, 2), CR_OK, "check: a cost above the limit is no mistake");
    CHECK_EQ_I64(ns, 1500000000, "lease 1.5 s in ns");

    CHECK_EQ_I64(cr_gauge_open(&gauge, 2, false, 0, 0, false, NULL, 0), CR_OK, "one gauge");
    bool acquired = true;
    cr_holding holding;
    CHECK_EQ_I64(cr_gauge_acquire(gauge, NULL, 0, 0, &acquired, &holding), CR_E_HOLD_COST,
                 "cost 0");
    CHECK_EQ_I64(cr_gauge_acquire(gauge, NULL, 0, -1, &acquired, &holding), CR_E_HOLD_COST,
                 "cost < 0");
    CHECK_EQ_I64(cr_gauge_acquire(gauge, "k", 1, 1, &acquired, &holding), CR_E_KEY_UNKEYED,
                 "a key on a gauge without keys");
    CHECK(!acquired, "nothing acquired on bad input");
    int64_t in_flight = -1;
    CHECK_EQ_I64(cr_gauge_in_flight(gauge, "k", 1, &in_flight), CR_E_KEY_UNKEYED, "in_flight key");
    /* releases of nothing, twice, and of a holding of no gauge of this table */
    cr_holding none;
    memset(&none, 0, sizeof none);
    CHECK_EQ_I64(cr_gauge_release(gauge, &none), 0, "release of no holding");
    CHECK_EQ_I64(cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &holding), CR_OK, "acquire");
    CHECK(acquired, "acquired");
    cr_holding foreign = holding;
    foreign.entry = 12345;
    CHECK_EQ_I64(cr_gauge_release(gauge, &foreign), 0, "release of a foreign holding");
    cr_holding forged = holding;
    forged.holder ^= 1;
    CHECK_EQ_I64(cr_gauge_release(gauge, &forged), 0, "release of another holder's units");
    CHECK_EQ_I64(cr_gauge_release(gauge, &holding), 1, "release");
    CHECK_EQ_I64(cr_gauge_release(gauge, &holding), 0, "release again: a no-op");
    CHECK_EQ_I64(cr_gauge_in_flight(gauge, NULL, 0, &in_flight), CR_OK, "in_flight");
    CHECK_EQ_I64(in_flight, 0, "never below zero");
    cr_gauge_free(gauge);
    cr_gauge_free(NULL);

    CHECK_EQ_I64(cr_gauge_open(&gauge, 2, true, 4, 0, false, NULL, 0), CR_OK, "keyed");
    CHECK_EQ_I64(cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &holding), CR_E_KEY,
                 "no key on a keyed table");
    CHECK_EQ_I64(cr_gauge_in_flight(gauge, NULL, 0, &in_flight), CR_E_KEY, "in_flight no key");
    cr_gauge_free(gauge);
}

static void test_counts(void)
{
    cr_gauge *gauge;
    CHECK_EQ_I64(cr_gauge_open(&gauge, 3, false, 0, 0, false, NULL, 0), CR_OK, "open");
    bool acquired;
    cr_holding two, one, refused;
    cr_gauge_acquire(gauge, NULL, 0, 2, &acquired, &two);
    CHECK(acquired, "2 of 3");
    cr_gauge_acquire(gauge, NULL, 0, 2, &acquired, &refused);
    CHECK(!acquired && refused.holder == 0, "2 more refused, no receipt");
    cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &one);
    CHECK(acquired, "the last unit");
    int64_t in_flight;
    cr_gauge_in_flight(gauge, NULL, 0, &in_flight);
    CHECK_EQ_I64(in_flight, 3, "full");
    CHECK_EQ_I64(cr_gauge_release(gauge, &two), 2, "both units of a cost-2 holding");
    cr_gauge_in_flight(gauge, NULL, 0, &in_flight);
    CHECK_EQ_I64(in_flight, 1, "after release");
    cr_gauge_acquire(gauge, NULL, 0, 4, &acquired, &refused);
    CHECK(!acquired, "a cost above the limit never fits");
    bool waited = true;
    CHECK_EQ_I64(cr_gauge_wait(gauge, NULL, 0, 4, CR_NEVER, &waited, &refused), CR_OK,
                 "wait for what never fits returns");
    CHECK(!waited, "refused at once");
    CHECK_EQ_I64(cr_gauge_wait(gauge, NULL, 0, 1, -1, &waited, &refused), CR_E_TIMEOUT,
                 "negative timeout");
    cr_gauge_acquire(gauge, NULL, 0, 2, &acquired, &two);
    CHECK(acquired, "2 again");
    CHECK_EQ_I64(cr_gauge_wait(gauge, NULL, 0, 1, 1000000, &waited, &refused), CR_OK, "wait 1 ms");
    CHECK(!waited, "full for the whole wait");
    cr_gauge_free(gauge);
}

static void test_keys(void)
{
    cr_gauge *gauge; /* capacity 2: 2 buckets of 4 gauges, every key's candidates */
    CHECK_EQ_I64(cr_gauge_open(&gauge, 1, true, 2, 0, false, NULL, 0), CR_OK, "open");
    cr_holding held[9];
    bool acquired;
    char key[16];
    for (int k = 0; k < 8; k++) {
        int len = snprintf(key, sizeof key, "key-%d", k);
        cr_gauge_acquire(gauge, key, (size_t)len, 1, &acquired, &held[k]);
        CHECK(acquired, "key %d gets a gauge", k);
        cr_gauge_acquire(gauge, key, (size_t)len, 1, &acquired, &held[8]);
        CHECK(!acquired, "key %d holds its limit", k);
    }
    cr_gauge_acquire(gauge, "key-8", 5, 1, &acquired, &held[8]);
    CHECK(!acquired, "a table full of held keys refuses a new one");
    CHECK_EQ_I64(cr_gauge_release(gauge, &held[3]), 1, "key-3 lets go: it is absent");
    int64_t in_flight = -1;
    cr_gauge_in_flight(gauge, "key-3", 5, &in_flight);
    CHECK_EQ_I64(in_flight, 0, "an absent key holds nothing");
    cr_gauge_acquire(gauge, "key-8", 5, 1, &acquired, &held[8]);
    CHECK(acquired, "its gauge goes to a new key");
    cr_gauge_in_flight(gauge, "key-3", 5, &in_flight);
    CHECK_EQ_I64(in_flight, 0, "key-3 is still absent");
    cr_gauge_in_flight(gauge, "key-8", 5, &in_flight);
    CHECK_EQ_I64(in_flight, 1, "key-8 holds one");
    cr_gauge_in_flight(gauge, "key-0", 5, &in_flight);
    CHECK_EQ_I64(in_flight, 1, "key-0 kept its holding");
    CHECK_EQ_I64(cr_gauge_release(gauge, &held[3]), 0, "the old receipt of key-3: a no-op");
    cr_gauge_in_flight(gauge, "key-8", 5, &in_flight);
    CHECK_EQ_I64(in_flight, 1, "and key-8 kept its unit");
    cr_gauge_free(gauge);
}

/* A lease of 2 ms: each check that a holding still counts is made only where
 * the time measured since it was taken is within its lease (a busy machine
 * can pause longer than that between two calls: the run starts again). */
static void test_lease(void)
{
    const int64_t lease_ns = 2000000;
    bool refused_within = false, reclaimed = false, timely = false;
    int64_t late_release = -1, in_flight = -1, released = -1;
    for (int attempt = 0; attempt < 100 && !timely; attempt++) {
        cr_gauge *gauge;
        CHECK_EQ_I64(cr_gauge_open(&gauge, 1, false, 0, lease_ns, false, NULL, 0), CR_OK,
                     "lease 2 ms");
        bool acquired;
        cr_holding hung, next;
        int64_t taken = cr_clock_ns();
        cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &hung);
        CHECK(acquired, "acquired");
        cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &next);
        refused_within = !acquired;
        bool first_window = cr_clock_ns() - taken < lease_ns;
        cr_sleep_ns(3000000);
        taken = cr_clock_ns();
        cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &next);
        reclaimed = acquired;
        late_release = cr_gauge_release(gauge, &hung);
        cr_gauge_in_flight(gauge, NULL, 0, &in_flight);
        released = cr_gauge_release(gauge, &next);
        timely = first_window && cr_clock_ns() - taken < lease_ns;
        cr_gauge_free(gauge);
    }
    CHECK(timely, "a run within the lease's windows");
    CHECK(refused_within, "held within its lease");
    CHECK(reclaimed, "a holding past its lease is reclaimed when the limit is found full");
    CHECK_EQ_I64(late_release, 0, "the hung holder's late release: a no-op");
    CHECK_EQ_I64(in_flight, 1, "the new holding stays");
    CHECK_EQ_I64(released, 1, "released");
}

/* stats(): in_flight counted in the cells (one gauge, a keyed table, a
 * region), the peak only when asked for, and part of a region's identity. */
static void test_stats(void)
{
    cr_gauge *gauge;
    cr_gauge_stats stats;
    bool acquired;
    cr_holding two, one, keys[3];
    for (int peak = 0; peak < 2; peak++) {
        CHECK_EQ_I64(cr_gauge_open(&gauge, 3, false, 0, 0, peak, NULL, 0), CR_OK, "open");
        CHECK(cr_gauge_tracks_peak(gauge) == peak, "tracks the peak as asked");
        cr_gauge_acquire(gauge, NULL, 0, 2, &acquired, &two);
        cr_gauge_acquire(gauge, NULL, 0, 1, &acquired, &one);
        cr_gauge_release(gauge, &two);
        cr_gauge_stats_read(gauge, &stats);
        CHECK_EQ_I64((int64_t)stats.in_flight, 1, "in flight (peak %d)", peak);
        CHECK_EQ_I64((int64_t)stats.peak, peak ? 3 : 0, "the peak, if tracked (%d)", peak);
        CHECK(stats.peak_tracked == peak, "peak_tracked (%d)", peak);
        CHECK_EQ_I64(cr_gauge_reset_stats(gauge), CR_OK, "reset");
        cr_gauge_stats_read(gauge, &stats);
        CHECK_EQ_I64((int64_t)stats.peak, peak ? 1 : 0, "a reset's peak: held now (%d)", peak);
        CHECK_EQ_I64((int64_t)stats.in_flight, 1, "a reset keeps in_flight (%d)", peak);
        cr_gauge_free(gauge);

        CHECK_EQ_I64(cr_gauge_open(&gauge, 2, true, 8, 0, peak, NULL, 0), CR_OK, "keyed");
        const char *names[3] = {"a", "b", "c"};
        for (int k = 0; k < 3; k++)
            cr_gauge_acquire(gauge, names[k], 1, 2, &acquired, &keys[k]);
        cr_gauge_release(gauge, &keys[1]);
        cr_gauge_stats_read(gauge, &stats);
        CHECK_EQ_I64((int64_t)stats.in_flight, 4, "keyed: the whole table's cells (%d)", peak);
        CHECK_EQ_I64((int64_t)stats.peak, peak ? 6 : 0, "keyed: the peak, if tracked (%d)", peak);
        cr_gauge_free(gauge);
    }

    const char *path = region_path("peak");
    cr_gauge *other;
    for (int peak = 0; peak < 2; peak++) {
        unlink(path);
        CHECK_EQ_I64(cr_gauge_open(&gauge, 3, false, 0, 0, peak, path, 0600), CR_OK, "region");
        CHECK_EQ_I64(cr_gauge_open(&other, 3, false, 0, 0, !peak, path, 0600), CR_E_SHARED_LIMIT,
                     "a region of another peak setting (%d)", peak);
        CHECK_EQ_I64(cr_gauge_open(&other, 3, false, 0, 0, peak, path, 0600), CR_OK,
                     "the same setting");
        cr_gauge_acquire(other, NULL, 0, 2, &acquired, &two);
        cr_region_info info;
        CHECK_EQ_I64(cr_inspect_region(path, &info), CR_OK, "inspect");
        CHECK(info.gauge_stats.peak_tracked == peak, "inspect: the setting (%d)", peak);
        CHECK_EQ_I64((int64_t)info.gauge_stats.in_flight, 2, "inspect: in flight (%d)", peak);
        CHECK_EQ_I64((int64_t)info.gauge_stats.peak, peak ? 2 : 0, "inspect: peak (%d)", peak);
        CHECK_EQ_STR(info.description,
                     peak ? "cellrate.Concurrency(limit=3, peak=True)"
                          : "cellrate.Concurrency(limit=3)",
                     "inspect: its description");
        cr_gauge_free(other); /* its holding stays held: its process lives */
        cr_gauge_stats_read(gauge, &stats);
        CHECK_EQ_I64((int64_t)stats.in_flight, 2, "another handle's units (%d)", peak);
        cr_gauge_free(gauge);
    }
    CHECK_EQ_STR(cr_status_param(CR_E_PEAK), "peak", "E_PEAK names peak");
    unlink(path);
}

/* ------------------------------------------------------------------------ */
/* Holders at once, counted by the test.                                     */

typedef struct {
    cr_gauge *gauge;
    const char *key; /* NULL: one gauge */
    _Atomic int *held_now;
    _Atomic int *most_held;
    _Atomic int *errors;
} holders;

static void hold_cycles(const holders *h, int cycles)
{
    size_t key_len = h->key ? strlen(h->key) : 0;
    for (int i = 0; i < cycles; i++) {
        bool acquired = false;
        cr_holding holding;
        while (!acquired) {
            if (cr_gauge_acquire(h->gauge, h->key, key_len, 1 + (i % 2), &acquired, &holding) !=
                CR_OK)
                atomic_fetch_add(h->errors, 1);
            if (!acquired)
                sched_yield();
        }
        int now = atomic_fetch_add(h->held_now, (int)holding.cost) + (int)holding.cost;
        int most = atomic_load(h->most_held);
        while (now > most && !atomic_compare_exchange_weak(h->most_held, &most, now)) {
        }
        if (i % 64 == 0)
            sched_yield(); /* hold a while, now and then */
        atomic_fetch_sub(h->held_now, (int)holding.cost);
        if (cr_gauge_release(h->gauge, &holding) != holding.cost)
            atomic_fetch_add(h->errors, 1); /* a release that did not land */
    }
}

static void *hold_thread(void *arg)
{
    hold_cycles(arg, CYCLES);
    return NULL;
}

/* lease_ns > 0: cells change as 16-byte pairs; 0: as holder words alone.
 * `peak`: the counters' total is kept too, and its peak never above the limit. */
static void test_threads(const char *key, int64_t lease_ns, bool peak)
{
    cr_gauge *gauge;
    CHECK_EQ_I64(cr_gauge_open(&gauge, LIMIT, key != NULL, 16, lease_ns, peak, NULL, 0), CR_OK,
                 "open");
    _Atomic int held_now = 0, most_held = 0, errors = 0;
    holders h = {gauge, key, &held_now, &most_held, &errors};
    pthread_t threads[HOLDERS];
    for (int t = 0; t < HOLDERS; t++)
        pthread_create(&threads[t], NULL, hold_thread, &h);
    for (int t = 0; t < HOLDERS; t++)
        pthread_join(threads[t], NULL);
    printf("threads%s%s%s: %d x %d cycles, most held at once %d (limit %d)\n",
           key ? " (keyed)" : "", lease_ns ? " (lease)" : "", peak ? " (peak)" : "", HOLDERS,
           CYCLES, atomic_load(&most_held), LIMIT);
    CHECK(atomic_load(&most_held) <= LIMIT, "never more than the limit");
    CHECK(atomic_load(&most_held) >= 2, "holders did overlap");
    CHECK_EQ_I64(atomic_load(&errors), 0, "every acquire valid, every release landed");
    int64_t in_flight;
    cr_gauge_in_flight(gauge, key, key ? strlen(key) : 0, &in_flight);
    CHECK_EQ_I64(in_flight, 0, "nothing left held");
    cr_gauge_stats stats;
    cr_gauge_stats_read(gauge, &stats);
    CHECK_EQ_I64((int64_t)stats.acquired, HOLDERS * CYCLES, "every acquire counted");
    CHECK_EQ_I64((int64_t)stats.released, HOLDERS * CYCLES * 3 / 2, "every unit released");
    CHECK_EQ_I64((int64_t)stats.in_flight, 0, "stats: nothing held");
    CHECK(stats.peak_tracked == peak, "the peak tracked as asked");
    if (peak)
        CHECK(stats.peak >= 2 && stats.peak <= LIMIT, "peak %" PRIu64 " within 2..limit",
              stats.peak);
    else
        CHECK_EQ_I64((int64_t)stats.peak, 0, "no peak");
    cr_gauge_free(gauge);
}

static void *shared_memory(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        abort();
    return p;
}

static void test_processes(void)
{
    const char *path = region_path("processes");
    _Atomic int *counters = shared_memory(4096); /* held now, most held, errors */
    pid_t pids[HOLDERS];
    for (int p = 0; p < HOLDERS; p++) {
        if ((pids[p] = fork()) == 0) {
            cr_gauge *gauge;
            if (cr_gauge_open(&gauge, LIMIT, false, 0, 0, false, path, 0600) != CR_OK)
                _exit(3);
            holders h = {gauge, NULL, &counters[0], &counters[1], &counters[2]};
            hold_cycles(&h, CYCLES);
            cr_gauge_free(gauge);
            _exit(0);
        }
    }
    int clean = 0;
    for (int p = 0; p < HOLDERS; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        clean += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    printf("processes: %d x %d cycles, most held at once %d (limit %d)\n", HOLDERS, CYCLES,
           atomic_load(&counters[1]), LIMIT);
    CHECK_EQ_I64(clean, HOLDERS, "every holder ran");
    CHECK(atomic_load(&counters[1]) <= LIMIT, "never more than the limit");
    CHECK_EQ_I64(atomic_load(&counters[2]), 0, "every release landed");
    cr_gauge *gauge;
    CHECK_EQ_I64(cr_gauge_open(&gauge, LIMIT, false, 0, 0, false, path, 0600), CR_OK, "reopen");
    int64_t in_flight;
    cr_gauge_in_flight(gauge, NULL, 0, &in_flight);
    CHECK_EQ_I64(in_flight, 0, "nothing left held");
    cr_gauge *other;
    CHECK_EQ_I64(cr_gauge_open(&other, LIMIT + 1, false, 0, 0, false, path, 0600),
                 CR_E_SHARED_LIMIT, "another limit");
    CHECK_EQ_I64(cr_gauge_open(&other, LIMIT, false, 0, 1000, false, path, 0600), CR_E_SHARED_LIMIT,
                 "another lease");
    cr_gauge_free(gauge);
    munmap(counters, 4096);
}

/* ------------------------------------------------------------------------ */
/* SIGKILL at random instants.                                               */

#define STORM_WORKERS 4
#define STOP 1
#define PARK 2

/* Acquires and releases until told to park, then holds one unit until told
 * to stop; exits 0 if its parked holding was still its own to give back. */
static void storm_worker(const char *path, const char *key, _Atomic int *control,
                         _Atomic int *parked)
{
    cr_gauge *gauge;
    if (cr_gauge_open(&gauge, LIMIT, key != NULL, 8, 0, false, path, 0600) != CR_OK)
        _exit(3);
    size_t key_len = key ? strlen(key) : 0;
    bool acquired;
    cr_holding holding;
    while (atomic_load(control) == 0) {
        cr_gauge_wait(gauge, key, key_len, 1, 1000000, &acquired, &holding);
        if (acquired) {
            sched_yield();
            cr_gauge_release(gauge, &holding);
        }
    }
    cr_gauge_wait(gauge, key, key_len, 1, CR_NEVER, &acquired, &holding);
    atomic_fetch_add(parked, 1);
    while (atomic_load(control) != STOP)
        cr_sleep_ns(100000);
    _exit(acquired && cr_gauge_release(gauge, &holding) == 1 ? 0 : 4);
}

static void test_sigkill(const char *name, const char *key)
{
    const char *path = region_path(name);
    size_t key_len = key ? strlen(key) : 0;
    _Atomic int *control = shared_memory(4096);
    _Atomic int *parked = control + 16;
    pid_t workers[STORM_WORKERS];
    for (int w = 0; w < STORM_WORKERS; w++)
        if ((workers[w] = fork()) == 0)
            storm_worker(path, key, control, parked);
    unsigned seed = 2024;
    int kills = 0;
    while (kills < KILLS) {
        seed = seed * 1103515245u + 12345u;
        struct timespec pause = {0, (long)(seed >> 8) % 400000};
        nanosleep(&pause, NULL);
        int w = (int)((seed >> 4) % STORM_WORKERS);
        kill(workers[w], SIGKILL);
        waitpid(workers[w], NULL, 0);
        kills++;
        if ((workers[w] = fork()) == 0)
            storm_worker(path, key, control, parked);
    }
    /* Kill two more, then let the living two park a unit each. */
    for (int w = 0; w < 2; w++) {
        kill(workers[w], SIGKILL);
        waitpid(workers[w], NULL, 0);
    }
    atomic_store(control, PARK);
    while (atomic_load(parked) < STORM_WORKERS - 2)
        cr_sleep_ns(100000);

    cr_gauge *gauge;
    CHECK_EQ_I64(cr_gauge_open(&gauge, LIMIT, key != NULL, 8, 0, false, path, 0600), CR_OK, "open");
    int64_t in_flight = -1;
    cr_gauge_in_flight(gauge, key, key_len, &in_flight);
    printf("sigkill %s: %d kills, in flight after: %lld (living holders: %d)\n", name, kills,
           (long long)in_flight, STORM_WORKERS - 2);
    CHECK_EQ_I64(in_flight, STORM_WORKERS - 2, "in flight: the living holders' units");
    /* the rest of the limit is free, and no more */
    cr_holding mine[LIMIT];
    int got = 0;
    bool acquired = true;
    while (got < LIMIT && acquired) {
        cr_gauge_acquire(gauge, key, key_len, 1, &acquired, &mine[got]);
        got += acquired;
    }
    CHECK_EQ_I64(got, LIMIT - (STORM_WORKERS - 2), "the rest of the limit admits");
    /* a holder dies while the limit is full: the next acquire has its unit */
    kill(workers[2], SIGKILL);
    waitpid(workers[2], NULL, 0);
    cr_gauge_acquire(gauge, key, key_len, 1, &acquired, &mine[got]);
    CHECK(acquired, "a full limit admits again once a holder is dead");
    got += acquired;
    atomic_store(control, STOP);
    int status;
    waitpid(workers[3], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the living holder's unit was its own");
    for (int i = 0; i < got; i++)
        CHECK_EQ_I64(cr_gauge_release(gauge, &mine[i]), 1, "release %d", i);
    cr_gauge_in_flight(gauge, key, key_len, &in_flight);
    CHECK_EQ_I64(in_flight, 0, "nothing held at the end");
    cr_gauge_free(gauge);
    munmap(control, 4096);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/cellrate-gauge-%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        snprintf(dir, sizeof dir, "/tmp/cellrate-gauge-%d", (int)getpid());
        if (mkdir(dir, 0755) != 0)
            return 2;
    }
    test_bad_input();
    test_counts();
    test_keys();
    test_lease();
    test_stats();
    test_threads(NULL, 0, false);
    test_threads("route", 0, false);
    test_threads(NULL, INT64_C(60000000000), false);
    test_threads(NULL, 0, true);
    test_threads("route", 0, true);
    if (!UNDER_TSAN) {
        test_processes();
        test_sigkill("sigkill", NULL);
        test_sigkill("sigkill-keyed", "client");
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        check_failed++;
    return check_summary("test_gauge");
}
