/*
 * Concurrency: threads racing on the same keys must never admit more than
 * the semantics allow, and must not lose admissions either.
 *   - one key, one frozen instant: exactly `burst` admissions in total;
 *   - many keys, one frozen instant: exactly `burst` per key;
 *   - the real clock (CR_CLOCK) for ~0.3 s: at most burst + elapsed / T + 1,
 *     and at least what the decisions' books say (books.h);
 *   - a limit changed back and forth live while threads decide: at most the
 *     admissions of a greedy replay, piece by piece (each limit while it holds,
 *     the units used carried across each change), and never a mixture;
 *   - take(max_cost) racing on one key at one instant: the units taken, counted,
 *     are exactly the burst, never more;
 *   - the counters (cr_*_stats) agree with the verdicts the threads counted,
 *     also with more threads than there are counting slots (the overflow).
 */
#include "books.h"
#include "cellrate.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 4
#define SECOND INT64_C(1000000000)

typedef struct {
    cr_limiter *limiter; /* one of limiter / keyed */
    cr_keyed *keyed;
    pthread_barrier_t *start;
    int keys;          /* keys to spread over (keyed only) */
    int attempts;      /* per key */
    int64_t now;       /* a frozen instant, or CR_CLOCK */
    int64_t run_until; /* with CR_CLOCK: stop once the clock passes this */
    books *books;      /* with CR_CLOCK: this thread's, one of the run's */
    _Atomic int64_t *admitted_per_key;
    int64_t admitted; /* this thread's admissions */
    int errors;
} worker;

static cr_status decide(worker *w, int key_index, int64_t now, bool commit, cr_decision *d)
{
    if (w->limiter)
        return cr_limiter_check(w->limiter, now, 1, commit, d);
    char key[32];
    int len = snprintf(key, sizeof key, "key-%d", key_index);
    return cr_keyed_check(w->keyed, key, (size_t)len, now, 1, commit, d);
}

static void *run_frozen(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int round = 0; round < w->attempts; round++) {
        for (int k = 0; k < w->keys; k++) {
            cr_decision d;
            /* A peek between checks: it must never count or change anything. */
            if (decide(w, k, w->now, false, &d) != CR_OK)
                w->errors++;
            if (decide(w, k, w->now, true, &d) != CR_OK) {
                w->errors++;
                continue;
            }
            if (d.allowed) {
                w->admitted++;
                atomic_fetch_add(&w->admitted_per_key[k], 1);
            }
        }
    }
    return NULL;
}

static void *run_clock(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (;;) {
        int64_t before = cr_clock_ns();
        if (before >= w->run_until)
            break;
        cr_decision d;
        if (decide(w, 0, CR_CLOCK, true, &d) != CR_OK) {
            w->errors++;
            continue;
        }
        books_record(w->books, before, cr_clock_ns(), d.allowed);
        w->admitted += d.allowed;
    }
    return NULL;
}

/* Runs THREADS workers like `model` and returns the total admitted. */
static int64_t run_workers(worker model, void *(*body)(void *), int *errors)
{
    pthread_t threads[THREADS];
    worker workers[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = model;
        workers[i].start = &start;
        workers[i].books = model.books ? &model.books[i] : NULL;
        if (pthread_create(&threads[i], NULL, body, &workers[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    int64_t admitted = 0;
    *errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        admitted += workers[i].admitted;
        *errors += workers[i].errors;
    }
    pthread_barrier_destroy(&start);
    return admitted;
}

static void test_one_key_frozen(void)
{
    const int64_t burst = 500;
    cr_limit limit = limit_of(SECOND, burst);
    _Atomic int64_t counter = 0;
    int errors;

    for (int repeat = 0; repeat < 5; repeat++) {
        worker w = {0};
        w.keys = 1;
        w.attempts = 300; /* 4 x 300 = 1200 tries for 500 units */
        w.now = 7 * SECOND;
        w.admitted_per_key = &counter;
        if (!CHECK(cr_limiter_new(&w.limiter, &limit) == CR_OK, "cr_limiter_new"))
            return;
        int64_t admitted = run_workers(w, run_frozen, &errors);
        CHECK_EQ_I64(errors, 0, "cr_limiter_check statuses");
        CHECK_EQ_I64(admitted, burst, "cr_limiter: %d threads on one key at one instant", THREADS);
        cr_stats stats;
        cr_limiter_stats(w.limiter, &stats);
        CHECK_EQ_I64((int64_t)stats.admitted, admitted, "cr_limiter_stats: admitted");
        CHECK_EQ_I64((int64_t)stats.refused, THREADS * 300 - admitted, "cr_limiter_stats: refused");
        cr_limiter_free(w.limiter);

        w.limiter = NULL;
        if (!CHECK(cr_keyed_new(&w.keyed, &limit, 16) == CR_OK, "cr_keyed_new"))
            return;
        admitted = run_workers(w, run_frozen, &errors);
        CHECK_EQ_I64(errors, 0, "cr_keyed_check statuses");
        CHECK_EQ_I64(admitted, burst, "cr_keyed: %d threads on one key at one instant", THREADS);
        CHECK_EQ_I64(cr_keyed_len(w.keyed), 1, "the key holds one slot, never two");
        cr_keyed_stats(w.keyed, &stats);
        CHECK_EQ_I64((int64_t)stats.units_admitted, admitted, "cr_keyed_stats: units admitted");
        CHECK_EQ_I64((int64_t)stats.units_refused, THREADS * 300 - admitted,
                     "cr_keyed_stats: units refused");
        cr_keyed_free(w.keyed);
    }
}

static void test_many_keys_frozen(void)
{
    enum { KEYS = 300 };
    const int64_t burst = 5;
    cr_limit limit = limit_of(SECOND, burst);
    _Atomic int64_t *per_key = calloc(KEYS, sizeof *per_key);
    if (!per_key)
        exit(2);
    int errors;
    for (int repeat = 0; repeat < 3; repeat++) {
        for (int k = 0; k < KEYS; k++)
            atomic_store(&per_key[k], 0);
        worker w = {0};
        w.keys = KEYS;
        w.attempts = 4; /* 16 tries per key for 5 units */
        w.now = 3 * SECOND;
        w.admitted_per_key = per_key;
        if (!CHECK(cr_keyed_new(&w.keyed, &limit, 4 * KEYS) == CR_OK, "cr_keyed_new"))
            break;
        int64_t admitted = run_workers(w, run_frozen, &errors);
        CHECK_EQ_I64(errors, 0, "cr_keyed_check statuses");
        CHECK_EQ_I64(cr_keyed_evictions(w.keyed), 0, "a roomy table evicts nothing");
        CHECK_EQ_I64(cr_keyed_len(w.keyed), KEYS, "one slot per key");
        int wrong = 0;
        for (int k = 0; k < KEYS; k++)
            wrong += atomic_load(&per_key[k]) != burst;
        CHECK_EQ_I64(wrong, 0, "keys not admitted exactly burst times");
        CHECK_EQ_I64(admitted, burst * KEYS, "%d threads on %d keys at one instant", THREADS, KEYS);
        cr_keyed_free(w.keyed);
    }
    free(per_key);
}

/* T = 1 ms, burst 20, hammered for 0.3 s from 4 threads on the real clock. */
static void test_real_clock(void)
{
    const int64_t emission_ns = 1000 * 1000, burst = 20, run_ns = 300 * 1000 * 1000;
    cr_limit limit = limit_of(emission_ns, burst);
    for (int store = 0; store < 2; store++) {
        worker w = {0};
        const char *name = store ? "cr_keyed" : "cr_limiter";
        if (store ? cr_keyed_new(&w.keyed, &limit, 16) != CR_OK
                  : cr_limiter_new(&w.limiter, &limit) != CR_OK) {
            CHECK(false, "%s: cannot make the store", name);
            continue;
        }
        int errors;
        int64_t start = cr_clock_ns(), idle = 0;
        books run[THREADS];
        for (int i = 0; i < THREADS; i++)
            books_open(&run[i], start, emission_ns, limit.tolerance_ns);
        w.run_until = start + run_ns;
        w.books = run;
        int64_t admitted = run_workers(w, run_clock, &errors);
        int64_t elapsed = cr_clock_ns() - start;
        int64_t most = burst + elapsed / emission_ns + 1;
        CHECK_EQ_I64(errors, 0, "%s statuses", name);
        CHECK(admitted <= most, "%s: admitted %" PRId64 " in %.3f s, at most %" PRId64, name,
              admitted, (double)elapsed / 1e9, most);
        /* The floor counts what was decided, whatever the schedule. */
        int64_t fewest = books_fewest(run, THREADS, &idle);
        CHECK(admitted >= fewest,
              "%s: admitted %" PRId64 " in %.3f s, expected >= %" PRId64 " (%.3f s maybe idle)",
              name, admitted, (double)elapsed / 1e9, fewest, (double)idle / 1e9);
        printf("real clock, %s: %" PRId64 " admitted in %.3f s (bounds %" PRId64 " to %" PRId64
               ")\n",
               name, admitted, (double)elapsed / 1e9, fewest, most);
        cr_limiter_free(w.limiter);
        cr_keyed_free(w.keyed);
    }
}

/* A live change racing with decisions. The changer publishes the instant
 * r * STEP, lets the deciders admit at it under the old limit, and changes to
 * limit r % 2 at that instant meanwhile; deciders decide at the instant they
 * last read. A decision with a stale instant is only stricter, and units
 * carry one for one, so the admissions are at most those of a replay that,
 * at each instant, admits all it can under the old limit, carries the state
 * to the new one, and admits all it can under that. */
enum { LIVE_ROUNDS = 300, LIVE_ATTEMPTS_PER_ROUND = 64 };
#define LIVE_STEP_NS (50 * INT64_C(1000000))

enum { LIVE_KEYS = 3 };

typedef struct {
    cr_limiter *limiter; /* one of limiter / keyed */
    cr_keyed *keyed;
    _Atomic int64_t admitted_per_key[LIVE_KEYS];
    _Atomic int64_t now;
    _Atomic int64_t attempts;
    _Atomic bool done;
} live_shared;

typedef struct {
    live_shared *shared;
    pthread_barrier_t *start;
    int errors;
} live_worker;

static void *run_live_decider(void *arg)
{
    live_worker *w = arg;
    pthread_barrier_wait(w->start);
    live_shared *shared = w->shared;
    for (int64_t i = 0; !atomic_load(&shared->done); i++) {
        cr_decision d;
        int64_t now = atomic_load(&shared->now);
        const int k = shared->keyed ? (int)(i % LIVE_KEYS) : 0;
        char key[16];
        const int len = snprintf(key, sizeof key, "live-%d", k);
        /* a Limiter decides by check and by allow() in turn: allow() has an
         * entry of its own, which meets retired cells too */
        cr_status status;
        if (shared->keyed)
            status = cr_keyed_check(shared->keyed, key, (size_t)len, now, 1, true, &d);
        else if (i % 2)
            status = cr_limiter_allow(shared->limiter, now, 1, &d.allowed);
        else
            status = cr_limiter_check(shared->limiter, now, 1, true, &d);
        if (status != CR_OK)
            w->errors++;
        else if (d.allowed)
            atomic_fetch_add(&shared->admitted_per_key[k], 1);
        atomic_fetch_add(&shared->attempts, 1);
    }
    return NULL;
}

/* `path`: the deciders and the changer each open the shared region there,
 * so the deciders meet each change through the region. */
static void test_live_change(bool keyed, const char *path)
{
    const cr_limit limits[2] = {limit_of(INT64_C(1000000), 50), limit_of(INT64_C(3000000), 8)};
    live_shared shared = {0};
    if (path)
        unlink(path);
    CHECK((keyed ? cr_keyed_open(&shared.keyed, &limits[0], 64, path, 0600, CR_CHANGE_APPLY)
                 : cr_limiter_open(&shared.limiter, &limits[0], path, 0600, CR_CHANGE_APPLY)) ==
              CR_OK,
          "cr_limiter_open / cr_keyed_open");
    cr_limiter *changing_limiter = shared.limiter;
    cr_keyed *changing_keyed = shared.keyed;
    if (path)
        CHECK((keyed ? cr_keyed_open(&changing_keyed, &limits[0], 64, path, 0600, CR_CHANGE_APPLY)
                     : cr_limiter_open(&changing_limiter, &limits[0], path, 0600,
                                       CR_CHANGE_APPLY)) == CR_OK,
              "the changer's store");
    for (int k = 0; k < LIVE_KEYS; k++)
        atomic_init(&shared.admitted_per_key[k], 0);
    atomic_init(&shared.now, 0);
    atomic_init(&shared.attempts, 0);
    atomic_init(&shared.done, false);
    pthread_t threads[THREADS];
    live_worker workers[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (live_worker){&shared, &start, 0};
        if (pthread_create(&threads[i], NULL, run_live_decider, &workers[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    pthread_barrier_wait(&start);
    int64_t bound = 0, tat = 0, changes = 0;
    for (int round = 0; round < LIVE_ROUNDS; round++) {
        const cr_limit *from = &limits[(round + 1) % 2], *to = &limits[round % 2];
        const int64_t now = round * LIVE_STEP_NS;
        /* The instant first: the deciders admit under the old limit while the
         * change is made, at the same instant. */
        atomic_store(&shared.now, now);
        cr_decision d;
        if (round > 0) {
            int64_t seen = atomic_load(&shared.attempts);
            while (atomic_load(&shared.attempts) - seen < THREADS)
                sched_yield();
            CHECK((keyed ? cr_keyed_reconfigure(changing_keyed, to, now)
                         : cr_limiter_reconfigure(changing_limiter, to, now)) == CR_OK,
                  "reconfigure");
            /* the greedy replay: all that fits under the old limit, carried */
            while ((tat = cr_decide(from, tat, now, 1, &d), d.allowed))
                bound++;
            tat = cr_carry(from, to, tat, now);
            changes++;
        }
        /* then all that fits under the new one */
        while ((tat = cr_decide(to, tat, now, 1, &d), d.allowed))
            bound++;
        int64_t seen = atomic_load(&shared.attempts);
        while (atomic_load(&shared.attempts) - seen < LIVE_ATTEMPTS_PER_ROUND)
            sched_yield();
    }
    atomic_store(&shared.done, true);
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        errors += workers[i].errors;
    }
    pthread_barrier_destroy(&start);
    CHECK_EQ_I64(errors, 0, "live change: errors");
    /* every key sees the same changes at the same instants: one bound for each */
    for (int k = 0; k < (keyed ? LIVE_KEYS : 1); k++) {
        const int64_t admitted = atomic_load(&shared.admitted_per_key[k]);
        CHECK(admitted <= bound, "live change: key %d admitted %" PRId64 " > bound %" PRId64, k,
              admitted, bound);
        CHECK(admitted > 0, "live change: key %d: nothing admitted", k);
        printf("live change (%s%s): %" PRId64 " changes, key %d admitted %" PRId64
               " (bound %" PRId64 ")\n",
               keyed ? "keyed" : "limiter", path ? ", shared region" : "", changes, k, admitted,
               bound);
    }
    if (path) {
        cr_limiter_free(changing_limiter);
        cr_keyed_free(changing_keyed);
        unlink(path);
    }
    cr_limiter_free(shared.limiter);
    cr_keyed_free(shared.keyed);
}

typedef struct {
    cr_limiter *limiter;
    cr_keyed *keyed;
    pthread_barrier_t *start;
    int64_t taken;
    int errors;
} taker;

static void *run_taker(void *arg)
{
    taker *t = arg;
    pthread_barrier_wait(t->start);
    for (int round = 0; round < 400; round++) {
        int64_t taken = 0;
        const int64_t max_cost = 1 + round % 7;
        cr_status status = t->limiter ? cr_limiter_take(t->limiter, 3 * SECOND, max_cost, &taken)
                                      : cr_keyed_take(t->keyed, "k", 1, 3 * SECOND, CR_PLAN_DEFAULT,
                                                      max_cost, &taken);
        if (status != CR_OK || taken < 0 || taken > max_cost)
            t->errors++;
        t->taken += taken;
    }
    return NULL;
}

static void test_take_threads(void)
{
    const int64_t burst = 1000; /* 4 x 400 takes of up to 7: far more asked than fits */
    cr_limit limit = limit_of(SECOND, burst);
    for (int keyed = 0; keyed < 2; keyed++) {
        pthread_t threads[THREADS];
        taker takers[THREADS];
        pthread_barrier_t start;
        cr_limiter *limiter = NULL;
        cr_keyed *table = NULL;
        if (!CHECK((keyed ? cr_keyed_new(&table, &limit, 16) : cr_limiter_new(&limiter, &limit)) ==
                       CR_OK,
                   "a store"))
            return;
        pthread_barrier_init(&start, NULL, THREADS);
        for (int i = 0; i < THREADS; i++) {
            takers[i] = (taker){limiter, table, &start, 0, 0};
            if (pthread_create(&threads[i], NULL, run_taker, &takers[i]) != 0)
                exit(2);
        }
        int64_t taken = 0;
        int errors = 0;
        for (int i = 0; i < THREADS; i++) {
            pthread_join(threads[i], NULL);
            taken += takers[i].taken;
            errors += takers[i].errors;
        }
        pthread_barrier_destroy(&start);
        CHECK_EQ_I64(errors, 0, "take statuses and counts");
        CHECK_EQ_I64(taken, burst, "%s: %d threads taking at one instant take the burst exactly",
                     keyed ? "cr_keyed_take" : "cr_limiter_take", THREADS);
        cr_limiter_free(limiter);
        cr_keyed_free(table);
    }
}

#define MANY_THREADS 24 /* more than the counting slots (CR_COUNTER_SLOTS 16) */

typedef struct {
    cr_limiter *limiter;
    pthread_barrier_t *start;
    int64_t admitted, refused;
} counter_worker;

static void *run_counted(void *arg)
{
    counter_worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < 2000; i++) {
        bool allowed;
        if (cr_limiter_allow(w->limiter, 9 * SECOND, 1 + i % 3, &allowed) == CR_OK)
            *(allowed ? &w->admitted : &w->refused) += 1 + i % 3;
    }
    return NULL;
}

static void test_counters_many_threads(void)
{
    cr_limit limit = limit_of(SECOND, 20000);
    cr_limiter *limiter;
    if (!CHECK(cr_limiter_new(&limiter, &limit) == CR_OK, "cr_limiter_new"))
        return;
    for (int round = 0; round < 2; round++) { /* the slots of ended threads are reused */
        pthread_t threads[MANY_THREADS];
        counter_worker workers[MANY_THREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, MANY_THREADS);
        for (int i = 0; i < MANY_THREADS; i++) {
            workers[i] = (counter_worker){limiter, &start, 0, 0};
            if (pthread_create(&threads[i], NULL, run_counted, &workers[i]) != 0)
                exit(2);
        }
        int64_t admitted = 0, refused = 0;
        for (int i = 0; i < MANY_THREADS; i++) {
            pthread_join(threads[i], NULL);
            admitted += workers[i].admitted;
            refused += workers[i].refused;
        }
        pthread_barrier_destroy(&start);
        cr_stats stats;
        cr_limiter_stats(limiter, &stats);
        CHECK_EQ_I64((int64_t)stats.units_admitted, admitted, "%d threads: units admitted",
                     MANY_THREADS);
        CHECK_EQ_I64((int64_t)stats.units_refused, refused, "%d threads: units refused",
                     MANY_THREADS);
        CHECK_EQ_I64((int64_t)(stats.admitted + stats.refused), MANY_THREADS * 2000,
                     "%d threads: every verdict counted once", MANY_THREADS);
        CHECK(cr_limiter_reset_stats(limiter) == CR_OK, "cr_limiter_reset_stats");
        cr_limiter_reset(limiter);
    }
    cr_limiter_free(limiter);
}

int main(void)
{
    test_counters_many_threads();
    test_take_threads();
    test_one_key_frozen();
    test_many_keys_frozen();
    test_real_clock();
    test_live_change(false, NULL);
    test_live_change(true, NULL);
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/cellrate-threads-%d", (int)getpid());
    test_live_change(false, path);
    test_live_change(true, path);
    return check_summary("test_threads");
}
