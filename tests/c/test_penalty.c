/* The penalty box (docs/design.md §15): tests/vectors/penalty.txt through
 * cr_penalty_init, cr_penalty_refused and the stores of this process (check
 * and allow, a limiter and a keyed table); then what the vectors cannot say. */
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    cr_limiter *limiter, *allow_limiter;
    cr_keyed *keyed, *allow_keyed;
} stores;

static void stores_free(stores *s)
{
    cr_limiter_free(s->limiter);
    cr_limiter_free(s->allow_limiter);
    cr_keyed_free(s->keyed);
    cr_keyed_free(s->allow_keyed);
    memset(s, 0, sizeof *s);
}

static void stores_make(stores *s, int64_t emission, int64_t burst, const cr_penalty *penalty)
{
    stores_free(s);
    cr_limit_args args = {0};
    args.rate = 1;
    args.period_s = (double)emission / 1e9;
    args.has_period = true;
    args.burst = burst;
    args.has_burst = true;
    cr_limit limit;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "limit");
    CHECK_EQ_I64(limit.emission_ns, emission, "emission");
    CHECK(cr_limiter_new(&s->limiter, &limit) == CR_OK, "limiter");
    CHECK(cr_limiter_new(&s->allow_limiter, &limit) == CR_OK, "limiter");
    CHECK(cr_keyed_new(&s->keyed, &limit, 64) == CR_OK, "keyed");
    CHECK(cr_keyed_new(&s->allow_keyed, &limit, 64) == CR_OK, "keyed");
    CHECK_EQ_I64(cr_limiter_set_penalty(s->limiter, penalty), CR_OK, "penalty");
    CHECK_EQ_I64(cr_limiter_set_penalty(s->allow_limiter, penalty), CR_OK, "penalty");
    CHECK_EQ_I64(cr_keyed_set_penalty(s->keyed, penalty), CR_OK, "penalty");
    CHECK_EQ_I64(cr_keyed_set_penalty(s->allow_keyed, penalty), CR_OK, "penalty");
}

static void compare(const char *via, int lineno, const cr_decision *got, int64_t allowed,
                    int64_t remaining, int64_t retry, int64_t reset)
{
    CHECK_EQ_I64(got->allowed, allowed, "%s allowed, penalty.txt:%d", via, lineno);
    CHECK_EQ_I64(got->remaining, remaining, "%s remaining, penalty.txt:%d", via, lineno);
    CHECK_EQ_I64(got->retry_after_ns, retry, "%s retry_after, penalty.txt:%d", via, lineno);
    CHECK_EQ_I64(got->reset_after_ns, reset, "%s reset_after, penalty.txt:%d", via, lineno);
}

static int run_vectors(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/penalty.txt", dir);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    cr_penalty penalty = {0};
    cr_penalty_state state = {0};
    stores s = {0};
    char line[4096];
    int lineno = 0, ops = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        char after[128], ban_text[64], max_text[64], status_text[64];
        int64_t a, b, c, d, e, f;
        if (sscanf(line, "penalty %127s %63s %63s %63s", after, ban_text, max_text, status_text) ==
            4) {
            const bool has_max = strcmp(max_text, "-") != 0;
            cr_penalty made;
            const cr_status got = cr_penalty_init(&made, after, strlen(after),
                                                  strtod(ban_text, NULL),
                                                  has_max ? strtod(max_text, NULL) : 0, has_max);
            CHECK_EQ_STR(cr_status_name(got), status_text, "penalty.txt:%d", lineno);
            if (got == CR_OK && sscanf(line,
                                       "penalty %*s %*s %*s %*s %" SCNd64 " %" SCNd64 " %" SCNd64
                                       " %" SCNd64 " %" SCNd64,
                                       &a, &b, &c, &d, &e) == 5) {
                CHECK_EQ_I64(made.after, a, "after, penalty.txt:%d", lineno);
                CHECK_EQ_I64(made.within_ns, b, "within, penalty.txt:%d", lineno);
                CHECK_EQ_I64(made.strike_ns, c, "strike, penalty.txt:%d", lineno);
                CHECK_EQ_I64(made.ban_ns, d, "ban, penalty.txt:%d", lineno);
                CHECK_EQ_I64(made.max_ban_ns, e, "max_ban, penalty.txt:%d", lineno);
                penalty = made;
                memset(&state, 0, sizeof state);
            }
            ops++;
        } else if (sscanf(line,
                          "refused %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                          " %" SCNd64,
                          &a, &b, &c, &d, &e, &f) == 6) {
            bool started;
            CHECK_EQ_I64(cr_penalty_refused(&penalty, &state, a, &started), b,
                         "ban end, penalty.txt:%d", lineno);
            CHECK_EQ_I64(started, c, "started, penalty.txt:%d", lineno);
            CHECK_EQ_I64(state.strikes, d, "strikes, penalty.txt:%d", lineno);
            CHECK_EQ_I64(state.ban_end, e, "state's ban end, penalty.txt:%d", lineno);
            CHECK_EQ_I64(state.level, f, "level, penalty.txt:%d", lineno);
            ops++;
        } else if (sscanf(line, "limit %" SCNd64 " %" SCNd64, &a, &b) == 2) {
            stores_make(&s, a, b, &penalty);
        } else if (strcmp(line, "reset") == 0) {
            cr_limiter_reset(s.limiter);
            cr_limiter_reset(s.allow_limiter);
            cr_keyed_reset(s.keyed, "k", 1);
            cr_keyed_reset(s.allow_keyed, "k", 1);
        } else if (sscanf(line,
                          "check %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                          " %" SCNd64,
                          &a, &b, &c, &d, &e, &f) == 6) {
            cr_decision got;
            CHECK_EQ_I64(cr_limiter_check(s.limiter, a, b, true, &got), CR_OK, "check");
            compare("limiter", lineno, &got, c, d, e, f);
            CHECK_EQ_I64(cr_keyed_check(s.keyed, "k", 1, a, b, true, &got), CR_OK, "check");
            compare("keyed", lineno, &got, c, d, e, f);
            bool allowed;
            CHECK_EQ_I64(cr_limiter_allow(s.allow_limiter, a, b, &allowed), CR_OK, "allow");
            CHECK_EQ_I64(allowed, c, "limiter allow, penalty.txt:%d", lineno);
            CHECK_EQ_I64(cr_keyed_allow(s.allow_keyed, "k", 1, a, b, &allowed), CR_OK, "allow");
            CHECK_EQ_I64(allowed, c, "keyed allow, penalty.txt:%d", lineno);
            ops++;
        } else {
            CHECK(false, "penalty.txt:%d: cannot read '%s'", lineno, line);
        }
    }
    fclose(file);
    stores_free(&s);
    return ops;
}

static cr_limit gcra(double rate, int64_t burst, const char *algorithm)
{
    cr_limit_args args = {0};
    args.rate = rate;
    args.burst = burst;
    args.has_burst = algorithm == NULL;
    args.algorithm = algorithm;
    args.algorithm_len = algorithm ? strlen(algorithm) : 0;
    cr_limit limit;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "limit");
    return limit;
}

/* One key banned leaves the others alone; a peek counts no strike; bans count. */
static void test_keys_apart(void)
{
    cr_penalty penalty;
    CHECK_EQ_I64(cr_penalty_init(&penalty, "2/minute", 8, 10.0, 0, false), CR_OK, "penalty");
    const cr_limit limit = gcra(1, 1, NULL);
    cr_keyed *keyed;
    CHECK(cr_keyed_new(&keyed, &limit, 16) == CR_OK, "keyed");
    CHECK_EQ_I64(cr_keyed_set_penalty(keyed, &penalty), CR_OK, "penalty");
    cr_decision d;
    const int64_t S = 1000000000;
    CHECK(cr_keyed_check(keyed, "a", 1, S, 1, true, &d) == CR_OK && d.allowed, "a admitted");
    for (int i = 0; i < 5; i++)
        CHECK(cr_keyed_check(keyed, "a", 1, S, 1, false, &d) == CR_OK && !d.allowed, "a peeks");
    CHECK_EQ_I64(cr_keyed_bans(keyed), 0, "a peek is no strike");
    CHECK(cr_keyed_check(keyed, "a", 1, S, 1, true, &d) == CR_OK && !d.allowed, "a refused");
    CHECK(cr_keyed_check(keyed, "a", 1, S, 1, true, &d) == CR_OK && !d.allowed, "a banned");
    CHECK_EQ_I64(d.retry_after_ns, 10 * S, "to the ban's end");
    CHECK_EQ_I64(cr_keyed_bans(keyed), 1, "one ban");
    CHECK(cr_keyed_check(keyed, "b", 1, S, 1, true, &d) == CR_OK && d.allowed, "b admitted");
    CHECK(cr_keyed_check(keyed, "a", 1, 11 * S - 1, 1, true, &d) == CR_OK && !d.allowed,
          "a still banned");
    CHECK_EQ_I64(d.retry_after_ns, 1, "1 ns left");
    CHECK(cr_keyed_check(keyed, "a", 1, 11 * S, 1, true, &d) == CR_OK && d.allowed, "a out");
    /* a box as large as the table: beyond it, live keys are kept, new ones fail open */
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        bool allowed;
        CHECK(cr_keyed_allow(keyed, key, strlen(key), 20 * S, 1, &allowed) == CR_OK && allowed,
              "%s", key);
        CHECK(cr_keyed_allow(keyed, key, strlen(key), 20 * S, 1, &allowed) == CR_OK && !allowed,
              "%s", key);
    }
    cr_keyed_free(keyed);

    cr_limiter *plain;
    CHECK(cr_limiter_new(&plain, &limit) == CR_OK, "limiter");
    CHECK_EQ_I64(cr_limiter_bans(plain), 0, "no penalty, no bans");
    cr_limiter_free(plain);
}

/* Windows hold a ban by filling their windows. */
static void test_windows_and_regions(void)
{
    cr_penalty penalty;
    CHECK_EQ_I64(cr_penalty_init(&penalty, "1/minute", 8, 25.0, 0, false), CR_OK, "penalty");
    const cr_limit fixed = gcra(1, 0, "fixed_window"); /* 1 per second */
    cr_limiter *limiter;
    CHECK(cr_limiter_new(&limiter, &fixed) == CR_OK, "limiter");
    CHECK_EQ_I64(cr_limiter_set_penalty(limiter, &penalty), CR_OK, "penalty");
    const int64_t S = 1000000000, t0 = (int64_t)1700000000 * S;
    cr_decision d;
    CHECK(cr_limiter_check(limiter, t0, 1, true, &d) == CR_OK && d.allowed, "admitted");
    CHECK(cr_limiter_check(limiter, t0, 1, true, &d) == CR_OK && !d.allowed, "refused: a ban");
    CHECK_EQ_I64(d.retry_after_ns, 25 * S, "to the ban's end");
    CHECK(cr_limiter_check(limiter, t0 + 10 * S, 1, true, &d) == CR_OK && !d.allowed, "held");
    CHECK(cr_limiter_check(limiter, t0 + 25 * S, 1, true, &d) == CR_OK && d.allowed, "out");
    cr_limiter_free(limiter);

    CHECK_EQ_STR(cr_status_param(CR_E_PENALTY_BAN), "ban", "the parameter");
}

/* A store of the region at `path` (a limiter, or a keyed table of
 * `capacity` keys), with `penalty` unless NULL. */
static void open_region(const char *path, int64_t capacity, const cr_penalty *penalty,
                        cr_limiter **limiter, cr_keyed **keyed)
{
    const cr_limit limit = gcra(1, 1, NULL);
    *limiter = NULL;
    *keyed = NULL;
    if (capacity == 0) {
        CHECK(cr_limiter_open(limiter, &limit, path, 0600, CR_CHANGE_APPLY) == CR_OK, "region");
        if (penalty)
            CHECK_EQ_I64(cr_limiter_set_penalty(*limiter, penalty), CR_OK, "region's penalty");
    } else {
        CHECK(cr_keyed_open(keyed, &limit, capacity, path, 0600, CR_CHANGE_APPLY) == CR_OK,
              "region");
        if (penalty)
            CHECK_EQ_I64(cr_keyed_set_penalty(*keyed, penalty), CR_OK, "region's penalty");
    }
}

static cr_decision region_check(cr_limiter *limiter, cr_keyed *keyed, const char *key, int64_t now)
{
    cr_decision d;
    if (limiter)
        CHECK_EQ_I64(cr_limiter_check(limiter, now, 1, true, &d), CR_OK, "check");
    else
        CHECK_EQ_I64(cr_keyed_check(keyed, key, strlen(key), now, 1, true, &d), CR_OK, "check");
    return d;
}

/* Processes of one region count one key's refusals together: with all of
 * them at one instant (no strike leaks away), the ban starts at exactly the
 * `after`-th refusal in total, counted across the processes. */
#define HAMMERS 4
#define HAMMER_CHECKS 40
static void test_region_hammer(int64_t capacity)
{
    const int64_t S = 1000000000, t0 = 5000 * S;
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/cellrate-penalty-%ld", (long)getpid());
    unlink(path);
    cr_penalty penalty;
    CHECK_EQ_I64(cr_penalty_init(&penalty, "37/hour", 7, 100.0, 0, false), CR_OK, "penalty");
    cr_limiter *limiter;
    cr_keyed *keyed;
    open_region(path, capacity, &penalty, &limiter, &keyed); /* made before the fork */
    pid_t pids[HAMMERS];
    for (int p = 0; p < HAMMERS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0, "fork");
        if (pids[p] == 0) {
            /* a process of its own: the region opened again, without a penalty
             * (it follows the region's) */
            cr_limiter *mine;
            cr_keyed *mine_keyed;
            open_region(path, capacity, NULL, &mine, &mine_keyed);
            int strikes = 0, admitted = 0;
            for (int i = 0; i < HAMMER_CHECKS; i++) {
                const cr_decision d = region_check(mine, mine_keyed, "hammered", t0);
                admitted += d.allowed;
                strikes += !d.allowed && d.retry_after_ns <= S; /* the limit's, not a ban's */
                if (!d.allowed && d.retry_after_ns > S && d.retry_after_ns != 100 * S)
                    _exit(255); /* a ban reports its end */
            }
            cr_limiter_free(mine);
            cr_keyed_free(mine_keyed);
            _exit(strikes + 100 * admitted);
        }
    }
    int strikes = 0, admitted = 0;
    for (int p = 0; p < HAMMERS; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p] && WIFEXITED(status), "hammer");
        CHECK(WEXITSTATUS(status) != 255, "a ban's refusal at its end");
        strikes += WEXITSTATUS(status) % 100;
        admitted += WEXITSTATUS(status) / 100;
    }
    CHECK_EQ_I64(admitted, 1, "the burst, once across the processes");
    CHECK_EQ_I64(strikes, 36, "36 refusals before the ban, the 37th starts it (capacity %d)",
                 (int)capacity);
    const uint64_t bans = limiter ? cr_limiter_bans(limiter) : cr_keyed_bans(keyed);
    CHECK_EQ_I64(bans, 1, "one ban, counted in the region");
    cr_decision d = region_check(limiter, keyed, "hammered", t0 + 50 * S);
    CHECK(!d.allowed && d.retry_after_ns == 50 * S, "banned here too, to its end");
    CHECK(region_check(limiter, keyed, "hammered", t0 + 100 * S).allowed, "out at its end");
    /* a reset lets a banned key out at once */
    for (int i = 0; i < 37; i++)
        (void)region_check(limiter, keyed, "hammered", t0 + 100 * S);
    d = region_check(limiter, keyed, "hammered", t0 + 100 * S);
    CHECK(!d.allowed && d.retry_after_ns == 100 * S, "banned again");
    if (limiter)
        cr_limiter_reset(limiter);
    else
        cr_keyed_reset(keyed, "hammered", 8);
    CHECK(region_check(limiter, keyed, "hammered", t0 + 100 * S).allowed, "let out");
    CHECK(!region_check(limiter, keyed, "hammered", t0 + 100 * S).allowed, "its limit holds");
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);
    unlink(path);
}

/* An opener with another penalty changes the region's (the newest wins); a
 * box full of live keys counts no new key (fails open: the limit holds). */
static void test_region_change_and_full(void)
{
    const int64_t S = 1000000000, t0 = S; /* long past on the real clock */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/cellrate-penalty-full-%ld", (long)getpid());
    unlink(path);
    cr_penalty slow, quick;
    CHECK_EQ_I64(cr_penalty_init(&slow, "50/hour", 7, 100.0, 0, false), CR_OK, "penalty");
    CHECK_EQ_I64(cr_penalty_init(&quick, "1/hour", 6, 30.0, 0, false), CR_OK, "penalty");
    cr_limiter *unused;
    cr_keyed *first, *second, *plain;
    open_region(path, 16, &slow, &unused, &first);
    open_region(path, 16, NULL, &unused, &plain); /* no penalty given: the region's holds */
    open_region(path, 16, &quick, &unused, &second);
    /* 16 keys: the box holds 8 (a quarter, at least 8) */
    int banned = 0;
    for (int i = 0; i < 12; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK(region_check(NULL, plain, key, t0).allowed, "%s admitted", key);
        const cr_decision d = region_check(NULL, first, key, t0);
        CHECK(!d.allowed, "%s refused", key);
        banned += d.retry_after_ns == 30 * S; /* the newest penalty's ban, in first's decision */
        CHECK(d.retry_after_ns == 30 * S || d.retry_after_ns <= S, "%s: a ban or the limit", key);
    }
    CHECK_EQ_I64(banned, 8, "the box's 8 keys banned, the others fail open");
    CHECK_EQ_I64(cr_keyed_bans(plain), 8, "the bans, counted once for the region");
    cr_stats stats;
    cr_keyed_stats(first, &stats);
    CHECK_EQ_I64(stats.bans, 8, "the counters' bans: the region's");
    cr_penalty_entry entries[16];
    size_t count;
    CHECK_EQ_I64(cr_inspect_box(path, entries, 16, &count), CR_OK, "inspect the box");
    CHECK_EQ_I64(count, 0, "the clock is past t0: no key banned now");
    cr_region_info info;
    CHECK_EQ_I64(cr_inspect_region(path, &info), CR_OK, "inspect");
    CHECK(info.has_penalty && info.penalty.after == 1 && info.penalty.ban_ns == 30 * S,
          "the region's penalty: the newest");
    CHECK_EQ_I64(info.stats.bans, 8, "its bans");
    /* on the real clock: a key banned now is listed, with its first bytes */
    const char *long_key = "a-key-longer-than-the-thirty-two-bytes-kept";
    const int64_t now = cr_clock_ns();
    CHECK(region_check(NULL, plain, long_key, now).allowed, "admitted");
    const cr_decision d = region_check(NULL, second, long_key, now);
    CHECK(!d.allowed && d.retry_after_ns == 30 * S, "a long key banned in an idle key's slot");
    CHECK_EQ_I64(cr_inspect_box(path, entries, 16, &count), CR_OK, "inspect the box");
    CHECK_EQ_I64(count, 1, "one key banned now");
    CHECK_EQ_I64(entries[0].key_len, strlen(long_key), "its length");
    CHECK_EQ_I64(entries[0].key_kept, 32, "its first 32 bytes");
    CHECK(memcmp(entries[0].key, long_key, 32) == 0, "its first bytes");
    CHECK(entries[0].ban_left_ns > 0 && entries[0].ban_left_ns <= 30 * S, "its ban's rest");
    CHECK_EQ_I64(entries[0].level, 0, "a first ban");
    cr_keyed_free(first);
    cr_keyed_free(second);
    cr_keyed_free(plain);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    const int ops = run_vectors(dir);
    CHECK(ops > 100, "penalty.txt holds %d ops", ops);
    test_keys_apart();
    test_windows_and_regions();
    test_region_hammer(0);
    test_region_hammer(64);
    test_region_change_and_full();
    printf("penalty: %d vector lines\n", ops);
    return check_summary("test_penalty");
}
