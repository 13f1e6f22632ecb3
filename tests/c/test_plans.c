/*
 * Plans, a limit per key (cellrate/plans.h, docs/design/plans.md):
 *   plans.txt     through cr_keyed_check_plan (check and peek; allow as well,
 *                 on a second table), as gcra and as token_bucket: keys moving
 *                 between plans, plans edited live; plan tables refused or
 *                 taken; plan names found or not
 *   the rest      a table without plans answers plan 0 alone; a key's plan
 *                 costs no byte (28 per key); a shared region holds the plan
 *                 table: two openers decide a key under the same plans, carry
 *                 its units across plans and across a plan's live change,
 *                 take in names and changes another opener gives the region;
 *                 requests counted by plan and by class (cr_stats_by), exact
 *                 under threads, in process and in a region
 *
 * usage: test_plans [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static const char *status_name(cr_status status)
{
    return (unsigned)status < CR_STATUS_COUNT ? cr_status_name(status) : "(out of range)";
}

static cr_status make_limit(cr_limit *limit, const char *algorithm, int64_t emission_ns,
                            int64_t burst)
{
    cr_limit_args args = {.rate = 1.0,
                          .period_s = (double)emission_ns / 1e9,
                          .has_period = true,
                          .burst = burst,
                          .has_burst = strstr(algorithm, "window") == NULL,
                          .algorithm = algorithm,
                          .algorithm_len = strlen(algorithm)};
    return cr_limit_init(limit, &args);
}

typedef struct {
    cr_keyed *check, *allow; /* the second sees only allow() and peeks */
} variant;

static void variant_end(variant *v)
{
    cr_keyed_free(v->check);
    cr_keyed_free(v->allow);
    v->check = v->allow = NULL;
}

static int run_vectors(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plans.txt", dir);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    static const char *const algorithms[2] = {"gcra", "token_bucket"};
    variant v[2];
    memset(v, 0, sizeof v);
    cr_plan_table tables[2];
    cr_limit defaults[2], limits[2][CR_PLANS_MAX];
    cr_plan_arg args[2][CR_PLANS_MAX];
    char names[CR_PLANS_MAX][64];
    int nplans = 0, given = 0, ops = 0;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        char name[64], key[64], status_text[64];
        int64_t a, b, c, d, e, f, g;
        int n;
        if (sscanf(line, "table %d", &nplans) == 1) {
            given = 0;
            continue;
        }
        if (sscanf(line, "plan %63s %" SCNd64 " %" SCNd64, name, &a, &b) == 3) {
            snprintf(names[given], sizeof names[given], "%s", name);
            for (int i = 0; i < 2; i++) {
                cr_limit *limit = given == 0 ? &defaults[i] : &limits[i][given - 1];
                CHECK_EQ_I64(make_limit(limit, algorithms[i], a, b), CR_OK, "plans.txt:%d", lineno);
                if (given > 0)
                    args[i][given - 1] = (cr_plan_arg){names[given], strlen(names[given]), limit};
            }
            if (++given < nplans)
                continue;
            for (int i = 0; i < 2; i++) {
                variant_end(&v[i]);
                CHECK_EQ_I64(cr_plans_set(&tables[i], &defaults[i], args[i], (size_t)nplans - 1),
                             CR_OK, "plans.txt:%d", lineno);
                CHECK_EQ_I64(cr_keyed_open_plans(&v[i].check, NULL, &tables[i], 1000, NULL, 0,
                                                 CR_CHANGE_APPLY),
                             CR_OK, "plans.txt:%d", lineno);
                CHECK_EQ_I64(cr_keyed_open_plans(&v[i].allow, NULL, &tables[i], 1000, NULL, 0,
                                                 CR_CHANGE_APPLY),
                             CR_OK, "plans.txt:%d", lineno);
            }
            continue;
        }
        if (sscanf(line,
                   "op %63s %63s %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                   " %" SCNd64 " %" SCNd64,
                   key, name, &a, &b, &c, &d, &e, &f, &g) == 9) {
            ops++;
            for (int i = 0; i < 2; i++) {
                int32_t plan = -1;
                CHECK_EQ_I64(cr_plan_find(&tables[i], name, strlen(name), &plan), CR_OK,
                             "plans.txt:%d", lineno);
                cr_decision out;
                cr_status status = cr_keyed_check_plan(v[i].check, key, strlen(key), a, b, plan, -1,
                                                       c != 0, &out, NULL);
                CHECK_EQ_I64(status, CR_OK, "plans.txt:%d (%s)", lineno, algorithms[i]);
                CHECK_EQ_I64(out.allowed, d, "allowed, plans.txt:%d (%s)", lineno, algorithms[i]);
                CHECK_EQ_I64(out.remaining, e, "remaining, plans.txt:%d (%s)", lineno,
                             algorithms[i]);
                CHECK_EQ_I64(out.retry_after_ns, f, "retry_after, plans.txt:%d (%s)", lineno,
                             algorithms[i]);
                CHECK_EQ_I64(out.reset_after_ns, g, "reset_after, plans.txt:%d (%s)", lineno,
                             algorithms[i]);
                bool allowed = !d;
                status = cr_keyed_check_plan(v[i].allow, key, strlen(key), a, b, plan, -1, c != 0,
                                             NULL, &allowed);
                CHECK_EQ_I64(status, CR_OK, "plans.txt:%d", lineno);
                CHECK_EQ_I64(allowed, d, "allow(), plans.txt:%d (%s)", lineno, algorithms[i]);
            }
            continue;
        }
        if (sscanf(line, "edit %63s %" SCNd64 " %" SCNd64 " %" SCNd64, name, &a, &b, &c) == 4) {
            for (int i = 0; i < 2; i++) {
                int32_t plan = -1;
                cr_limit limit;
                CHECK_EQ_I64(cr_plan_find(&tables[i], name, strlen(name), &plan), CR_OK,
                             "plans.txt:%d", lineno);
                CHECK_EQ_I64(make_limit(&limit, algorithms[i], b, c), CR_OK, "plans.txt:%d",
                             lineno);
                CHECK_EQ_I64(cr_keyed_reconfigure_plan(v[i].check, plan, &limit, a), CR_OK,
                             "plans.txt:%d", lineno);
                CHECK_EQ_I64(cr_keyed_reconfigure_plan(v[i].allow, plan, &limit, a), CR_OK,
                             "plans.txt:%d", lineno);
                CHECK_EQ_I64(cr_keyed_plan_limit(v[i].check, plan)->emission_ns, b, "plans.txt:%d",
                             lineno);
            }
            continue;
        }
        if (sscanf(line, "check %63s %d%n", status_text, &given, &n) == 2) {
            cr_limit base, each[CR_PLANS_MAX + 2];
            cr_plan_arg table[CR_PLANS_MAX + 2];
            char table_names[CR_PLANS_MAX + 2][64];
            CHECK_EQ_I64(make_limit(&base, "gcra", 100000000, 10), CR_OK, "plans.txt:%d", lineno);
            const char *p = line + n;
            for (int j = 0; j < given && j < CR_PLANS_MAX + 2; j++) {
                char token[80], algorithm[64];
                int used;
                if (sscanf(p, " %79s %63s%n", token, algorithm, &used) != 2) {
                    fprintf(stderr, "plans.txt:%d: short check line\n", lineno);
                    exit(2);
                }
                p += used;
                const size_t len = vectors_unhex(token, table_names[j]);
                CHECK_EQ_I64(make_limit(&each[j], algorithm, 10000000, 20), CR_OK, "plans.txt:%d",
                             lineno);
                table[j] = (cr_plan_arg){table_names[j], len, &each[j]};
            }
            cr_plan_table made;
            memset(&made, 0x5a, sizeof made);
            cr_status status = cr_plans_set(&made, &base, given ? table : NULL, (size_t)given);
            CHECK_EQ_STR(status_name(status), status_text, "plans.txt:%d", lineno);
            if (status == CR_OK) {
                CHECK_EQ_I64(made.count, given + 1, "plans.txt:%d", lineno);
                CHECK_EQ_STR(made.names[0], "default", "plans.txt:%d", lineno);
                for (int j = 2; j < made.count; j++)
                    CHECK(strcmp(made.names[j - 1], made.names[j]) < 0, "sorted, plans.txt:%d",
                          lineno);
            }
            continue;
        }
        if (sscanf(line, "find %63s %63s", status_text, name) == 2) {
            char bytes[64];
            const size_t len = vectors_unhex(name, bytes);
            int32_t index = -1;
            cr_status status = cr_plan_find(&tables[0], bytes, len, &index);
            CHECK_EQ_STR(status_name(status), status_text, "find, plans.txt:%d", lineno);
            if (status == CR_OK)
                CHECK(len == strlen(tables[0].names[index]) &&
                          memcmp(tables[0].names[index], bytes, len) == 0,
                      "find, plans.txt:%d", lineno);
            continue;
        }
        int count, keyed, named;
        if (sscanf(line, "items %63s %d %d %d", status_text, &count, &keyed, &named) == 4) {
            const cr_status status = cr_plan_items((size_t)count, keyed != 0, named != 0);
            CHECK_EQ_STR(status_name(status), status_text, "items, plans.txt:%d", lineno);
            continue;
        }
        fprintf(stderr, "plans.txt:%d: cannot read vector line: %s\n", lineno, line);
        exit(2);
    }
    fclose(file);
    variant_end(&v[0]);
    variant_end(&v[1]);
    return ops;
}

/* A table without plans has "default" alone; plans stay in process. */
static void test_edges(void)
{
    cr_limit limit, pro;
    CHECK_EQ_I64(make_limit(&limit, "gcra", 100000000, 10), CR_OK, "limit");
    CHECK_EQ_I64(make_limit(&pro, "gcra", 10000000, 20), CR_OK, "limit");
    cr_keyed *keyed = NULL;
    CHECK_EQ_I64(cr_keyed_new(&keyed, &limit, 100), CR_OK, "plain table");
    cr_decision out;
    CHECK_EQ_I64(cr_keyed_check_plan(keyed, "k", 1, 0, 1, 0, -1, true, &out, NULL), CR_OK,
                 "plan 0 of a plain table");
    CHECK_EQ_I64(out.remaining, 9, "plan 0 is the table's limit");
    CHECK_EQ_I64(cr_keyed_check_plan(keyed, "k", 1, 0, 1, 1, -1, true, &out, NULL), CR_E_PLAN,
                 "plan 1 of a plain table");
    CHECK_EQ_I64(cr_keyed_check_plan(keyed, "k", 1, 0, 1, -1, -1, true, &out, NULL), CR_E_PLAN,
                 "plan -1");
    CHECK(cr_keyed_plans(keyed) == NULL, "no plans");
    CHECK(cr_keyed_plan_limit(keyed, 1) == NULL, "no plan 1");
    CHECK_EQ_I64(cr_keyed_reconfigure_plan(keyed, 1, &pro, 0), CR_E_PLAN, "reconfigure plan 1");
    cr_keyed_free(keyed);

    cr_plan_table table;
    const cr_plan_arg one = {"pro", 3, &pro};
    CHECK_EQ_I64(cr_plans_set(&table, &limit, &one, 1), CR_OK, "table");
    keyed = NULL;
    CHECK_EQ_I64(cr_keyed_open_plans(&keyed, NULL, &table, 100, NULL, 0, CR_CHANGE_APPLY), CR_OK,
                 "table");
    /* the algorithm cannot change live, for a plan either */
    cr_limit window;
    CHECK_EQ_I64(make_limit(&window, "fixed_window", 100000000, 10), CR_OK, "window");
    CHECK_EQ_I64(cr_keyed_reconfigure_plan(keyed, 1, &window, 0), CR_E_RECONFIGURE_ALGORITHM,
                 "reconfigure to a window");
    /* a key's plan costs no memory: the table is the size of one without plans */
    cr_keyed *plain = NULL;
    CHECK_EQ_I64(cr_keyed_new(&plain, &limit, 100), CR_OK, "plain");
    CHECK_EQ_I64((int64_t)cr_keyed_memory(keyed),
                 (int64_t)cr_keyed_memory(plain) + (int64_t)sizeof(cr_plan_table),
                 "memory of a table with plans: its plan table more");
    /* the same fingerprint under any plan: one slot per key */
    for (int i = 0; i < 50; i++) {
        char k[16];
        snprintf(k, sizeof k, "key%d", i);
        CHECK_EQ_I64(cr_keyed_check_plan(keyed, k, strlen(k), 0, 1, i % 2, -1, true, &out, NULL),
                     CR_OK, "decide");
        CHECK_EQ_I64(
            cr_keyed_check_plan(keyed, k, strlen(k), 0, 1, 1 - i % 2, -1, true, &out, NULL), CR_OK,
            "decide");
    }
    CHECK_EQ_I64((int64_t)cr_keyed_len(keyed), 50, "one slot per key whatever its plans");
    cr_keyed_free(plain);
    cr_keyed_free(keyed);
}

static int64_t decide(cr_keyed *keyed, const char *key, const char *plan, int64_t now_ns,
                      bool *allowed)
{
    int32_t index = -1;
    cr_decision out;
    CHECK_EQ_I64(cr_keyed_plan_find(keyed, plan, strlen(plan), &index), CR_OK, plan);
    CHECK_EQ_I64(
        cr_keyed_check_plan(keyed, key, strlen(key), now_ns, 1, index, -1, true, &out, allowed),
        CR_OK, "decide");
    return out.remaining;
}

/* Plans in a shared region: every opener decides a key under the same
 * plans, and its units carry across plans and plan changes whoever made
 * them. Two tables on one region stand for two processes (each has its own
 * chains of limits, as a process does). */
static void test_region(void)
{
    cr_limit limit, pro, pro_slower, gold;
    CHECK_EQ_I64(make_limit(&limit, "gcra", 100000000, 10), CR_OK, "limit");
    CHECK_EQ_I64(make_limit(&pro, "gcra", 10000000, 20), CR_OK, "pro");
    CHECK_EQ_I64(make_limit(&pro_slower, "gcra", 20000000, 20), CR_OK, "pro, slower");
    CHECK_EQ_I64(make_limit(&gold, "gcra", 50000000, 5), CR_OK, "gold");
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/cellrate-plans-%ld", (long)getpid());
    unlink(path);
    cr_plan_table table, table2, refused, many;
    const cr_plan_arg one = {"pro", 3, &pro};
    CHECK_EQ_I64(cr_plans_set(&table, &limit, &one, 1), CR_OK, "table");
    cr_keyed *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_EQ_I64(cr_keyed_open_plans(&a, NULL, &table, 100, path, 0600, CR_CHANGE_REFUSE), CR_OK,
                 "a region holds plans");
    CHECK_EQ_I64(cr_keyed_open_plans(&b, NULL, &table, 100, path, 0600, CR_CHANGE_REFUSE), CR_OK,
                 "the same table again");
    bool allowed;
    for (int i = 0; i < 6; i++)
        decide(a, "k", "default", 0, &allowed);
    /* 6 units used under default, then under pro in the other opener */
    CHECK_EQ_I64(decide(b, "k", "pro", 0, &allowed), 20 - 7, "units carried into pro");
    CHECK_EQ_I64(decide(a, "k", "pro", 0, &allowed), 20 - 8, "on pro in both openers");
    /* a plan changed live in one opener carries its keys for every opener */
    int32_t index;
    CHECK_EQ_I64(cr_keyed_plan_find(a, "pro", 3, &index), CR_OK, "find pro");
    CHECK_EQ_I64(cr_keyed_reconfigure_plan(a, index, &pro_slower, 0), CR_OK, "change pro");
    CHECK_EQ_I64(decide(b, "k", "pro", 0, &allowed), 20 - 9, "the change carried in the other");
    CHECK_EQ_I64(cr_keyed_plan_limit(b, index)->emission_ns, 20000000, "the other's pro follows");
    CHECK_EQ_I64(decide(b, "k", "default", 0, &allowed), 0, "back to default, carried");
    CHECK(allowed, "the last unit");
    decide(a, "k", "default", 0, &allowed);
    CHECK(!allowed, "nothing fresh");

    /* an opener with another table: a new name joins, a changed plan is live */
    const cr_plan_arg two[2] = {{"gold", 4, &gold}, {"pro", 3, &pro}};
    CHECK_EQ_I64(cr_plans_set(&table2, &limit, two, 2), CR_OK, "table 2");
    CHECK_EQ_I64(cr_keyed_open_plans(&c, NULL, &table2, 100, path, 0600, CR_CHANGE_REFUSE),
                 CR_E_SHARED_RATE, "another pro refused with on_change refuse");
    CHECK(c == NULL, "not opened");
    CHECK_EQ_I64(cr_keyed_plan_find(a, "gold", 4, &index), CR_E_PLAN, "nothing written");
    CHECK_EQ_I64(cr_keyed_open_plans(&c, NULL, &table2, 100, path, 0600, CR_CHANGE_APPLY), CR_OK,
                 "another table applied");
    CHECK_EQ_I64(cr_keyed_plans(c)->count, 3, "default, pro, gold");
    CHECK_EQ_I64(cr_keyed_plan_find(c, "gold", 4, &index), CR_OK, "gold");
    CHECK_EQ_I64(index, 2, "a new name takes the next index");
    for (int i = 0; i < 3; i++)
        decide(c, "g", "gold", 0, &allowed);
    CHECK_EQ_I64(decide(a, "g", "gold", 0, &allowed), 5 - 4, "a name another opener gave");
    CHECK_EQ_I64(decide(b, "g", "default", 0, &allowed), 10 - 5, "gold's units carried");
    CHECK_EQ_I64(decide(b, "p", "pro", 0, &allowed), 20 - 1, "pro");
    CHECK_EQ_I64(cr_keyed_plan_limit(b, 1)->emission_ns, 10000000, "the newest opener's pro");
    cr_keyed_free(c);
    c = NULL;

    /* an opener without plans keeps the region's: the names stay */
    cr_keyed *plain = NULL;
    CHECK_EQ_I64(cr_keyed_open(&plain, &limit, 100, path, 0600, CR_CHANGE_REFUSE), CR_OK, "plain");
    CHECK_EQ_I64(cr_keyed_plans(plain)->count, 3, "the region's plans");
    CHECK_EQ_I64(decide(plain, "q", "gold", 0, &allowed), 4, "decided under gold");
    cr_keyed_free(plain);

    /* 16 plans at most, every name ever given counted */
    cr_plan_arg args[14];
    char names[14][16];
    for (int i = 0; i < 14; i++) {
        snprintf(names[i], sizeof names[i], "p%02d", i);
        args[i] = (cr_plan_arg){names[i], strlen(names[i]), &pro};
    }
    CHECK_EQ_I64(cr_plans_set(&many, &limit, args, 14), CR_OK, "14 plans");
    CHECK_EQ_I64(cr_keyed_open_plans(&d, NULL, &many, 100, path, 0600, CR_CHANGE_APPLY),
                 CR_E_SHARED_PLANS, "17 names");
    CHECK_EQ_I64(cr_plans_set(&refused, &limit, args, 13), CR_OK, "13 plans");
    CHECK_EQ_I64(cr_keyed_open_plans(&d, NULL, &refused, 100, path, 0600, CR_CHANGE_APPLY), CR_OK,
                 "16 names");
    CHECK_EQ_I64(cr_keyed_plans(d)->count, 16, "16");
    cr_keyed_free(d);
    cr_keyed_free(a);
    cr_keyed_free(b);
    unlink(path);
}

/* The row named `name` of `rows` (NULL: none). */
static const cr_stats_row *row_named(const cr_stats_row *rows, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

static void check_row(const cr_stats_row *rows, size_t count, const char *name, uint64_t admitted,
                      uint64_t refused, const char *what)
{
    const cr_stats_row *row = row_named(rows, count, name);
    if (!CHECK(row != NULL, "%s: a row for %s", what, name))
        return;
    CHECK_EQ_I64((int64_t)row->admitted, (int64_t)admitted, "%s: %s admitted", what, name);
    CHECK_EQ_I64((int64_t)row->refused, (int64_t)refused, "%s: %s refused", what, name);
}

/* One thread's decisions: `n` under `plan` in class `priority` (-1: none)
 * on 50 keys of its own, at one instant; what it was told, counted. */
typedef struct {
    cr_keyed *keyed;
    int id;
    int32_t plan, priority;
    int n;
    uint64_t admitted, refused;
} counting;

static void *count_decisions(void *arg)
{
    counting *c = arg;
    char key[32];
    for (int i = 0; i < c->n; i++) {
        bool allowed = false;
        snprintf(key, sizeof key, "t%d-%d", c->id, i % 50);
        if (cr_keyed_check_plan(c->keyed, key, strlen(key), 0, 1, c->plan, c->priority, true, NULL,
                                &allowed) != CR_OK)
            continue; /* counted nowhere: the sums below then differ */
        allowed ? c->admitted++ : c->refused++;
    }
    return NULL;
}

/* Threads on `tables` (a thread on each in turn), 2 on each plan of "default"
 * and "pro", 2 more on "pro" in class "bulk": every request counted once, in
 * its plan's row and its class's (no class: "critical", reserve 0). */
static void count_in_threads(cr_keyed **tables, int ntables, const char *what)
{
    enum { THREADS = 6 };
    counting work[THREADS];
    pthread_t threads[THREADS];
    int32_t pro, bulk;
    CHECK_EQ_I64(cr_keyed_plan_find(tables[0], "pro", 3, &pro), CR_OK, "pro");
    CHECK_EQ_I64(cr_priority_find(cr_keyed_limit(tables[0]), "bulk", 4, &bulk), CR_OK, "bulk");
    for (int t = 0; t < THREADS; t++) {
        work[t] = (counting){
            tables[t % ntables], t, t < 2 ? CR_PLAN_DEFAULT : pro, t < 4 ? -1 : bulk, 3000, 0, 0};
        CHECK(pthread_create(&threads[t], NULL, count_decisions, &work[t]) == 0, "thread");
    }
    uint64_t plan_counts[2][2] = {{0}}, bulk_counts[2] = {0}, plain[2] = {0};
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        plan_counts[t >= 2][0] += work[t].admitted;
        plan_counts[t >= 2][1] += work[t].refused;
        (t >= 4 ? bulk_counts : plain)[0] += work[t].admitted;
        (t >= 4 ? bulk_counts : plain)[1] += work[t].refused;
    }
    /* at one instant each key admits its plan's burst (bulk: less), once */
    CHECK_EQ_I64((int64_t)plan_counts[0][0], 2 * 50 * 10, "%s: default's bursts", what);
    for (int i = 0; i < ntables; i++) {
        cr_stats_by by;
        cr_keyed_stats_by(tables[i], &by);
        CHECK_EQ_I64((int64_t)by.nplans, 2, "%s: two plans", what);
        check_row(by.plans, by.nplans, "default", plan_counts[0][0], plan_counts[0][1], what);
        check_row(by.plans, by.nplans, "pro", plan_counts[1][0], plan_counts[1][1], what);
        check_row(by.priorities, by.npriorities, "bulk", bulk_counts[0], bulk_counts[1], what);
        check_row(by.priorities, by.npriorities, "critical", plain[0], plain[1], what);
        cr_stats stats;
        cr_keyed_stats(tables[i], &stats);
        CHECK_EQ_I64((int64_t)stats.admitted, (int64_t)(plan_counts[0][0] + plan_counts[1][0]),
                     "%s: the sum is the table's", what);
    }
}

static void test_counted_by_plan_and_class(void)
{
    cr_limit limit, pro;
    CHECK_EQ_I64(make_limit(&limit, "gcra", 100000000, 10), CR_OK, "limit");
    CHECK_EQ_I64(make_limit(&pro, "gcra", 10000000, 20), CR_OK, "pro");
    const cr_priority_arg classes[2] = {{"critical", 8, 0.0}, {"bulk", 4, 0.5}};
    CHECK_EQ_I64(cr_priorities_set(&limit, classes, 2), CR_OK, "classes");
    cr_plan_table table;
    const cr_plan_arg one = {"pro", 3, &pro};
    CHECK_EQ_I64(cr_plans_set(&table, &limit, &one, 1), CR_OK, "table");

    /* a table without plans or classes has no rows */
    cr_limit bare;
    CHECK_EQ_I64(make_limit(&bare, "gcra", 100000000, 10), CR_OK, "bare");
    cr_keyed *plain = NULL;
    CHECK_EQ_I64(cr_keyed_open(&plain, &bare, 100, NULL, 0, CR_CHANGE_APPLY), CR_OK, "plain");
    bool allowed;
    cr_keyed_allow(plain, "k", 1, 0, 1, &allowed);
    cr_stats_by by;
    cr_keyed_stats_by(plain, &by);
    CHECK(by.nplans == 0 && by.npriorities == 0, "no rows without plans or classes");
    cr_keyed_free(plain);

    /* counted: N admissions under pro, M refusals in bulk, a dry run's moved */
    cr_keyed *keyed = NULL;
    CHECK_EQ_I64(cr_keyed_open_plans(&keyed, NULL, &table, 1000, NULL, 0, CR_CHANGE_APPLY), CR_OK,
                 "in process");
    int32_t bulk;
    CHECK_EQ_I64(cr_priority_find(cr_keyed_limit(keyed), "bulk", 4, &bulk), CR_OK, "bulk");
    for (int i = 0; i < 7; i++)
        decide(keyed, "a", "pro", 0, &allowed);
    for (int i = 0; i < 10; i++) /* bulk spends half the burst, then is refused */
        cr_keyed_check_plan(keyed, "b", 1, 0, 1, CR_PLAN_DEFAULT, bulk, true, NULL, &allowed);
    cr_keyed_would_refuse(keyed, 1, CR_PLAN_DEFAULT, bulk); /* the last let through */
    cr_decision peek;
    cr_keyed_check_plan(keyed, "c", 1, 0, 1, 1, -1, false, &peek, &allowed); /* counts nothing */
    cr_keyed_stats_by(keyed, &by);
    const cr_stats_row *b = row_named(by.priorities, by.npriorities, "bulk");
    CHECK(b != NULL && b->admitted + b->refused == 9 && b->refused > 0,
          "bulk: 10 less the dry run");
    const uint64_t bulk_admitted = b ? b->admitted : 0;
    check_row(by.plans, by.nplans, "pro", 7, 0, "in process");
    check_row(by.plans, by.nplans, "default", bulk_admitted, 9 - bulk_admitted, "in process");
    check_row(by.priorities, by.npriorities, "critical", 7, 0, "no class: critical");
    CHECK_EQ_I64(cr_keyed_reset_stats(keyed), CR_OK, "reset");
    cr_keyed_stats_by(keyed, &by);
    check_row(by.plans, by.nplans, "pro", 0, 0, "reset");
    check_row(by.priorities, by.npriorities, "bulk", 0, 0, "reset");
    count_in_threads(&keyed, 1, "threads");
    cr_keyed_free(keyed);

    /* a region: two openers (two processes' lanes), each reading every one's */
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/cellrate-plancounts-%ld", (long)getpid());
    unlink(path);
    cr_keyed *openers[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        CHECK_EQ_I64(
            cr_keyed_open_plans(&openers[i], NULL, &table, 1000, path, 0600, CR_CHANGE_REFUSE),
            CR_OK, "opener");
    count_in_threads(openers, 2, "region");
    cr_keyed_free(openers[0]);
    cr_keyed_free(openers[1]);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    const int ops = run_vectors(dir);
    CHECK(ops > 900, "plans.txt holds %d ops", ops);
    test_edges();
    test_region();
    test_counted_by_plan_and_class();
    printf("plans: %d ops x 3 entry points x 2 algorithms\n", ops);
    return check_summary("test_plans");
}
