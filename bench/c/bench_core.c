/*
 * C-level scenarios of `make bench`: the physical floors and cellrate's
 * Limiter and KeyedLimiter (in-process, and shared between processes through
 * a file under /dev/shm), in one binary, so that ratios compare code that ran
 * on the same machine in the same run. bench/rust/src/main.rs runs the
 * crates.io peers through the same scenarios (same limits, same key sets,
 * same random draws, same timing method).
 *
 * Usage:
 *   bench_core run [--reps N] [--single-ops N] [--keyed-ops N] [--keys N]
 *   bench_core limiter [--reps N] [--single-ops N]   (the floors and the Limiter alone)
 *   bench_core keyed [--reps N] [--keyed-ops N] [--keys N]   (the 1M-key tables and their floors)
 *   bench_core concurrency [--reps N] [--single-ops N]   (acquire + release and their floors)
 *   bench_core catalogue [--reps N] [--single-ops N]   (the algorithms' allow paths alone)
 *   bench_core mem [--keys N]
 *   bench_core counters [--reps N] [--single-ops N] [--keyed-ops N] [--keys N]
 *                  (the allow paths with counters and without: needs the uncounted
 *                   core linked in, CR_BENCH_UNCOUNTED, as bench/run.sh builds it)
 *
 * Each result is one JSON object per line on stdout; the value of a scenario
 * is the median of `--reps` timed runs, after one untimed warm-up run.
 */
#include "cellrate.h"
/* The keyed floor is made of the core's own primitives (its clock read, its
 * keyed hash and bucket choice, its 16-byte compare-and-swap), so that it
 * differs from a keyed decision only by what cellrate adds around them. */
#include "fastclock.h"
#include "pair.h"
#include "place.h"
#include "seed.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* Allow path of one key: T = 10 ns and a burst of 1e9 (tau = 10 s), so no call
 * of a run can be turned away. Deny path: one unit per hour, drained before
 * timing. Keyed allow path: one unit per hour and a burst of 1e6, so every
 * call is admitted and every key stays tracked (its TAT stays hours ahead).
 * The allow and deny paths, and the keyed allow path on integer keys, run
 * with limits made with clock "monotonic" (the ordered read) and with the
 * default, "fast" (CR_CLOCK reads cr_fast_clock_ns). */
#define ALLOW_RATE_PER_S 1e8
#define ALLOW_BURST 1000000000
#define KEYED_BURST 1000000
#define SEED 42
#define MAX_THREADS 2
#define KEY_MAX 24

typedef struct {
    int reps;
    size_t single_ops;
    size_t keyed_ops;
    size_t keys;
} config;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keeps a value alive without a memory access the compiler could hoist. */
#define KEEP(value) __asm__ volatile("" : : "r"(value) : "memory")

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* `ops` indices drawn uniformly at random in [lo, lo + span). */
static uint32_t *make_draws(size_t ops, size_t lo, size_t span, uint64_t seed)
{
    uint32_t *draws = malloc(ops * sizeof *draws);
    if (!draws) {
        perror("malloc");
        exit(1);
    }
    uint64_t state = seed;
    for (size_t i = 0; i < ops; i++)
        draws[i] = (uint32_t)(lo + splitmix64(&state) % span);
    return draws;
}

/* Integer-like keys: distinct 64-bit values, not consecutive. */
static uint64_t int_key(size_t i) { return ((uint64_t)i * 0x9E3779B97F4A7C15u) ^ 0x55555555u; }

/* Short string keys "user:<n>", stored KEY_MAX bytes apart. */
typedef struct {
    char *text;
    uint8_t *len;
} str_keys;

static str_keys make_str_keys(size_t count)
{
    str_keys keys = {malloc(count * KEY_MAX), malloc(count)};
    if (!keys.text || !keys.len) {
        perror("malloc");
        exit(1);
    }
    for (size_t i = 0; i < count; i++)
        keys.len[i] = (uint8_t)snprintf(keys.text + i * KEY_MAX, KEY_MAX, "user:%zu", i);
    return keys;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof *values, cmp_double);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

/* One JSON line. `expect` is what every call of every run had to return
 * ("allow", "deny", or "" when not applicable); `met` says whether it did.
 * `processes` is how many processes ran the calls, `threads` how many
 * threads each. `group` names the cases run in the same rounds: the runs of
 * two cases of one group are paired, run k of each from the same round. */
static void emit(const char *id, const char *group, int processes, int threads, size_t ops,
                 double *runs, int reps, const char *expect, bool met)
{
    char list[1024] = "";
    size_t used = 0;
    for (int r = 0; r < reps && used < sizeof list - 32; r++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%.3f", r ? ", " : "", runs[r]);
    double med = median(runs, reps);
    printf("{\"id\": \"%s\", \"lang\": \"c\", \"group\": \"%s\", \"ns_per_op\": %.3f, "
           "\"processes\": %d, \"threads\": %d, \"ops_per_run\": %zu, \"runs_ns_per_op\": [%s], "
           "\"expect\": \"%s\", \"expect_met\": %s}\n",
           id, group, med, processes, threads, ops, list, expect, met ? "true" : "false");
    fflush(stdout);
}

static void check_status(cr_status status, const char *what)
{
    if (status != CR_OK) {
        fprintf(stderr, "bench_core: %s: %s\n", what, cr_strerror(status));
        exit(1);
    }
}

/* `args` with the clock CR_CLOCK reads: "fast", or NULL for the default. */
static cr_limit make_limit(cr_limit_args args, const char *clock)
{
    cr_limit limit;
    args.clock = clock;
    args.clock_len = clock ? strlen(clock) : 0;
    check_status(cr_limit_init(&limit, &args), "cr_limit_init");
    return limit;
}

static cr_limit_args allow_args(void)
{
    return (cr_limit_args){.rate = ALLOW_RATE_PER_S, .burst = ALLOW_BURST, .has_burst = true};
}

static cr_limit allow_limit(const char *clock) { return make_limit(allow_args(), clock); }

static cr_limit deny_limit(const char *clock)
{
    return make_limit(
        (cr_limit_args){
            .rate = 1, .period_s = 3600, .has_period = true, .burst = 1, .has_burst = true},
        clock);
}

/* The keyed tables' limit: with `scale` 1, 1 an hour, burst KEYED_BURST. */
static cr_limit_args keyed_args(int64_t scale)
{
    return (cr_limit_args){.rate = (double)scale,
                           .period_s = 3600,
                           .has_period = true,
                           .burst = scale * KEYED_BURST,
                           .has_burst = true};
}

static cr_limit keyed_limit(const char *clock) { return make_limit(keyed_args(1), clock); }

/* Priority classes (a class's decision against a plain one): "bulk"
 * keeps a fifth of the tolerance for "critical"; the rows decide as "bulk",
 * the class that checks its reserve. */
static const cr_priority_arg bench_classes[] = {{"bulk", 4, 0.2}, {"critical", 8, 0.0}};

static cr_limit with_classes(cr_limit_args args, const char *clock)
{
    args.priorities = bench_classes;
    args.npriorities = sizeof bench_classes / sizeof bench_classes[0];
    args.has_priorities = true;
    return make_limit(args, clock);
}

/* The index of class "bulk" in `limit`. */
static int32_t bulk_class(const cr_limit *limit)
{
    int32_t index = -1;
    check_status(cr_priority_find(limit, "bulk", 4, &index), "cr_priority_find");
    return index;
}

/* Plans (a keyed decision with plans against a plain one): the keyed
 * limit as "default" and "pro", twice its rate and burst. */
static cr_plan_table keyed_plans(const char *clock)
{
    cr_limit base = keyed_limit(clock), pro = make_limit(keyed_args(2), clock);
    cr_plan_arg arg = {"pro", 3, &pro};
    cr_plan_table table;
    check_status(cr_plans_set(&table, &base, &arg, 1), "cr_plans_set");
    return table;
}

/* The plan of key k: with `stride` n every n-th key is on plan 1 ("pro"),
 * (1: every key, 2: every second), with 0 every key on "default". */
static int32_t key_plan(size_t k, int32_t stride)
{
    return stride && k % (size_t)stride == (size_t)stride - 1 ? 1 : CR_PLAN_DEFAULT;
}

/* ------------------------------------------------------------------------ */
/* Cases: a scenario body run `ops` times on each of `threads` threads (or,
 * with `processes`, in each of `threads` forked processes).                 */

/* A scenario body returns whether call `i` was admitted (floors: true). */
typedef bool (*scenario_fn)(void *ctx, size_t i);

typedef struct {
    const char *id;
    scenario_fn body;
    void *ctx[MAX_THREADS]; /* one per thread */
    int threads;
    bool processes;     /* the workers are forked processes, not threads */
    size_t ops;         /* per thread */
    const char *expect; /* "allow", "deny" or "" */
    double runs[64];    /* wall ns per call (all threads' calls) */
    bool met;
} bench_case;

typedef struct {
    const bench_case *c;
    void *ctx;
    _Atomic int *ready; /* workers that have started */
    int cpu;
    size_t matched;
    int64_t begin, end;
} worker;

/* Calls `first` to `end` - 1 of a run. */
static size_t run_body(scenario_fn body, void *ctx, size_t first, size_t end, bool want)
{
    size_t matched = 0;
    for (size_t i = first; i < end; i++)
        matched += body(ctx, i) == want;
    return matched;
}

static bool wants_allow(const bench_case *c) { return strcmp(c->expect, "deny") != 0; }

/* Thread t runs on CPU t (modulo the CPUs this process may use): left to
 * itself, the scheduler of the machine this was written on often kept both
 * workers on one CPU for a whole run, which measures the scheduler rather
 * than the code. Both harnesses pin alike; forked workers are pinned the
 * same way. */
static void pin_to_cpu(int index)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2)
        return;
    int target = index % CPU_COUNT(&allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (target-- == 0) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

/* Workers start together without a sleeping barrier: each spins (yielding)
 * until all have started, so that none waits for a sleeping CPU to wake.
 * Forked workers spin on a counter in memory shared with the parent. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    pin_to_cpu(w->cpu);
    atomic_fetch_add(w->ready, 1);
    while (atomic_load(w->ready) < w->c->threads)
        sched_yield();
    w->begin = wall_ns();
    w->matched = run_body(w->c->body, w->ctx, 0, w->c->ops, wants_allow(w->c));
    w->end = wall_ns();
    return NULL;
}

/* The workers of one run and their start counter; in memory shared with
 * the children when the workers are processes. */
typedef struct {
    _Atomic int ready;
    worker workers[MAX_THREADS];
} crew;

static void start_worker(const bench_case *c, crew *team, int t, pthread_t *tid, pid_t *pid)
{
    if (!c->processes) {
        if (pthread_create(tid, NULL, worker_main, &team->workers[t]) != 0) {
            perror("pthread_create");
            exit(1);
        }
        return;
    }
    *pid = fork();
    if (*pid < 0) {
        perror("fork");
        exit(1);
    }
    if (*pid == 0) {
        worker_main(&team->workers[t]);
        _exit(0);
    }
}

static void join_worker(const bench_case *c, pthread_t tid, pid_t pid)
{
    if (!c->processes) {
        pthread_join(tid, NULL);
        return;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_core: %s: a worker process failed\n", c->id);
        exit(1);
    }
}

/* Whether a case runs in slices: one thread of this process. */
static bool sliced(const bench_case *c) { return c->threads == 1 && !c->processes; }

/* Calls `first` to `end` - 1 of a sliced case, timed: wall ns, and the
 * calls that went the expected way added to *matched. */
static int64_t time_slice(const bench_case *c, size_t first, size_t end, size_t *matched)
{
    int64_t begin = wall_ns();
    *matched += run_body(c->body, c->ctx[0], first, end, wants_allow(c));
    return wall_ns() - begin;
}

/* One timed run of a case with threads or processes: ns per call, from the
 * first start to the last end, and whether every call was as expected. */
static double time_once(const bench_case *c, bool *as_expected)
{
    size_t matched = 0;
    crew local, *team = &local;
    if (c->processes && (team = mmap(NULL, sizeof *team, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    atomic_init(&team->ready, 0);
    pthread_t tid[MAX_THREADS] = {0};
    pid_t pid[MAX_THREADS] = {0};
    for (int t = 0; t < c->threads; t++) {
        team->workers[t] = (worker){c, c->ctx[t], &team->ready, t, 0, 0, 0};
        start_worker(c, team, t, &tid[t], &pid[t]);
    }
    int64_t first = INT64_MAX, last = 0;
    for (int t = 0; t < c->threads; t++) {
        join_worker(c, tid[t], pid[t]);
        matched += team->workers[t].matched;
        first = team->workers[t].begin < first ? team->workers[t].begin : first;
        last = team->workers[t].end > last ? team->workers[t].end : last;
    }
    if (c->processes)
        munmap(team, sizeof *team);
    size_t calls = c->ops * (size_t)c->threads;
    *as_expected = !*c->expect || matched == calls;
    return (double)(last - first) / (double)calls;
}

/* Each run of a single-threaded case is cut into this many slices, and a
 * round runs the first slice of every case of the group, then the second,
 * and so on: a case and its floor take turns every few milliseconds, so
 * that both meet the same state of a shared machine, and a round's ratio of
 * the two is a fair pair. */
#define SLICES 16

/* Runs the cases of `group` round-robin, one run of each per round (the
 * single-threaded ones interleaved slice by slice, then the others), so that
 * a slow phase of the machine falls on every case alike; one untimed
 * warm-up round first. */
static void run_cases(const config *cfg, const char *group, bench_case *cases, size_t count)
{
    for (size_t k = 0; k < count; k++)
        cases[k].met = true;
    int64_t *elapsed = calloc(count, sizeof *elapsed);
    size_t *matched = calloc(count, sizeof *matched);
    if (!elapsed || !matched) {
        perror("calloc");
        exit(1);
    }
    for (int rep = 0; rep <= cfg->reps; rep++) {
        memset(elapsed, 0, count * sizeof *elapsed);
        memset(matched, 0, count * sizeof *matched);
        for (size_t slice = 0; slice < SLICES; slice++)
            for (size_t k = 0; k < count; k++)
                if (sliced(&cases[k]))
                    elapsed[k] += time_slice(&cases[k], cases[k].ops * slice / SLICES,
                                             cases[k].ops * (slice + 1) / SLICES, &matched[k]);
        for (size_t k = 0; k < count; k++) {
            bool as_expected;
            double ns;
            if (sliced(&cases[k])) {
                as_expected = !*cases[k].expect || matched[k] == cases[k].ops;
                ns = (double)elapsed[k] / (double)cases[k].ops;
            } else {
                ns = time_once(&cases[k], &as_expected);
            }
            if (!as_expected)
                cases[k].met = false;
            if (rep > 0)
                cases[k].runs[rep - 1] = ns;
        }
    }
    free(elapsed);
    free(matched);
    for (size_t k = 0; k < count; k++)
        emit(cases[k].id, group, cases[k].processes ? cases[k].threads : 1,
             cases[k].processes ? 1 : cases[k].threads, cases[k].ops, cases[k].runs, cfg->reps,
             cases[k].expect, cases[k].met);
}

#define CASE1(name, fn, context, n, want)                                                    \
    {                                                                                        \
        .id = (name), .body = (fn), .ctx = {(context), (context)}, .threads = 1, .ops = (n), \
        .expect = (want)                                                                     \
    }

/* Floors. */

static _Atomic int64_t floor_tat;

static bool floor_clock(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    KEEP(ts.tv_nsec);
    return true;
}

static bool floor_clock_load(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = wall_ns();
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool admitted = now >= tat;
    KEEP(admitted);
    return true;
}

static bool floor_clock_cas(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = wall_ns();
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool stored = atomic_compare_exchange_weak_explicit(&floor_tat, &tat, now, memory_order_acq_rel,
                                                        memory_order_acquire);
    KEEP(stored);
    return true;
}

static bool floor_cr_clock(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = cr_clock_ns();
    KEEP(now);
    return true;
}

static bool floor_fast_clock(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = cr_fast_clock_ns();
    KEEP(now);
    return true;
}

static bool floor_clock_coarse(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    KEEP(ts.tv_nsec);
    return true;
}

#if defined(__x86_64__)
static bool floor_rdtsc(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    uint64_t ticks = __rdtsc();
    KEEP(ticks);
    return true;
}

static bool floor_rdtscp(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    unsigned aux;
    uint64_t ticks = __rdtscp(&aux);
    KEEP(ticks);
    return true;
}

static bool floor_rdtsc_cas(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = (int64_t)__rdtsc();
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool stored = atomic_compare_exchange_weak_explicit(&floor_tat, &tat, now, memory_order_acq_rel,
                                                        memory_order_acquire);
    KEEP(stored);
    return true;
}

/* The ordered counter (rdtscp, as clock="monotonic" reads it) + load + CAS:
 * the floor of an admission on that clock. */
static bool floor_rdtscp_cas(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    unsigned aux;
    int64_t now = (int64_t)__rdtscp(&aux);
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool stored = atomic_compare_exchange_weak_explicit(&floor_tat, &tat, now, memory_order_acq_rel,
                                                        memory_order_acquire);
    KEEP(stored);
    return true;
}

/* The counter + load and a compare: the floor of a turn-away, which stores
 * nothing; unfenced (the default clock) and ordered (clock="monotonic"). */
static bool floor_rdtsc_load(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    int64_t now = (int64_t)__rdtsc();
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool admitted = now >= tat;
    KEEP(admitted);
    return true;
}

static bool floor_rdtscp_load(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    unsigned aux;
    int64_t now = (int64_t)__rdtscp(&aux);
    int64_t tat = atomic_load_explicit(&floor_tat, memory_order_acquire);
    bool admitted = now >= tat;
    KEEP(admitted);
    return true;
}
#endif

/*
 * The floor of a keyed allow: the least the same work can cost. A table of
 * cellrate's size and layout (64-byte buckets of four 16-byte slots
 * {fingerprint, TAT}, mapped as the core maps its own, on huge pages where
 * the kernel grants them), holding the same keys, placed by the same rule
 * (two buckets a key, the emptier one); each call takes the same key as the
 * measured row, hashes it with the table's keyed hash (SipHash-1-3) into its
 * fingerprint and two buckets, fetches both, reads the limit's own clock
 * (inlined, as the core reads it), finds the key's slot and swaps in a new
 * TAT with one 16-byte compare-and-swap. What it leaves out is what cellrate
 * adds: the argument checks, the limit's generation, the decision and the
 * counters.
 */
typedef struct {
    _Alignas(64) cr_pair slots[4];
} floor_bucket;

typedef struct {
    floor_bucket *buckets;
    uint32_t nbuckets;
    uint64_t seed[2];
    cr_limit limit; /* its clock */
    const uint32_t *draws;
    size_t placed_over; /* keys placed over another (both buckets full) */
} floor_table;

/* Buckets for `capacity` keys as the core sizes them (core/keyed.c: 7/4
 * slots a key); floor_table_check holds the two to the same size. */
static uint32_t floor_buckets_for(size_t capacity)
{
    size_t slots = capacity + (capacity * 3 + 3) / 4;
    size_t buckets = (slots + 3) / 4;
    return (uint32_t)(buckets < 2 ? 2 : buckets);
}

static void floor_table_place(floor_table *t, uint64_t key, int64_t tat)
{
    const cr_key_place place = cr_key_place_of(t->seed, t->nbuckets, &key, sizeof key);
    cr_pair *free_slot = NULL;
    int most_free = 0;
    for (int b = 0; b < 2; b++) {
        floor_bucket *bucket = &t->buckets[place.bucket[b]];
        int free_here = 0;
        cr_pair *first = NULL;
        for (int s = 0; s < 4; s++)
            if (cr_pair_word(&bucket->slots[s]) == 0 && free_here++ == 0)
                first = &bucket->slots[s];
        if (free_here > most_free) {
            most_free = free_here;
            free_slot = first;
        }
    }
    if (!free_slot) { /* as the core evicts: here simply the first slot */
        free_slot = &t->buckets[place.bucket[0]].slots[0];
        t->placed_over++;
    }
    *free_slot = cr_pair_make(place.fp, tat);
}

static floor_table *floor_table_new(const config *cfg, const char *clock, const uint32_t *draws)
{
    floor_table *t = calloc(1, sizeof *t);
    if (!t) {
        perror("calloc");
        exit(1);
    }
    t->nbuckets = floor_buckets_for(cfg->keys);
    size_t size = (size_t)t->nbuckets * sizeof(floor_bucket);
    void *buckets = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buckets == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    madvise(buckets, size, MADV_HUGEPAGE);
#endif
    t->buckets = buckets;
    check_status(cr_random_seed(t->seed), "cr_random_seed");
    t->limit = keyed_limit(clock);
    t->draws = draws;
    const int64_t now = cr_read_clock(&t->limit);
    for (size_t k = 0; k < cfg->keys; k++)
        floor_table_place(t, int_key(k), now + t->limit.emission_ns);
    return t;
}

/* The floor's table against cellrate's: the same bytes of buckets. */
static void floor_table_check(const floor_table *t, const cr_keyed *keyed)
{
    size_t ours = (size_t)t->nbuckets * sizeof(floor_bucket), theirs = cr_keyed_memory(keyed);
    if (ours > theirs || theirs - ours > ours / 64) {
        fprintf(stderr,
                "bench_core: the keyed floor's table (%zu bytes) is not the size of "
                "cellrate's (%zu bytes)\n",
                ours, theirs);
        exit(1);
    }
}

static void floor_table_free(floor_table *t)
{
    munmap(t->buckets, (size_t)t->nbuckets * sizeof(floor_bucket));
    free(t);
}

/* Admits whatever the slot holds: the floor does not decide. A key that
 * lost its slot (both buckets full: the core evicts the idlest key, as it
 * did for about as many keys of its own table) takes the first slot of its
 * first bucket back. */
static bool floor_keyed_slot(void *ctx, size_t i)
{
    floor_table *t = ctx;
    const uint64_t key = int_key(t->draws[i]);
    const cr_key_place place = cr_key_place_of(t->seed, t->nbuckets, &key, sizeof key);
    __builtin_prefetch(&t->buckets[place.bucket[0]]);
    __builtin_prefetch(&t->buckets[place.bucket[1]]);
    const int64_t now = cr_read_clock(&t->limit);
    for (int b = 0; b < 2; b++) {
        floor_bucket *bucket = &t->buckets[place.bucket[b]];
        for (int s = 0; s < 4; s++) {
            const uint64_t word = cr_pair_word(&bucket->slots[s]);
            if (word != place.fp)
                continue;
            const int64_t tat = cr_pair_state(&bucket->slots[s]);
            return cr_pair_cas(&bucket->slots[s], cr_pair_make(word, tat),
                               cr_pair_make(word, now + t->limit.emission_ns));
        }
    }
    cr_pair *first = &t->buckets[place.bucket[0]].slots[0];
    return cr_pair_cas(first, cr_pair_make(cr_pair_word(first), cr_pair_state(first)),
                       cr_pair_make(place.fp, now + t->limit.emission_ns));
}

/* cellrate. */

typedef struct {
    cr_limiter *limiter;
    cr_keyed *keyed;
    int64_t now_base; /* the last `now` passed, where the scenario passes it */
    const uint32_t *draws;
    const str_keys *strs;
    int32_t priority;    /* a class of the limit (the priority rows) */
    int32_t plan_stride; /* as key_plan takes it (the plan rows) */
} cellrate_ctx;

/* allow(): the verdict alone (cr_limiter_allow). */
static bool limiter_clock(void *ctx, size_t i)
{
    (void)i;
    bool allowed = false;
    cr_limiter_allow(((cellrate_ctx *)ctx)->limiter, CR_CLOCK, 1, &allowed);
    return allowed;
}

/* allow() in a priority class (cr_limiter_allow_priority, as the bindings
 * call it). */
static bool limiter_priority_clock(void *ctx, size_t i)
{
    (void)i;
    cellrate_ctx *c = ctx;
    bool allowed = false;
    cr_limiter_allow_priority(c->limiter, CR_CLOCK, 1, c->priority, &allowed);
    return allowed;
}

/* check(): the whole decision (remaining, retry and reset times). */
static bool limiter_check_clock(void *ctx, size_t i)
{
    (void)i;
    cr_decision decision;
    cr_limiter_check(((cellrate_ctx *)ctx)->limiter, CR_CLOCK, 1, true, &decision);
    return decision.allowed;
}

/* charge(): a cost known after the fact, committed whatever the state; on the
 * allow path it fits, and its Decision is check()'s. */
static bool limiter_charge_clock(void *ctx, size_t i)
{
    (void)i;
    cr_decision decision;
    cr_limiter_charge(((cellrate_ctx *)ctx)->limiter, CR_CLOCK, 1, &decision);
    return decision.allowed;
}

/* take(): as many units as fit, here up to 1, in one compare-and-swap. */
static bool limiter_take_clock(void *ctx, size_t i)
{
    (void)i;
    int64_t taken = 0;
    cr_limiter_take(((cellrate_ctx *)ctx)->limiter, CR_CLOCK, 1, &taken);
    return taken == 1;
}

/* Without the clock read: `now` advances 20 ns a call, as a caller with its
 * own clock would pass it. Shows the decision and the store alone. */
static bool limiter_given_now(void *ctx, size_t i)
{
    (void)i;
    cellrate_ctx *c = ctx;
    bool allowed = false;
    c->now_base += 20;
    cr_limiter_allow(c->limiter, c->now_base, 1, &allowed);
    return allowed;
}

static bool keyed_int(void *ctx, size_t i)
{
    cellrate_ctx *c = ctx;
    uint64_t key = int_key(c->draws[i]);
    bool allowed = false;
    cr_keyed_allow(c->keyed, &key, sizeof key, CR_CLOCK, 1, &allowed);
    return allowed;
}

/* A keyed allow naming the key's plan, as the bindings decide it: on
 * "default" the plain entry, on another plan cr_keyed_check_plan. */
static bool keyed_int_plan(void *ctx, size_t i)
{
    cellrate_ctx *c = ctx;
    uint32_t k = c->draws[i];
    uint64_t key = int_key(k);
    int32_t plan = key_plan(k, c->plan_stride);
    bool allowed = false;
    if (plan == CR_PLAN_DEFAULT)
        cr_keyed_allow(c->keyed, &key, sizeof key, CR_CLOCK, 1, &allowed);
    else
        cr_keyed_check_plan(c->keyed, &key, sizeof key, CR_CLOCK, 1, plan, -1, true, NULL,
                            &allowed);
    return allowed;
}

/* A keyed allow in a priority class. */
static bool keyed_int_priority(void *ctx, size_t i)
{
    cellrate_ctx *c = ctx;
    uint64_t key = int_key(c->draws[i]);
    bool allowed = false;
    cr_keyed_check_priority(c->keyed, &key, sizeof key, CR_CLOCK, 1, c->priority, true, NULL,
                            &allowed);
    return allowed;
}

static bool keyed_str(void *ctx, size_t i)
{
    cellrate_ctx *c = ctx;
    uint32_t k = c->draws[i];
    bool allowed = false;
    cr_keyed_allow(c->keyed, c->strs->text + (size_t)k * KEY_MAX, c->strs->len[k], CR_CLOCK, 1,
                   &allowed);
    return allowed;
}

static void drain(cr_limiter *limiter)
{
    cr_decision decision;
    do
        check_status(cr_limiter_check(limiter, CR_CLOCK, 1, true, &decision), "drain");
    while (decision.allowed);
}

/* The floors and the Limiter, interleaved. */
static void limiter_scenarios(const config *cfg)
{
    size_t n = cfg->single_ops;
    cr_limit allow = allow_limit("monotonic"), deny = deny_limit("monotonic");
    cr_limit allow_fast = allow_limit("fast"), deny_fast = deny_limit("fast");
    cellrate_ctx allow_clock = {0}, deny_clock = {0}, allow_given = {0}, deny_given = {0};
    cellrate_ctx allow_check = {0}, deny_check = {0}, allow_charge = {0}, allow_take = {0};
    check_status(cr_limiter_new(&allow_charge.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&allow_take.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&allow_clock.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&deny_clock.limiter, &deny), "cr_limiter_new");
    check_status(cr_limiter_new(&allow_check.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&deny_check.limiter, &deny), "cr_limiter_new");
    drain(deny_check.limiter);
    check_status(cr_limiter_new(&allow_given.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&deny_given.limiter, &deny), "cr_limiter_new");
    drain(deny_clock.limiter);
    drain(deny_given.limiter);
    /* limits made with clock "fast": CR_CLOCK reads cr_fast_clock_ns() */
    cellrate_ctx allow_fast_clock = {0}, deny_fast_clock = {0};
    check_status(cr_limiter_new(&allow_fast_clock.limiter, &allow_fast), "cr_limiter_new");
    check_status(cr_limiter_new(&deny_fast_clock.limiter, &deny_fast), "cr_limiter_new");
    drain(deny_fast_clock.limiter);
    /* the same allow limit with priority classes, decided as "bulk" */
    cr_limit allow_classes = with_classes(allow_args(), "fast");
    cellrate_ctx allow_priority = {.priority = bulk_class(&allow_classes)};
    check_status(cr_limiter_new(&allow_priority.limiter, &allow_classes), "cr_limiter_new");
    allow_given.now_base = deny_given.now_base = wall_ns();

    bench_case cases[] = {
        CASE1("c.floor.clock", floor_clock, NULL, n, ""),
        CASE1("c.floor.clock_load", floor_clock_load, NULL, n, ""),
        CASE1("c.floor.clock_cas", floor_clock_cas, NULL, n, ""),
        CASE1("c.floor.cr_clock_ns", floor_cr_clock, NULL, n, ""),
        CASE1("c.floor.fast_clock", floor_fast_clock, NULL, n, ""),
        CASE1("c.floor.clock_coarse", floor_clock_coarse, NULL, n, ""),
#if defined(__x86_64__)
        CASE1("c.floor.rdtsc", floor_rdtsc, NULL, n, ""),
        CASE1("c.floor.rdtscp", floor_rdtscp, NULL, n, ""),
        CASE1("c.floor.rdtsc_cas", floor_rdtsc_cas, NULL, n, ""),
        CASE1("c.floor.rdtsc_load", floor_rdtsc_load, NULL, n, ""),
        CASE1("c.floor.rdtscp_cas", floor_rdtscp_cas, NULL, n, ""),
        CASE1("c.floor.rdtscp_load", floor_rdtscp_load, NULL, n, ""),
#endif
        CASE1("c.cellrate.limiter.allow", limiter_clock, &allow_clock, n, "allow"),
        CASE1("c.cellrate.limiter.deny", limiter_clock, &deny_clock, n, "deny"),
        CASE1("c.cellrate.limiter.allow_fast_clock", limiter_clock, &allow_fast_clock, n, "allow"),
        CASE1("c.cellrate.limiter.allow_priority", limiter_priority_clock, &allow_priority, n,
              "allow"),
        CASE1("c.cellrate.limiter.deny_fast_clock", limiter_clock, &deny_fast_clock, n, "deny"),
        CASE1("c.cellrate.limiter.check.allow", limiter_check_clock, &allow_check, n, "allow"),
        CASE1("c.cellrate.limiter.check.deny", limiter_check_clock, &deny_check, n, "deny"),
        CASE1("c.cellrate.limiter.charge.allow", limiter_charge_clock, &allow_charge, n, "allow"),
        CASE1("c.cellrate.limiter.take.allow", limiter_take_clock, &allow_take, n, "allow"),
        CASE1("c.cellrate.limiter.allow_given_now", limiter_given_now, &allow_given, n, "allow"),
        CASE1("c.cellrate.limiter.deny_given_now", limiter_given_now, &deny_given, n, "deny"),
    };
    run_cases(cfg, "c.limiter", cases, sizeof cases / sizeof cases[0]);

    cr_limiter_free(allow_clock.limiter);
    cr_limiter_free(deny_clock.limiter);
    cr_limiter_free(allow_given.limiter);
    cr_limiter_free(deny_given.limiter);
    cr_limiter_free(allow_check.limiter);
    cr_limiter_free(deny_check.limiter);
    cr_limiter_free(allow_charge.limiter);
    cr_limiter_free(allow_take.limiter);
    cr_limiter_free(allow_fast_clock.limiter);
    cr_limiter_free(deny_fast_clock.limiter);
    cr_limiter_free(allow_priority.limiter);
}

/* reconfigure(): the change itself, back and forth between two limits at a
 * given instant (each call keeps one retired cell: ~200 bytes). */
typedef struct {
    cr_limiter *limiter;
    cr_limit limits[2];
    int64_t now;
} change_ctx;

static bool limiter_change(void *ctx, size_t i)
{
    change_ctx *c = ctx;
    return cr_limiter_reconfigure(c->limiter, &c->limits[i & 1], c->now) == CR_OK;
}

/* Live change (docs/design.md §4): the allow path of a limiter that was
 * never changed and of one changed 1000 times (its decisions reach the
 * current cell by the same one pointer), and the cost of a change. */
static void live_change_scenarios(const config *cfg)
{
    size_t n = cfg->single_ops;
    cr_limit allow = allow_limit(NULL);
    cellrate_ctx fresh = {0}, changed = {0}, fresh_given = {0}, changed_given = {0};
    check_status(cr_limiter_new(&fresh.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&changed.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&fresh_given.limiter, &allow), "cr_limiter_new");
    check_status(cr_limiter_new(&changed_given.limiter, &allow), "cr_limiter_new");
    change_ctx change = {.limits = {allow, allow}, .now = wall_ns()};
    change.limits[1].burst = allow.burst / 2;
    change.limits[1].tolerance_ns = allow.emission_ns * change.limits[1].burst;
    for (int i = 1; i <= 1000; i++) {
        check_status(cr_limiter_reconfigure(changed.limiter, &change.limits[i & 1], CR_CLOCK),
                     "cr_limiter_reconfigure");
        check_status(cr_limiter_reconfigure(changed_given.limiter, &change.limits[i & 1], CR_CLOCK),
                     "cr_limiter_reconfigure");
    }
    check_status(cr_limiter_new(&change.limiter, &allow), "cr_limiter_new");
    fresh_given.now_base = changed_given.now_base = wall_ns();
    bench_case cases[] = {
        CASE1("c.live.limiter.allow", limiter_clock, &fresh, n, "allow"),
        CASE1("c.live.limiter.allow_after_changes", limiter_clock, &changed, n, "allow"),
        CASE1("c.live.limiter.allow_given_now", limiter_given_now, &fresh_given, n, "allow"),
        CASE1("c.live.limiter.allow_given_now_after_changes", limiter_given_now, &changed_given, n,
              "allow"),
        CASE1("c.live.limiter.reconfigure", limiter_change, &change, n / 100, "allow"),
    };
    run_cases(cfg, "c.live", cases, sizeof cases / sizeof cases[0]);
    cr_limiter_free(fresh.limiter);
    cr_limiter_free(changed.limiter);
    cr_limiter_free(fresh_given.limiter);
    cr_limiter_free(changed_given.limiter);
    cr_limiter_free(change.limiter);
}

/* Whether the catalogue's `name` reads the realtime clock. */
static bool is_realtime(const char *name)
{
    return strstr(name, "window") != NULL || strcmp(name, "calendar") == 0;
}

/* The algorithm catalogue's allow paths, and check_all against separate
 * calls. Each limit admits every call of every run: gcra/token_bucket as the
 * allow limit; windows of 10^7 s with rates under their ceilings
 * (fixed: 10^15, sliding: 9 * 10^7 per window). */
typedef struct {
    cr_item items[3];
    int count;
    int64_t now_base;
} composite_ctx;

static bool composite_check_all(void *ctx, size_t i)
{
    (void)i;
    composite_ctx *c = ctx;
    cr_decision decision;
    c->now_base += 20;
    cr_check_all(c->items, (size_t)c->count, c->now_base, 1, &decision, NULL);
    return decision.allowed;
}

static bool composite_separate(void *ctx, size_t i)
{
    (void)i;
    composite_ctx *c = ctx;
    cr_decision decision;
    bool all = true;
    c->now_base += 20;
    for (int k = 0; k < c->count; k++) {
        cr_limiter_check(c->items[k].limiter, c->now_base, 1, true, &decision);
        all &= decision.allowed;
    }
    return all;
}

static cr_limit catalogue_limit(const char *algorithm)
{
    if (strcmp(algorithm, "calendar") == 0) { /* a quota of 10^12 a day: UTC's days */
        static const char rate[] = "1000000000000/day";
        cr_limit_args args = {.rate_text = rate,
                              .rate_text_len = strlen(rate),
                              .algorithm = algorithm,
                              .algorithm_len = strlen(algorithm)};
        return make_limit(args, NULL);
    }
    if (strcmp(algorithm, "gcra_penalty") == 0)
        algorithm = "gcra"; /* the allow limit; its penalty is set by the caller */
    bool window = strstr(algorithm, "window") != NULL;
    cr_limit_args args = {.rate = window ? (algorithm[0] == 'f' ? 1e15 : 9e7) : ALLOW_RATE_PER_S,
                          .period_s = window ? 1e7 : 1,
                          .has_period = true,
                          .burst = ALLOW_BURST,
                          .has_burst = !window,
                          .algorithm = algorithm,
                          .algorithm_len = strlen(algorithm)};
    return make_limit(args, NULL);
}

static void catalogue_scenarios(const config *cfg)
{
    size_t n = cfg->single_ops;
    /* calendar: a quota, its boundary cached until it passes; gcra_penalty:
     * the allow limit under a penalty (never refused: the cost of the box
     * to an admission) */
    static const char *const names[] = {"gcra",           "token_bucket", "fixed_window",
                                        "sliding_window", "calendar",     "gcra_penalty"};
    enum { ALGORITHMS = sizeof names / sizeof names[0] };
    cellrate_ctx clock_ctx[ALGORITHMS] = {{0}}, given_ctx[ALGORITHMS] = {{0}};
    bench_case cases[2 * ALGORITHMS + 4];
    char ids[2 * ALGORITHMS][64];
    cr_penalty penalty;
    check_status(cr_penalty_init(&penalty, "5/minute", 8, 10.0, 60.0, true), "cr_penalty_init");
    for (int a = 0; a < ALGORITHMS; a++) {
        cr_limit limit = catalogue_limit(names[a]);
        check_status(cr_limiter_new(&clock_ctx[a].limiter, &limit), "cr_limiter_new");
        check_status(cr_limiter_new(&given_ctx[a].limiter, &limit), "cr_limiter_new");
        if (strcmp(names[a], "gcra_penalty") == 0) {
            check_status(cr_limiter_set_penalty(clock_ctx[a].limiter, &penalty), "set_penalty");
            check_status(cr_limiter_set_penalty(given_ctx[a].limiter, &penalty), "set_penalty");
        }
        /* windows take realtime nanoseconds: start given times on that clock */
        given_ctx[a].now_base = is_realtime(names[a]) ? cr_realtime_ns() : wall_ns();
        snprintf(ids[2 * a], sizeof ids[0], "c.catalogue.%s.allow", names[a]);
        snprintf(ids[2 * a + 1], sizeof ids[0], "c.catalogue.%s.allow_given_now", names[a]);
        cases[2 * a] = (bench_case)CASE1(ids[2 * a], limiter_clock, &clock_ctx[a], n, "allow");
        cases[2 * a + 1] = (bench_case)CASE1(ids[2 * a + 1], limiter_given_now, &given_ctx[a], n,
                                             "allow");
    }
    composite_ctx composite[4] = {{.count = 2}, {.count = 2}, {.count = 3}, {.count = 3}};
    cr_limiter *made[12];
    int m = 0;
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < composite[k].count; i++) {
            cr_limit limit = catalogue_limit("gcra");
            check_status(cr_limiter_new(&made[m], &limit), "cr_limiter_new");
            composite[k].items[i].limiter = made[m++];
        }
        composite[k].now_base = wall_ns();
    }
    const int c = 2 * ALGORITHMS;
    cases[c] = (bench_case)CASE1("c.check_all.2", composite_check_all, &composite[0], n, "allow");
    cases[c + 1] = (bench_case)CASE1("c.separate.2", composite_separate, &composite[1], n, "allow");
    cases[c + 2] = (bench_case)CASE1("c.check_all.3", composite_check_all, &composite[2], n,
                                     "allow");
    cases[c + 3] = (bench_case)CASE1("c.separate.3", composite_separate, &composite[3], n, "allow");
    run_cases(cfg, "c.catalogue", cases, sizeof cases / sizeof cases[0]);
    for (int a = 0; a < ALGORITHMS; a++) {
        cr_limiter_free(clock_ctx[a].limiter);
        cr_limiter_free(given_ctx[a].limiter);
    }
    for (int i = 0; i < m; i++)
        cr_limiter_free(made[i]);
}

/* Anonymous memory of this process on huge pages, in KiB (-1 if unknown). */
static long anon_huge_kib(void)
{
    FILE *rollup = fopen("/proc/self/smaps_rollup", "r");
    if (!rollup)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, rollup))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    fclose(rollup);
    return kib;
}

static void report_table(const char *id, const cr_keyed *keyed, size_t keys)
{
    printf("{\"id\": \"%s\", \"lang\": \"c\", \"keys\": %zu, \"tracked\": %zu, "
           "\"evictions\": %" PRIu64 ", \"table_bytes\": %zu}\n",
           id, keys, cr_keyed_len(keyed), cr_keyed_evictions(keyed), cr_keyed_memory(keyed));
}

/* The integer-key table, in this process, or with `shared_path` in a new
 * shared region at that path; `clock` as for make_limit. */
/* The integer-key table of `limit` (or of the plans of `plans`, key k on
 * key_plan(k, stride)), in this process, or with `shared_path` in a new
 * shared region at that path. */
static cr_keyed *filled_plan_table(const config *cfg, const char *shared_path,
                                   const cr_limit *limit, const cr_plan_table *plans,
                                   int32_t stride)
{
    cr_keyed *keyed;
    check_status(cr_keyed_open_plans(&keyed, limit, plans, (int64_t)cfg->keys, shared_path, 0600,
                                     CR_CHANGE_APPLY),
                 "cr_keyed_open_plans");
    for (size_t k = 0; k < cfg->keys; k++) {
        uint64_t key = int_key(k);
        cr_decision decision;
        cr_keyed_check_plan(keyed, &key, sizeof key, CR_CLOCK, 1, key_plan(k, stride), -1, true,
                            &decision, NULL);
    }
    return keyed;
}

/* The same without plans; `clock` as for make_limit. */
static cr_keyed *filled_int_table(const config *cfg, const char *shared_path, const char *clock)
{
    cr_limit limit = keyed_limit(clock);
    return filled_plan_table(cfg, shared_path, &limit, NULL, 0);
}

static cr_keyed *filled_str_table(const config *cfg, const str_keys *strs)
{
    cr_limit limit = keyed_limit(NULL);
    cr_keyed *keyed;
    check_status(cr_keyed_new(&keyed, &limit, (int64_t)cfg->keys), "cr_keyed_new");
    for (size_t k = 0; k < cfg->keys; k++) {
        cr_decision decision;
        cr_keyed_check(keyed, strs->text + k * KEY_MAX, strs->len[k], CR_CLOCK, 1, true, &decision);
    }
    return keyed;
}

/* Keyed tables across live changes: every key in turn (op i decides key
 * i mod keys); `change` set, the limit changes each time the turn restarts,
 * so every decision but the sweep's share is a key's first touch after a
 * change (the conversion, paid once per key). */
typedef struct {
    cr_keyed *keyed;
    size_t keys;
    const cr_limit *limits; /* two; NULL: no change */
} turn_ctx;

static bool keyed_turn(void *ctx, size_t i)
{
    turn_ctx *c = ctx;
    const size_t k = i % c->keys;
    if (c->limits && k == 0)
        check_status(cr_keyed_reconfigure(c->keyed, &c->limits[(i / c->keys) & 1], CR_CLOCK),
                     "cr_keyed_reconfigure");
    uint64_t key = int_key(k);
    bool allowed = false;
    cr_keyed_allow(c->keyed, &key, sizeof key, CR_CLOCK, 1, &allowed);
    return allowed;
}

static bool keyed_change(void *ctx, size_t i)
{
    turn_ctx *c = ctx;
    return cr_keyed_reconfigure(c->keyed, &c->limits[i & 1], CR_CLOCK) == CR_OK;
}

/* The 1M-key tables (in this process and in a shared region) never changed
 * and changed 1000 times; the change itself; the first touches after one. */
static void live_keyed_scenarios(const config *cfg, const uint32_t *draws)
{
    char path[2][64];
    cellrate_ctx tables[4];
    cr_limit limits[2] = {keyed_limit(NULL), keyed_limit(NULL)};
    limits[1].burst = limits[0].burst + 1;
    limits[1].tolerance_ns = limits[1].emission_ns * limits[1].burst;
    for (int t = 0; t < 4; t++) {
        const bool shared = t >= 2;
        snprintf(path[t & 1], sizeof path[0], "/dev/shm/cellrate-bench-%ld.live%d", (long)getpid(),
                 t);
        if (shared)
            unlink(path[t & 1]);
        tables[t] = (cellrate_ctx){
            .keyed = filled_int_table(cfg, shared ? path[t & 1] : NULL, NULL), .draws = draws};
        if (t & 1)
            for (int c = 1; c <= 1000; c++)
                check_status(cr_keyed_reconfigure(tables[t].keyed, &limits[c & 1], CR_CLOCK),
                             "cr_keyed_reconfigure");
    }
    turn_ctx change = {tables[0].keyed, cfg->keys, limits};
    turn_ctx turn = {tables[2].keyed, cfg->keys, NULL};
    turn_ctx converting = {tables[2].keyed, cfg->keys, limits};
    bench_case cases[] = {
        CASE1("c.live.keyed.int", keyed_int, &tables[0], cfg->keyed_ops, "allow"),
        CASE1("c.live.keyed.int_after_changes", keyed_int, &tables[1], cfg->keyed_ops, "allow"),
        CASE1("c.live.shared.keyed.int", keyed_int, &tables[2], cfg->keyed_ops, "allow"),
        CASE1("c.live.shared.keyed.int_after_changes", keyed_int, &tables[3], cfg->keyed_ops,
              "allow"),
        CASE1("c.live.keyed.reconfigure", keyed_change, &change, 200, ""),
        CASE1("c.live.shared.keyed.every_key", keyed_turn, &turn, cfg->keys, "allow"),
        CASE1("c.live.shared.keyed.every_key_first_touch", keyed_turn, &converting, cfg->keys,
              "allow"),
    };
    run_cases(cfg, "c.live.keyed", cases, sizeof cases / sizeof cases[0]);
    for (int t = 0; t < 4; t++)
        cr_keyed_free(tables[t].keyed);
    unlink(path[0]);
    unlink(path[1]);
}

/* KeyedLimiter with 1M keys (the integer keys also in a table made with
 * clock "fast"), every key admitted once before timing; then
 * threads: two on one key (one Limiter), and two on distinct keys (the
 * integer table; with two threads each draws from its own half), each against
 * the same work on one thread; and the same integer keys in a shared region
 * (a file under /dev/shm), from 1 process and from 2 forked processes (each
 * on its own half), against the in-process table on 1 and 2 threads. */
static void keyed_scenarios(const config *cfg, const str_keys *strs, const uint32_t *draws_all,
                            uint32_t *const draws_half[2])
{
    cellrate_ctx ints = {.keyed = filled_int_table(cfg, NULL, "monotonic"), .draws = draws_all};
    cellrate_ctx ints_fast = {.keyed = filled_int_table(cfg, NULL, "fast"), .draws = draws_all};
    cellrate_ctx texts = {.keyed = filled_str_table(cfg, strs), .draws = draws_all, .strs = strs};
    /* plans and priorities, on the default clock: a table with plans,
     * every key on "default"; one with every second key on "pro" (a plan
     * the branch predictor cannot guess, as with real keys); one with every
     * key on "pro"; one whose limit has classes, decided as "bulk" */
    cr_plan_table plans = keyed_plans("fast");
    cellrate_ctx plans_default = {.keyed = filled_plan_table(cfg, NULL, NULL, &plans, 0),
                                  .draws = draws_all};
    cellrate_ctx plans_half = {.keyed = filled_plan_table(cfg, NULL, NULL, &plans, 2),
                               .draws = draws_all,
                               .plan_stride = 2};
    cellrate_ctx plans_pro = {.keyed = filled_plan_table(cfg, NULL, NULL, &plans, 1),
                              .draws = draws_all,
                              .plan_stride = 1};
    cr_limit keyed_classes = with_classes(keyed_args(1), "fast");
    cellrate_ctx classes = {.keyed = filled_plan_table(cfg, NULL, &keyed_classes, NULL, 0),
                            .draws = draws_all,
                            .priority = bulk_class(&keyed_classes)};
    floor_table *slot_floor = floor_table_new(cfg, "monotonic", draws_all);
    floor_table *slot_floor_fast = floor_table_new(cfg, "fast", draws_all);
    floor_table_check(slot_floor, ints.keyed);
    floor_table slot_floor_half[2] = {*slot_floor, *slot_floor};
    slot_floor_half[0].draws = draws_half[0];
    slot_floor_half[1].draws = draws_half[1];
    /* each cellrate row right after its floor: the two take turns slice by
     * slice (run_cases) */
    bench_case keyed_cases[] = {
        CASE1("c.floor.keyed_slot", floor_keyed_slot, slot_floor, cfg->keyed_ops, "allow"),
        CASE1("c.cellrate.keyed.int", keyed_int, &ints, cfg->keyed_ops, "allow"),
        CASE1("c.floor.keyed_slot_fast_clock", floor_keyed_slot, slot_floor_fast, cfg->keyed_ops,
              "allow"),
        CASE1("c.cellrate.keyed.int_fast_clock", keyed_int, &ints_fast, cfg->keyed_ops, "allow"),
        CASE1("c.cellrate.keyed.plans.default", keyed_int_plan, &plans_default, cfg->keyed_ops,
              "allow"),
        CASE1("c.cellrate.keyed.plans.half", keyed_int_plan, &plans_half, cfg->keyed_ops, "allow"),
        CASE1("c.cellrate.keyed.plans.pro", keyed_int_plan, &plans_pro, cfg->keyed_ops, "allow"),
        CASE1("c.cellrate.keyed.priority", keyed_int_priority, &classes, cfg->keyed_ops, "allow"),
        CASE1("c.cellrate.keyed.str", keyed_str, &texts, cfg->keyed_ops, "allow"),
    };
    run_cases(cfg, "c.keyed", keyed_cases, sizeof keyed_cases / sizeof keyed_cases[0]);
    printf("{\"id\": \"c.floor.keyed_slot.table\", \"lang\": \"c\", \"keys\": %zu, "
           "\"placed_over\": %zu, \"table_bytes\": %zu}\n",
           cfg->keys, slot_floor->placed_over, (size_t)slot_floor->nbuckets * sizeof(floor_bucket));
    /* whether the kernel gave the tables (cellrate's seven, the floors' two)
     * huge pages, as both ask */
    printf("{\"id\": \"c.keyed.hugepages\", \"lang\": \"c\", \"anon_huge_kib\": %ld, "
           "\"tables_kib\": %zu}\n",
           anon_huge_kib(),
           (7 * cr_keyed_memory(ints.keyed) +
            2 * (size_t)slot_floor->nbuckets * sizeof(floor_bucket)) /
               1024);
    report_table("c.cellrate.keyed.int.table", ints.keyed, cfg->keys);
    report_table("c.cellrate.keyed.str.table", texts.keyed, cfg->keys);
    report_table("c.cellrate.keyed.plans.half.table", plans_half.keyed, cfg->keys);
    cr_keyed_free(texts.keyed);
    cr_keyed_free(ints_fast.keyed);
    cr_keyed_free(plans_default.keyed);
    cr_keyed_free(plans_half.keyed);
    cr_keyed_free(plans_pro.keyed);
    cr_keyed_free(classes.keyed);

    cr_limit allow = allow_limit(NULL);
    cellrate_ctx shared = {0};
    check_status(cr_limiter_new(&shared.limiter, &allow), "cr_limiter_new");
    cellrate_ctx half0 = {.keyed = ints.keyed, .draws = draws_half[0]};
    cellrate_ctx half1 = {.keyed = ints.keyed, .draws = draws_half[1]};
    char shared_path[64];
    snprintf(shared_path, sizeof shared_path, "/dev/shm/cellrate-bench-%ld.keyed", (long)getpid());
    unlink(shared_path);
    cellrate_ctx shm = {.keyed = filled_int_table(cfg, shared_path, NULL), .draws = draws_all};
    cellrate_ctx shm_half0 = {.keyed = shm.keyed, .draws = draws_half[0]};
    cellrate_ctx shm_half1 = {.keyed = shm.keyed, .draws = draws_half[1]};
    bench_case thread_cases[] = {
        /* controls: work that shares nothing, to show what two threads can
         * gain on this machine at all */
        {.id = "c.floor.threads.clock.1t",
         .body = floor_clock,
         .ctx = {NULL, NULL},
         .threads = 1,
         .ops = cfg->single_ops,
         .expect = ""},
        {.id = "c.floor.threads.clock.2t",
         .body = floor_clock,
         .ctx = {NULL, NULL},
         .threads = 2,
         .ops = cfg->single_ops,
         .expect = ""},
        {.id = "c.floor.threads.keyed_slot.1t",
         .body = floor_keyed_slot,
         .ctx = {slot_floor, slot_floor},
         .threads = 1,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
        {.id = "c.floor.threads.keyed_slot.2t",
         .body = floor_keyed_slot,
         .ctx = {&slot_floor_half[0], &slot_floor_half[1]},
         .threads = 2,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
        {.id = "c.cellrate.threads.one_key.1t",
         .body = limiter_clock,
         .ctx = {&shared, &shared},
         .threads = 1,
         .ops = cfg->single_ops,
         .expect = "allow"},
        {.id = "c.cellrate.threads.one_key.2t",
         .body = limiter_clock,
         .ctx = {&shared, &shared},
         .threads = 2,
         .ops = cfg->single_ops,
         .expect = "allow"},
        {.id = "c.cellrate.threads.distinct.1t",
         .body = keyed_int,
         .ctx = {&ints, &ints},
         .threads = 1,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
        {.id = "c.cellrate.threads.distinct.2t",
         .body = keyed_int,
         .ctx = {&half0, &half1},
         .threads = 2,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
        {.id = "c.cellrate.shared.distinct.1p",
         .body = keyed_int,
         .ctx = {&shm, &shm},
         .threads = 1,
         .processes = true,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
        {.id = "c.cellrate.shared.distinct.2p",
         .body = keyed_int,
         .ctx = {&shm_half0, &shm_half1},
         .threads = 2,
         .processes = true,
         .ops = cfg->keyed_ops,
         .expect = "allow"},
    };
    run_cases(cfg, "c.threads", thread_cases, sizeof thread_cases / sizeof thread_cases[0]);
    report_table("c.cellrate.threads.distinct.table", ints.keyed, cfg->keys);
    report_table("c.cellrate.shared.distinct.table", shm.keyed, cfg->keys);
    cr_keyed_free(shm.keyed);
    unlink(shared_path);
    cr_limiter_free(shared.limiter);
    cr_keyed_free(ints.keyed);
    floor_table_free(slot_floor);
    floor_table_free(slot_floor_fast);
}

/* ------------------------------------------------------------------------ */
/* Memory: RSS per tracked key, in a process that does nothing else.        */

static long rss_bytes(void)
{
    FILE *status = fopen("/proc/self/status", "r");
    if (!status)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, status))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(status);
    return kib * 1024;
}

/* The keys are made one at a time ("user:<n>", as in every store measured),
 * so only what the table keeps stays resident. */
static void mem_keyed(const char *id, size_t keys, const cr_plan_table *plans, int32_t stride)
{
    cr_limit limit = keyed_limit(NULL);
    long before = rss_bytes();
    cr_keyed *keyed;
    check_status(
        cr_keyed_open_plans(&keyed, &limit, plans, (int64_t)keys, NULL, 0, CR_CHANGE_APPLY),
        "cr_keyed_open_plans");
    for (size_t k = 0; k < keys; k++) {
        char key[KEY_MAX];
        int len = snprintf(key, sizeof key, "user:%zu", k);
        cr_decision decision;
        cr_keyed_check_plan(keyed, key, (size_t)len, CR_CLOCK, 1, key_plan(k, stride), -1, true,
                            &decision, NULL);
    }
    long after = rss_bytes();
    printf("{\"id\": \"%s\", \"lang\": \"c\", \"keys\": %zu, \"tracked\": %zu, "
           "\"evictions\": %" PRIu64 ", \"table_bytes\": %zu, \"rss_delta_bytes\": %ld, "
           "\"bytes_per_key\": %.2f}\n",
           id, keys, cr_keyed_len(keyed), cr_keyed_evictions(keyed), cr_keyed_memory(keyed),
           after - before, (double)(after - before) / (double)keys);
    cr_keyed_free(keyed);
}

/* mem_keyed in a forked process, so that no table measured before lends it
 * pages. */
static void mem_fresh(const char *id, size_t keys, const cr_plan_table *plans, int32_t stride)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        mem_keyed(id, keys, plans, stride);
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_core: mem: %s failed\n", id);
        exit(1);
    }
}

/* ------------------------------------------------------------------------ */
/* Concurrency (docs/design.md §15): acquire + release of one unit of a limit
 * no thread fills, against its floor, an atomic increment checked against
 * the limit and a decrement, and against the floor of a holding that names
 * its holder. */

static _Atomic int64_t floor_in_flight;

static bool floor_inc_dec(void *ctx, size_t i)
{
    (void)ctx;
    (void)i;
    bool fits = atomic_fetch_add(&floor_in_flight, 1) < 64;
    atomic_fetch_sub(&floor_in_flight, 1);
    return fits;
}

/* The floor of what the guarantee needs: a holding that names its holder
 * (so that a dead holder's units can be found, and a late release frees no
 * one else's) is a word taken from 0 by a compare-and-swap and given back by
 * another. */
static _Atomic uint64_t floor_cell;

static bool floor_holder_cas(void *ctx, size_t i)
{
    (void)ctx;
    const uint64_t holder = (uint64_t)i | 1;
    uint64_t word = 0;
    if (!atomic_compare_exchange_strong(&floor_cell, &word, holder))
        return false;
    word = holder;
    return atomic_compare_exchange_strong(&floor_cell, &word, 0);
}

typedef struct {
    cr_gauge *gauge;
    const char *key;
    size_t key_len;
} gauge_ctx;

static bool gauge_cycle(void *ctx, size_t i)
{
    (void)i;
    gauge_ctx *c = ctx;
    bool acquired;
    cr_holding holding;
    cr_gauge_acquire(c->gauge, c->key, c->key_len, 1, &acquired, &holding);
    return acquired && cr_gauge_release(c->gauge, &holding) == 1;
}

#define GAUGE_2T(name, context)                                                                   \
    {                                                                                             \
        .id = (name), .body = gauge_cycle, .ctx = {(context), (context)}, .threads = 2, .ops = n, \
        .expect = "allow"                                                                         \
    }

/* acquire+release in process, in a shared region, keyed and on 2 threads,
 * without the peak and with it (".peak": peak=true, the shared total), round
 * robin with their floors. */
static void concurrency_scenarios(const config *cfg)
{
    size_t n = cfg->single_ops;
    char path[2][64];
    gauge_ctx own[2] = {{0}}, shared[2] = {{0}};
    gauge_ctx keyed[2] = {{.key = "client", .key_len = 6}, {.key = "client", .key_len = 6}};
    for (int peak = 0; peak < 2; peak++) {
        snprintf(path[peak], sizeof path[peak], "/dev/shm/cellrate-bench-gauge-%d-%d",
                 (int)getpid(), peak);
        unlink(path[peak]);
        check_status(cr_gauge_open(&own[peak].gauge, 64, false, 0, 0, peak, NULL, 0),
                     "cr_gauge_open");
        check_status(cr_gauge_open(&shared[peak].gauge, 64, false, 0, 0, peak, path[peak], 0600),
                     "cr_gauge_open");
        check_status(cr_gauge_open(&keyed[peak].gauge, 64, true, 1000, 0, peak, NULL, 0),
                     "cr_gauge_open");
    }
    bench_case cases[] = {
        CASE1("c.floor.atomic_inc_dec", floor_inc_dec, NULL, n, "allow"),
        CASE1("c.floor.holder_cas_pair", floor_holder_cas, NULL, n, "allow"),
        CASE1("c.cellrate.concurrency.acquire_release", gauge_cycle, &own[0], n, "allow"),
        CASE1("c.cellrate.concurrency.shared.acquire_release", gauge_cycle, &shared[0], n, "allow"),
        CASE1("c.cellrate.concurrency.keyed.acquire_release", gauge_cycle, &keyed[0], n, "allow"),
        CASE1("c.cellrate.concurrency.peak.acquire_release", gauge_cycle, &own[1], n, "allow"),
        CASE1("c.cellrate.concurrency.peak.shared.acquire_release", gauge_cycle, &shared[1], n,
              "allow"),
        CASE1("c.cellrate.concurrency.peak.keyed.acquire_release", gauge_cycle, &keyed[1], n,
              "allow"),
        {.id = "c.floor.atomic_inc_dec.2t",
         .body = floor_inc_dec,
         .ctx = {NULL, NULL},
         .threads = 2,
         .ops = n,
         .expect = "allow"},
        GAUGE_2T("c.cellrate.concurrency.acquire_release.2t", &own[0]),
        GAUGE_2T("c.cellrate.concurrency.peak.acquire_release.2t", &own[1]),
    };
    run_cases(cfg, "c.concurrency", cases, sizeof cases / sizeof cases[0]);
    for (int peak = 0; peak < 2; peak++) {
        cr_gauge_free(own[peak].gauge);
        cr_gauge_free(shared[peak].gauge);
        cr_gauge_free(keyed[peak].gauge);
        unlink(path[peak]);
    }
}

/* ------------------------------------------------------------------------ */
/* Counters: the allow paths with them against the same core built without
 * them (-DCR_NO_COUNTERS, the benchmark's switch alone), linked into this
 * binary with its symbols renamed cr_* -> nc_cr_* (bench/run.sh builds it:
 * CR_BENCH_UNCOUNTED), so that both run round-robin in one run. */

#ifdef CR_BENCH_UNCOUNTED
cr_status nc_cr_limiter_new(cr_limiter **out, const cr_limit *limit);
void nc_cr_limiter_free(cr_limiter *limiter);
cr_status nc_cr_limiter_allow(cr_limiter *limiter, int64_t now_ns, int64_t cost, bool *allowed);
cr_status nc_cr_keyed_open(cr_keyed **out, const cr_limit *limit, int64_t capacity,
                           const char *path, int64_t mode, cr_on_change on_change);
void nc_cr_keyed_free(cr_keyed *keyed);
cr_status nc_cr_keyed_allow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                            int64_t cost, bool *allowed);

/* One core's entry points: the counted (cr_*) or the uncounted (nc_cr_*). */
typedef struct {
    const char *name; /* "counted" or "uncounted" */
    cr_status (*limiter_new)(cr_limiter **, const cr_limit *);
    void (*limiter_free)(cr_limiter *);
    cr_status (*keyed_open)(cr_keyed **, const cr_limit *, int64_t, const char *, int64_t,
                            cr_on_change);
    void (*keyed_free)(cr_keyed *);
} core_calls;

static const core_calls counted_core = {"counted", cr_limiter_new, cr_limiter_free, cr_keyed_open,
                                        cr_keyed_free};
static const core_calls uncounted_core = {"uncounted", nc_cr_limiter_new, nc_cr_limiter_free,
                                          nc_cr_keyed_open, nc_cr_keyed_free};

static bool nc_limiter_clock(void *ctx, size_t i)
{
    (void)i;
    bool allowed = false;
    nc_cr_limiter_allow(((cellrate_ctx *)ctx)->limiter, CR_CLOCK, 1, &allowed);
    return allowed;
}

static bool nc_keyed_int(void *ctx, size_t i)
{
    cellrate_ctx *c = ctx;
    uint64_t key = int_key(c->draws[i]);
    bool allowed = false;
    nc_cr_keyed_allow(c->keyed, &key, sizeof key, CR_CLOCK, 1, &allowed);
    return allowed;
}

/* The integer-key table of `core`, every key admitted once (its allow path,
 * whose burst keeps them all tracked). */
static cr_keyed *core_int_table(const core_calls *core, const config *cfg, const char *path)
{
    cr_limit limit = keyed_limit(NULL);
    cr_keyed *keyed;
    if (path)
        unlink(path);
    check_status(core->keyed_open(&keyed, &limit, (int64_t)cfg->keys, path, 0600, CR_CHANGE_APPLY),
                 "keyed_open");
    cellrate_ctx fill = {.keyed = keyed};
    for (size_t k = 0; k < cfg->keys; k++) {
        uint32_t draw = (uint32_t)k;
        fill.draws = &draw;
        if (!(core == &counted_core ? keyed_int : nc_keyed_int)(&fill, 0))
            check_status(CR_E_NOMEM, "filling the table");
    }
    return keyed;
}

typedef struct {
    cellrate_ctx one, ints, half[2], shm;
    char path[64];
} core_cases;

static void core_cases_make(const core_calls *core, const config *cfg, uint32_t *draws_all,
                            uint32_t *const draws_half[2], core_cases *out)
{
    cr_limit allow = allow_limit(NULL);
    check_status(core->limiter_new(&out->one.limiter, &allow), "limiter_new");
    out->ints = (cellrate_ctx){.keyed = core_int_table(core, cfg, NULL), .draws = draws_all};
    for (int h = 0; h < 2; h++)
        out->half[h] = (cellrate_ctx){.keyed = out->ints.keyed, .draws = draws_half[h]};
    snprintf(out->path, sizeof out->path, "/dev/shm/cellrate-bench-%ld.%s", (long)getpid(),
             core->name);
    out->shm = (cellrate_ctx){.keyed = core_int_table(core, cfg, out->path), .draws = draws_all};
}

static void core_cases_free(const core_calls *core, core_cases *c)
{
    core->limiter_free(c->one.limiter);
    core->keyed_free(c->ints.keyed);
    core->keyed_free(c->shm.keyed);
    unlink(c->path);
}

#define COUNTERS_CASES(suffix, c, limiter_fn, keyed_fn)                                         \
    CASE1("c.counters.limiter.allow." suffix, limiter_fn, &(c).one, cfg->single_ops, "allow"),  \
        CASE1("c.counters.keyed.int.1t." suffix, keyed_fn, &(c).ints, cfg->keyed_ops, "allow"), \
        {.id = "c.counters.keyed.int.2t." suffix,                                               \
         .body = keyed_fn,                                                                      \
         .ctx = {&(c).half[0], &(c).half[1]},                                                   \
         .threads = 2,                                                                          \
         .ops = cfg->keyed_ops,                                                                 \
         .expect = "allow"},                                                                    \
        CASE1("c.counters.shared.keyed.int." suffix, keyed_fn, &(c).shm, cfg->keyed_ops, "allow")

static void counters_scenarios(const config *cfg)
{
    uint32_t *draws_all = make_draws(cfg->keyed_ops, 0, cfg->keys, SEED);
    size_t half = cfg->keys / 2;
    uint32_t *draws_half[2] = {make_draws(cfg->keyed_ops, 0, half, SEED + 1),
                               make_draws(cfg->keyed_ops, half, cfg->keys - half, SEED + 2)};
    core_cases counted, uncounted;
    core_cases_make(&counted_core, cfg, draws_all, draws_half, &counted);
    core_cases_make(&uncounted_core, cfg, draws_all, draws_half, &uncounted);
    /* each counted case next to its uncounted twin: a slow phase of the
     * machine falls on both */
    bench_case cases[] = {
        COUNTERS_CASES("counted", counted, limiter_clock, keyed_int),
        COUNTERS_CASES("uncounted", uncounted, nc_limiter_clock, nc_keyed_int),
    };
    bench_case paired[sizeof cases / sizeof cases[0]];
    const size_t n = sizeof cases / sizeof cases[0];
    for (size_t k = 0; k < n / 2; k++) {
        paired[2 * k] = cases[k];
        paired[2 * k + 1] = cases[n / 2 + k];
    }
    run_cases(cfg, "c.counters", paired, n);
    core_cases_free(&counted_core, &counted);
    core_cases_free(&uncounted_core, &uncounted);
    free(draws_all);
    free(draws_half[0]);
    free(draws_half[1]);
}
#endif

/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: bench_core run|limiter|keyed|live|mem|concurrency|catalogue|counters [--reps N] "
        "[--single-ops N] "
        "[--keyed-ops N] [--keys N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    config cfg = {.reps = 5, .single_ops = 2000000, .keyed_ops = 1000000, .keys = 1000000};
    if (argc < 2)
        usage();
    const char *mode = argv[1];
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc)
            usage();
        char *end;
        unsigned long long value = strtoull(argv[i + 1], &end, 10);
        if (*end || value == 0)
            usage();
        if (!strcmp(argv[i], "--reps") && value <= 63)
            cfg.reps = (int)value;
        else if (!strcmp(argv[i], "--single-ops"))
            cfg.single_ops = (size_t)value;
        else if (!strcmp(argv[i], "--keyed-ops"))
            cfg.keyed_ops = (size_t)value;
        else if (!strcmp(argv[i], "--keys") && value <= UINT32_MAX)
            cfg.keys = (size_t)value;
        else
            usage();
    }

    if (!strcmp(mode, "mem")) { /* a table without plans, then one with every
                                   second key on plan "pro", each in a fresh process */
        cr_plan_table plans = keyed_plans(NULL);
        mem_fresh("mem.cellrate.keyed", cfg.keys, NULL, 0);
        mem_fresh("mem.cellrate.keyed.plans", cfg.keys, &plans, 2);
        return 0;
    }
    if (!strcmp(mode, "limiter")) { /* the floors and the Limiter alone: a quick look */
        limiter_scenarios(&cfg);
        return 0;
    }
    if (!strcmp(mode, "live")) {
        uint32_t *draws = make_draws(cfg.keyed_ops, 0, cfg.keys, SEED);
        live_change_scenarios(&cfg);
        live_keyed_scenarios(&cfg, draws);
        free(draws);
        return 0;
    }
    if (!strcmp(mode, "keyed")) { /* the 1M-key tables, their floors, threads and processes */
        str_keys strs = make_str_keys(cfg.keys);
        uint32_t *draws_all = make_draws(cfg.keyed_ops, 0, cfg.keys, SEED);
        size_t half = cfg.keys / 2;
        uint32_t *draws_half[2] = {make_draws(cfg.keyed_ops, 0, half, SEED + 1),
                                   make_draws(cfg.keyed_ops, half, cfg.keys - half, SEED + 2)};
        keyed_scenarios(&cfg, &strs, draws_all, draws_half);
        free(draws_all);
        free(draws_half[0]);
        free(draws_half[1]);
        free(strs.text);
        free(strs.len);
        return 0;
    }
    if (!strcmp(mode, "concurrency")) {
        concurrency_scenarios(&cfg);
        return 0;
    }
    if (!strcmp(mode, "catalogue")) {
        catalogue_scenarios(&cfg);
        return 0;
    }
    if (!strcmp(mode, "counters")) {
#ifdef CR_BENCH_UNCOUNTED
        counters_scenarios(&cfg);
        return 0;
#else
        fprintf(stderr, "bench_core: counters: built without the uncounted core "
                        "(bench/run.sh builds it)\n");
        return 2;
#endif
    }
    if (strcmp(mode, "run") != 0)
        usage();

    printf("{\"id\": \"c.info\", \"lang\": \"c\", \"cellrate_version\": \"%s\", "
           "\"fast_clock_is_tsc\": %s}\n",
           cr_version(), cr_fast_clock_is_tsc() ? "true" : "false");
    limiter_scenarios(&cfg);
    live_change_scenarios(&cfg);
    catalogue_scenarios(&cfg);
    concurrency_scenarios(&cfg);

    str_keys strs = make_str_keys(cfg.keys);
    uint32_t *draws_all = make_draws(cfg.keyed_ops, 0, cfg.keys, SEED);
    size_t half = cfg.keys / 2;
    uint32_t *draws_half[2] = {make_draws(cfg.keyed_ops, 0, half, SEED + 1),
                               make_draws(cfg.keyed_ops, half, cfg.keys - half, SEED + 2)};
    keyed_scenarios(&cfg, &strs, draws_all, draws_half);
    live_keyed_scenarios(&cfg, draws_all);

    free(draws_all);
    free(draws_half[0]);
    free(draws_half[1]);
    free(strs.text);
    free(strs.len);
    return 0;
}
