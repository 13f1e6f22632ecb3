/* The penalty box (docs/design.md §15): tests/vectors/penalty.txt through
 * cr_penalty_init, cr_penalty_refused and the stores of this process (check
 * and allow, a limiter and a keyed table); then what the vectors cannot say. */
#include "check.h"

#include <errno.h>
#include <stdlib.h>
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

/* Windows hold a ban by filling their windows; a region refuses a penalty. */
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

    char path[128];
    snprintf(path, sizeof path, "/dev/shm/cellrate-penalty-%ld", (long)getpid());
    const cr_limit limit = gcra(10, 10, NULL);
    cr_keyed *keyed;
    CHECK(cr_limiter_open(&limiter, &limit, path, 0600, CR_CHANGE_APPLY) == CR_OK, "region");
    CHECK_EQ_I64(cr_limiter_set_penalty(limiter, &penalty), CR_E_PENALTY_STORE, "region");
    cr_limiter_free(limiter);
    unlink(path);
    CHECK(cr_keyed_open(&keyed, &limit, 16, path, 0600, CR_CHANGE_APPLY) == CR_OK, "region");
    CHECK_EQ_I64(cr_keyed_set_penalty(keyed, &penalty), CR_E_PENALTY_STORE, "region");
    cr_keyed_free(keyed);
    unlink(path);
    CHECK_EQ_STR(cr_status_param(CR_E_PENALTY_BAN), "ban", "the parameter");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    const int ops = run_vectors(dir);
    CHECK(ops > 100, "penalty.txt holds %d ops", ops);
    test_keys_apart();
    test_windows_and_regions();
    printf("penalty: %d vector lines\n", ops);
    return check_summary("test_penalty");
}
