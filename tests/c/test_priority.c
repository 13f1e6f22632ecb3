/*
 * Priorities inside one limit (cellrate/priority.h, docs/design/priorities.md):
 *   priorities.txt  through cr_decide_priority, cr_limiter_check_priority (check,
 *                   peek, allow), cr_keyed_check_priority and a shared region's
 *                   limiter, as gcra and as token_bucket; the reserve rounding;
 *                   class tables refused or taken; class names found or not
 *   under overload  threads, and processes on a shared region, count every
 *                   admission per class: the low class is refused at its reserve
 *                   while the high one still gets the rest, exactly
 *   live changes    keep the classes; a region refuses an opener with others
 *
 * usage: test_priority [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *status_name(cr_status status)
{
    return (unsigned)status < CR_STATUS_COUNT ? cr_status_name(status) : "(out of range)";
}

static char region_dir[64];

static const char *region_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", region_dir, name);
    return path;
}

/* A limit of emission T and `burst` with `count` classes. */
static cr_status make_limit(cr_limit *limit, const char *algorithm, int64_t emission_ns,
                            int64_t burst, const cr_priority_arg *classes, size_t count)
{
    cr_limit_args args = {.rate = 1.0,
                          .period_s = (double)emission_ns / 1e9,
                          .has_period = true,
                          .burst = burst,
                          .has_burst = true,
                          .algorithm = algorithm,
                          .algorithm_len = strlen(algorithm),
                          .priorities = classes,
                          .npriorities = count,
                          .has_priorities = true};
    return cr_limit_init(limit, &args);
}

/* ------------------------------------------------------------------------ */
/* priorities.txt                                                            */

typedef struct {
    cr_limit limit;
    cr_limiter *limiter, *allow_limiter, *shared;
    cr_keyed *keyed;
    int64_t state;
} variant;

static void variant_end(variant *v)
{
    cr_limiter_free(v->limiter);
    cr_limiter_free(v->allow_limiter);
    cr_limiter_free(v->shared);
    cr_keyed_free(v->keyed);
    memset(v, 0, sizeof *v);
}

static void compare(const char *via, int lineno, const cr_decision *got, int allowed,
                    int64_t remaining, int64_t retry, int64_t reset)
{
    CHECK_EQ_I64(got->allowed, allowed, "%s allowed, priorities.txt:%d", via, lineno);
    CHECK_EQ_I64(got->remaining, remaining, "%s remaining, priorities.txt:%d", via, lineno);
    CHECK_EQ_I64(got->retry_after_ns, retry, "%s retry_after, priorities.txt:%d", via, lineno);
    CHECK_EQ_I64(got->reset_after_ns, reset, "%s reset_after, priorities.txt:%d", via, lineno);
    CHECK_EQ_I64(got->limit, got->limit, "%s", via);
}

static int run_vectors(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/priorities.txt", dir);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    static const char *const algorithms[2] = {"gcra", "token_bucket"};
    variant v[2];
    memset(v, 0, sizeof v);
    cr_priority_arg classes[CR_PRIORITIES_MAX];
    char names[CR_PRIORITIES_MAX][64];
    int64_t want_reserve[CR_PRIORITIES_MAX];
    int64_t emission = 0, burst = 0;
    int nclasses = 0, given = 0, ops = 0;
    char line[4096];
    int lineno = 0;
    const char *key = "k";
    while (fgets(line, sizeof line, file)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        char word[32], name[64], status_text[64];
        double reserve;
        int64_t a, b, c, d, e, f, g, h;
        int n;
        if (sscanf(line, "limit %" SCNd64 " %" SCNd64 " %d", &emission, &burst, &nclasses) == 3) {
            given = 0;
            continue;
        }
        if (sscanf(line, "class %63s %lf %" SCNd64, name, &reserve, &a) == 3) {
            snprintf(names[given], sizeof names[given], "%s", name);
            classes[given] = (cr_priority_arg){names[given], strlen(names[given]), reserve};
            want_reserve[given++] = a;
            if (given < nclasses)
                continue;
            for (int i = 0; i < 2; i++) {
                variant_end(&v[i]);
                /* the classes given in reverse: the limit sorts them */
                cr_priority_arg reversed[CR_PRIORITIES_MAX];
                for (int j = 0; j < given; j++)
                    reversed[j] = classes[given - 1 - j];
                cr_status status = make_limit(&v[i].limit, algorithms[i], emission, burst, reversed,
                                              (size_t)given);
                CHECK_EQ_STR(status_name(status), "OK", "limit, priorities.txt:%d", lineno);
                CHECK_EQ_I64(v[i].limit.emission_ns, emission, "T, priorities.txt:%d", lineno);
                CHECK_EQ_I64(v[i].limit.npriorities, given, "classes, priorities.txt:%d", lineno);
                for (int j = 0; j < given; j++) {
                    CHECK_EQ_STR(v[i].limit.priorities[j].name, names[j],
                                 "class order, priorities.txt:%d", lineno);
                    CHECK_EQ_I64(v[i].limit.priorities[j].reserve_ns, want_reserve[j],
                                 "reserve_ns of %s, priorities.txt:%d", names[j], lineno);
                }
                cr_status made = cr_limiter_new(&v[i].limiter, &v[i].limit);
                made = made == CR_OK ? cr_limiter_new(&v[i].allow_limiter, &v[i].limit) : made;
                made = made == CR_OK ? cr_keyed_new(&v[i].keyed, &v[i].limit, 64) : made;
                unlink(region_path("vectors"));
                made = made == CR_OK
                           ? cr_limiter_open(&v[i].shared, &v[i].limit, region_path("vectors"),
                                             0600, CR_CHANGE_APPLY)
                           : made;
                if (made != CR_OK) {
                    fprintf(stderr, "priorities.txt:%d: cannot make stores: %s\n", lineno,
                            cr_strerror(made));
                    exit(2);
                }
            }
            continue;
        }
        if (sscanf(line,
                   "op %63s %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                   " %" SCNd64 " %" SCNd64,
                   name, &a, &b, &c, &d, &e, &f, &g, &h) == 9) {
            const int64_t now = a, cost = b, commit = c, allowed = d, remaining = e, retry = f,
                          reset = g, after = h;
            for (int i = 0; i < 2; i++) {
                int32_t index = -1;
                cr_status status = cr_priority_find(&v[i].limit, name, strlen(name), &index);
                CHECK_EQ_STR(status_name(status), "OK", "find %s, priorities.txt:%d", name, lineno);
                cr_decision got;
                int64_t next = -7;
                status = cr_decide_priority(&v[i].limit, index, v[i].state, now, cost, &next, &got);
                CHECK_EQ_STR(status_name(status), "OK", "cr_decide_priority, priorities.txt:%d",
                             lineno);
                compare("cr_decide_priority", lineno, &got, (int)allowed, remaining, retry, reset);
                CHECK_EQ_I64(got.limit, burst, "limit, priorities.txt:%d", lineno);
                if (commit)
                    v[i].state = next;
                CHECK_EQ_I64(v[i].state, after, "state, priorities.txt:%d", lineno);
                bool ok = !allowed;
                status = cr_limiter_check_priority(v[i].limiter, now, cost, index, commit != 0,
                                                   &got, &ok);
                CHECK(status == CR_OK && ok == (allowed != 0), "limiter, priorities.txt:%d",
                      lineno);
                compare(algorithms[i], lineno, &got, (int)allowed, remaining, retry, reset);
                status = cr_keyed_check_priority(v[i].keyed, key, 1, now, cost, index, commit != 0,
                                                 &got, &ok);
                CHECK(status == CR_OK, "keyed, priorities.txt:%d", lineno);
                compare("keyed", lineno, &got, (int)allowed, remaining, retry, reset);
                status = cr_limiter_check_priority(v[i].shared, now, cost, index, commit != 0, &got,
                                                   &ok);
                CHECK(status == CR_OK, "shared, priorities.txt:%d", lineno);
                compare("shared", lineno, &got, (int)allowed, remaining, retry, reset);
                ok = !allowed;
                if (commit) /* allow(): the verdict alone */
                    status = cr_limiter_allow_priority(v[i].allow_limiter, now, cost, index, &ok);
                else
                    status = cr_limiter_check_priority(v[i].allow_limiter, now, cost, index, false,
                                                       &got, &ok);
                CHECK(status == CR_OK && ok == (allowed != 0), "allow, priorities.txt:%d", lineno);
            }
            ops++;
            continue;
        }
        if (sscanf(line, "reserve %" SCNd64 " %lf %" SCNd64, &a, &reserve, &b) == 3) {
            CHECK_EQ_I64(cr_priority_reserve_ns(a, reserve), b, "priorities.txt:%d", lineno);
            continue;
        }
        if (sscanf(line, "table %31s %63s %d%n", word, status_text, &given, &n) == 3) {
            cr_priority_arg table[CR_PRIORITIES_MAX + 2];
            char table_names[CR_PRIORITIES_MAX + 2][64];
            const char *p = line + n;
            int count = given;
            for (int j = 0; j < count; j++) {
                char token[80], number[64];
                int used;
                if (sscanf(p, " %79s %63s%n", token, number, &used) != 2) {
                    fprintf(stderr, "priorities.txt:%d: bad table\n", lineno);
                    exit(2);
                }
                p += used;
                const size_t len = vectors_unhex(token, table_names[j]);
                table[j] = (cr_priority_arg){table_names[j], len, strtod(number, NULL)};
            }
            cr_limit limit;
            cr_status status = make_limit(&limit, word, 100000000, 10, table, (size_t)count);
            if (strstr(word, "window") || strcmp(word, "calendar") == 0) {
                /* a window takes no burst: a rate of 10 per second (calendar: per day) */
                const bool calendar = strcmp(word, "calendar") == 0;
                cr_limit_args args = {.rate = 10,
                                      .rate_text = calendar ? "10/day" : NULL,
                                      .rate_text_len = calendar ? 6 : 0,
                                      .algorithm = word,
                                      .algorithm_len = strlen(word),
                                      .priorities = table,
                                      .npriorities = (size_t)count,
                                      .has_priorities = true};
                status = cr_limit_init(&limit, &args);
            }
            CHECK_EQ_STR(status_name(status), status_text, "table, priorities.txt:%d", lineno);
            given = 0;
            continue;
        }
        if (sscanf(line, "find %63s %63s", status_text, name) == 2) {
            char bytes[64];
            const size_t len = vectors_unhex(name, bytes);
            int32_t index = -1;
            cr_status status = cr_priority_find(&v[0].limit, bytes, len, &index);
            CHECK_EQ_STR(status_name(status), status_text, "find, priorities.txt:%d", lineno);
            continue;
        }
        fprintf(stderr, "priorities.txt:%d: cannot read vector line: %s\n", lineno, line);
        exit(2);
    }
    fclose(file);
    variant_end(&v[0]);
    variant_end(&v[1]);
    unlink(region_path("vectors"));
    return ops;
}

/* ------------------------------------------------------------------------ */
/* Under overload: every admission counted, per class                        */

/* 10000 units, bulk holding back half: all at one instant, so the counts
 * are exact whatever the interleaving. */
#define OVERLOAD_BURST 10000
#define OVERLOAD_TRIES 12000
/* 100 s a unit: nothing comes back while the hammers run, however slow (TSan) */
#define OVERLOAD_EMISSION_NS INT64_C(100000000000)

static const cr_priority_arg overload_classes[] = {
    {"critical", 8, 0.0}, {"bulk", 4, 0.5}, {"normal", 6, 0.2}};

typedef struct {
    cr_limiter *limiter;
    int32_t priority;
    int64_t admitted;
    int64_t refused;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < OVERLOAD_TRIES; i++) {
        bool allowed = false;
        if (cr_limiter_check_priority(w->limiter, 0, 1, w->priority, true, NULL, &allowed) != CR_OK)
            abort();
        if (allowed)
            w->admitted++;
        else
            w->refused++;
    }
    return NULL;
}

static void test_overload_threads(void)
{
    cr_limit limit;
    CHECK(make_limit(&limit, "gcra", OVERLOAD_EMISSION_NS, OVERLOAD_BURST, overload_classes, 3) ==
              CR_OK,
          "limit");
    cr_limiter *limiter;
    CHECK(cr_limiter_new(&limiter, &limit) == CR_OK, "limiter");
    int32_t bulk, critical;
    CHECK(cr_priority_find(&limit, "bulk", 4, &bulk) == CR_OK, "bulk");
    CHECK(cr_priority_find(&limit, "critical", 8, &critical) == CR_OK, "critical");
    enum { THREADS = 6 };
    worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) /* four bulk threads, started first; two critical */
        workers[i] = (worker){limiter, i < 4 ? bulk : critical, 0, 0};
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, hammer, &workers[i]) != 0)
            abort();
    int64_t by_class[2] = {0, 0}, refused_bulk = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        by_class[i < 4 ? 0 : 1] += workers[i].admitted;
        if (i < 4)
            refused_bulk += workers[i].refused;
    }
    CHECK_EQ_I64(by_class[0] + by_class[1], OVERLOAD_BURST, "exactly the burst, all classes");
    CHECK(by_class[0] <= OVERLOAD_BURST / 2, "bulk spent %" PRId64 ", at most half", by_class[0]);
    CHECK(by_class[1] >= OVERLOAD_BURST / 2, "critical got %" PRId64 ", at least its half",
          by_class[1]);
    CHECK(refused_bulk >= 4 * OVERLOAD_TRIES - OVERLOAD_BURST / 2, "bulk refused %" PRId64,
          refused_bulk);
    cr_stats stats;
    cr_limiter_stats(limiter, &stats);
    CHECK_EQ_I64((int64_t)stats.admitted, OVERLOAD_BURST, "counters count class decisions");
    cr_limiter_free(limiter);
}

/* ThreadSanitizer emulates 16-byte atomics (a shared Limiter's {generation,
 * state} pair) with a lock of its own process, so under it a region's
 * cross-process counts mean nothing (as in test_catalogue.c): the processes'
 * overload runs in the plain and ASan builds. */
#if defined(__SANITIZE_THREAD__)
#define PAIRS_ATOMIC_ACROSS_PROCESSES 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PAIRS_ATOMIC_ACROSS_PROCESSES 0
#endif
#endif
#ifndef PAIRS_ATOMIC_ACROSS_PROCESSES
#define PAIRS_ATOMIC_ACROSS_PROCESSES 1
#endif

/* The same across processes on a shared region: each child counts its own
 * admissions and reports them through its exit... through a pipe. */
static void test_overload_processes(void)
{
    cr_limit limit;
    CHECK(make_limit(&limit, "gcra", OVERLOAD_EMISSION_NS, OVERLOAD_BURST, overload_classes, 3) ==
              CR_OK,
          "limit");
    const char *path = region_path("overload");
    unlink(path);
    cr_limiter *parent;
    CHECK(cr_limiter_open(&parent, &limit, path, 0600, CR_CHANGE_REFUSE) == CR_OK, "region");
    int32_t bulk, critical;
    cr_priority_find(&limit, "bulk", 4, &bulk);
    cr_priority_find(&limit, "critical", 8, &critical);
    enum { CHILDREN = 4 };
    int fds[CHILDREN][2];
    pid_t pids[CHILDREN];
    for (int c = 0; c < CHILDREN; c++) {
        if (pipe(fds[c]) != 0)
            abort();
        pids[c] = fork();
        if (pids[c] == 0) {
            cr_limiter *mine;
            if (cr_limiter_open(&mine, &limit, path, 0600, CR_CHANGE_REFUSE) != CR_OK)
                _exit(3);
            worker w = {mine, c < 3 ? bulk : critical, 0, 0};
            hammer(&w);
            if (write(fds[c][1], &w.admitted, sizeof w.admitted) != sizeof w.admitted)
                _exit(4);
            _exit(0);
        }
        close(fds[c][1]);
    }
    int64_t by_class[2] = {0, 0};
    for (int c = 0; c < CHILDREN; c++) {
        int64_t admitted = -1;
        int status = 0;
        CHECK(read(fds[c][0], &admitted, sizeof admitted) == sizeof admitted, "child %d", c);
        close(fds[c][0]);
        waitpid(pids[c], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d exited", c);
        by_class[c < 3 ? 0 : 1] += admitted;
    }
    CHECK_EQ_I64(by_class[0] + by_class[1], OVERLOAD_BURST, "processes: exactly the burst");
    CHECK(by_class[0] <= OVERLOAD_BURST / 2, "processes: bulk spent %" PRId64, by_class[0]);
    CHECK(by_class[1] >= OVERLOAD_BURST / 2, "processes: critical got %" PRId64, by_class[1]);
    cr_limiter_free(parent);
    unlink(path);
}

/* ------------------------------------------------------------------------ */
/* Live changes and regions                                                  */

static void test_changes_and_regions(void)
{
    cr_limit limit, other, plain, changed;
    CHECK(make_limit(&limit, "gcra", 100000000, 10, overload_classes, 3) == CR_OK, "limit");
    const cr_priority_arg fewer[] = {{"critical", 8, 0.0}, {"bulk", 4, 0.4}};
    CHECK(make_limit(&other, "gcra", 100000000, 10, fewer, 2) == CR_OK, "other");
    cr_limit_args args = {.rate = 10, .burst = 10, .has_burst = true};
    CHECK(cr_limit_init(&plain, &args) == CR_OK, "plain");
    args.burst = 20;
    CHECK(cr_limit_init(&changed, &args) == CR_OK, "changed");

    /* a live change keeps the classes, their reserves in the new tolerance */
    cr_limiter *limiter;
    cr_keyed *keyed;
    CHECK(cr_limiter_new(&limiter, &limit) == CR_OK, "limiter");
    CHECK(cr_keyed_new(&keyed, &limit, 16) == CR_OK, "keyed");
    CHECK(cr_limiter_reconfigure(limiter, &changed, 0) == CR_OK, "reconfigure");
    CHECK(cr_keyed_reconfigure(keyed, &changed, 0) == CR_OK, "reconfigure keyed");
    const cr_limit *now_limit = cr_limiter_limit(limiter);
    CHECK_EQ_I64(now_limit->npriorities, 3, "classes kept");
    CHECK_EQ_I64(now_limit->priorities[0].reserve_ns, 1000000000, "bulk: half of 2 s");
    CHECK_EQ_I64(cr_keyed_limit(keyed)->priorities[0].reserve_ns, 1000000000, "keyed too");
    int bulk_admitted = 0;
    for (int i = 0; i < 15; i++) {
        bool allowed = false;
        cr_limiter_check_priority(limiter, 0, 1, 0, true, NULL, &allowed);
        bulk_admitted += allowed;
    }
    CHECK_EQ_I64(bulk_admitted, 10, "bulk spends half of the new burst of 20");
    cr_decision d;
    bool allowed;
    CHECK_EQ_I64(cr_limiter_check_priority(limiter, 0, 1, 3, true, &d, &allowed), CR_E_PRIORITY,
                 "index out of range");
    CHECK_EQ_I64(cr_limiter_check_priority(limiter, 0, 1, -1, true, &d, &allowed), CR_E_PRIORITY,
                 "negative index");
    /* the allow() paths check the index as the checks do: an unsigned comparison */
    const int32_t bad[] = {3, -1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        allowed = true;
        CHECK_EQ_I64(cr_limiter_allow_priority(limiter, 0, 1, bad[i], &allowed), CR_E_PRIORITY,
                     "allow: index %d", bad[i]);
        CHECK_EQ_I64(cr_limiter_check_priority(limiter, 0, 1, bad[i], true, NULL, &allowed),
                     CR_E_PRIORITY, "check, out NULL: index %d", bad[i]);
        CHECK_EQ_I64(cr_keyed_check_priority(keyed, "k", 1, 0, 1, bad[i], true, NULL, &allowed),
                     CR_E_PRIORITY, "keyed, out NULL: index %d", bad[i]);
    }
    CHECK_EQ_I64(cr_limiter_allow_priority(limiter, -2, 1, 0, &allowed), CR_E_NOW,
                 "allow: bad now");
    CHECK_EQ_I64(cr_limiter_allow_priority(limiter, 0, -1, 0, &allowed), CR_E_COST,
                 "allow: bad cost");
    cr_stats stats;
    cr_stats_by by;
    cr_limiter_stats(limiter, &stats);
    cr_limiter_stats_by(limiter, &by);
    CHECK_EQ_I64(stats.admitted, 10, "admitted: bulk's 10");
    CHECK_EQ_I64(by.priorities[0].admitted, 10, "bulk's admissions, counted by class");
    CHECK_EQ_I64(by.priorities[0].refused, 5, "bulk's refusals, counted by class");
    CHECK_EQ_I64(cr_keyed_check_priority(keyed, "k", 1, -2, 1, 0, true, &d, &allowed), CR_E_NOW,
                 "bad now");
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);

    cr_limiter *none;
    CHECK(cr_limiter_new(&none, &plain) == CR_OK, "plain limiter");
    CHECK_EQ_I64(cr_limiter_check_priority(none, 0, 1, 0, true, &d, &allowed), CR_E_PRIORITY_NONE,
                 "no classes");
    CHECK_EQ_I64(cr_limiter_allow_priority(none, 0, 1, 0, &allowed), CR_E_PRIORITY_NONE,
                 "allow: no classes");
    int32_t index;
    CHECK_EQ_I64(cr_priority_find(&plain, "bulk", 4, &index), CR_E_PRIORITY_NONE, "find: none");
    cr_limiter_free(none);

    /* a region holds its classes: another table, or none, is refused */
    const char *path = region_path("classes");
    unlink(path);
    cr_limiter *first, *second = NULL;
    cr_keyed *table, *table2 = NULL;
    CHECK(cr_limiter_open(&first, &limit, path, 0600, CR_CHANGE_APPLY) == CR_OK, "region");
    CHECK_EQ_I64(cr_limiter_open(&second, &other, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_PRIORITIES, "other classes");
    CHECK_EQ_I64(cr_limiter_open(&second, &plain, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_PRIORITIES, "no classes");
    CHECK(cr_limiter_open(&second, &limit, path, 0600, CR_CHANGE_APPLY) == CR_OK, "the same");
    cr_limiter_free(second);
    cr_limiter_free(first);
    unlink(path);
    CHECK(cr_keyed_open(&table, &limit, 64, path, 0600, CR_CHANGE_APPLY) == CR_OK, "keyed region");
    CHECK_EQ_I64(cr_keyed_open(&table2, &other, 64, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_PRIORITIES, "keyed: other classes");
    cr_keyed_free(table);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    snprintf(region_dir, sizeof region_dir, "/dev/shm/cellrate-priority-%ld", (long)getpid());
    if (mkdir(region_dir, 0700) != 0) {
        fprintf(stderr, "cannot make %s: %s\n", region_dir, strerror(errno));
        return 2;
    }
    const int ops = run_vectors(dir);
    CHECK(ops > 900, "priorities.txt holds %d ops", ops);
    test_overload_threads();
    if (PAIRS_ATOMIC_ACROSS_PROCESSES)
        test_overload_processes();
    test_changes_and_regions();
    rmdir(region_dir);
    printf("priorities: %d ops x 5 entry points x 2 algorithms\n", ops);
    return check_summary("test_priority");
}
