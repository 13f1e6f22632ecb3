/*
 * Following a provider (cr_signal_read, cr_follow and the stores' follow):
 * tests/vectors/follow.txt replayed through the pure functions and through a
 * Limiter, a KeyedLimiter and a shared region of each, plus what the vectors
 * cannot say: NULL arguments, the realtime clock read for an HTTP-date, and
 * concurrent follows and decisions on one key.
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define SECOND INT64_C(1000000000)
#define MAX_FIELDS 32
#define MAX_LINE 8192

typedef struct {
    char bytes[MAX_FIELDS * 2][1024];
    cr_field fields[MAX_FIELDS];
    size_t count;
} field_set;

/* "=..." with %XX escapes into `out`; its length, or -1. */
static long decode(const char *token, char *out, size_t size)
{
    if (token[0] != '=')
        return -1;
    size_t n = 0;
    for (const char *p = token + 1; *p; p++) {
        if (n + 1 >= size)
            return -1;
        if (*p == '%') {
            unsigned byte;
            if (sscanf(p + 1, "%2X", &byte) != 1)
                return -1;
            out[n++] = (char)byte;
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = 0;
    return (long)n;
}

/* Reads `n` pairs of tokens from strtok into `set`. */
static bool read_fields(field_set *set, long n)
{
    if (n < 0 || n > MAX_FIELDS)
        return false;
    set->count = (size_t)n;
    for (long i = 0; i < n; i++) {
        char *name = strtok(NULL, " \n"), *value = strtok(NULL, " \n");
        if (!name || !value)
            return false;
        long name_len = decode(name, set->bytes[2 * i], sizeof set->bytes[0]);
        long value_len = decode(value, set->bytes[2 * i + 1], sizeof set->bytes[0]);
        if (name_len < 0 || value_len < 0)
            return false;
        set->fields[i].name = set->bytes[2 * i];
        set->fields[i].name_len = (size_t)name_len;
        set->fields[i].value = set->bytes[2 * i + 1];
        set->fields[i].value_len = (size_t)value_len;
    }
    return true;
}

static int64_t next_i64(void)
{
    const char *token = strtok(NULL, " \n");
    return token ? strtoll(token, NULL, 10) : INT64_MIN;
}

static cr_quota quota_named(const char *name)
{
    cr_quota quota = CR_QUOTA_REQUESTS;
    if (cr_parse_quota(name, strlen(name), &quota) != CR_OK)
        return (cr_quota)99; /* a quota the core refuses */
    return quota;
}

static cr_algorithm algorithm_named(const char *name)
{
    for (int a = CR_ALGORITHM_GCRA; a <= CR_ALGORITHM_SLIDING_WINDOW; a++)
        if (strcmp(cr_algorithm_name((cr_algorithm)a), name) == 0)
            return (cr_algorithm)a;
    fprintf(stderr, "unknown algorithm %s\n", name);
    exit(2);
}

/* One key of a scenario, kept five ways: the pure state, and four stores. */
typedef struct {
    cr_limit limit;
    int64_t state;
    cr_limiter *limiter, *shared_limiter;
    cr_keyed *keyed, *shared_keyed;
    char paths[2][64];
} scenario;

static void scenario_end(scenario *s)
{
    cr_limiter_free(s->limiter);
    cr_limiter_free(s->shared_limiter);
    cr_keyed_free(s->keyed);
    cr_keyed_free(s->shared_keyed);
    for (int i = 0; i < 2; i++)
        if (s->paths[i][0])
            unlink(s->paths[i]);
    memset(s, 0, sizeof *s);
}

static void scenario_start(scenario *s, const cr_limit *limit, int index)
{
    scenario_end(s);
    s->limit = *limit;
    s->state = 0;
    snprintf(s->paths[0], sizeof s->paths[0], "/dev/shm/cellrate-follow-%d-l%d", (int)getpid(),
             index);
    snprintf(s->paths[1], sizeof s->paths[1], "/dev/shm/cellrate-follow-%d-k%d", (int)getpid(),
             index);
    unlink(s->paths[0]);
    unlink(s->paths[1]);
    CHECK_EQ_I64(cr_limiter_new(&s->limiter, limit), CR_OK, "limiter");
    CHECK_EQ_I64(cr_keyed_new(&s->keyed, limit, 64), CR_OK, "keyed");
    CHECK_EQ_I64(cr_limiter_open(&s->shared_limiter, limit, s->paths[0], 0600, CR_CHANGE_APPLY),
                 CR_OK, "shared limiter");
    CHECK_EQ_I64(cr_keyed_open(&s->shared_keyed, limit, 64, s->paths[1], 0600, CR_CHANGE_APPLY),
                 CR_OK, "shared keyed");
}

#define KEY "the-key", 7

static void store_check(scenario *s, int lineno, int64_t now, int64_t cost, bool want)
{
    cr_decision d[4];
    cr_limiter_check(s->limiter, now, cost, true, &d[0]);
    cr_limiter_check(s->shared_limiter, now, cost, true, &d[1]);
    cr_keyed_check(s->keyed, KEY, now, cost, true, &d[2]);
    cr_keyed_check(s->shared_keyed, KEY, now, cost, true, &d[3]);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_I64(d[i].allowed, want, "line %d: store %d's check", lineno, i);
}

static void store_peek(scenario *s, int lineno, int64_t now, int64_t cost, const cr_decision *want)
{
    cr_decision d[4];
    cr_limiter_check(s->limiter, now, cost, false, &d[0]);
    cr_limiter_check(s->shared_limiter, now, cost, false, &d[1]);
    cr_keyed_check(s->keyed, KEY, now, cost, false, &d[2]);
    cr_keyed_check(s->shared_keyed, KEY, now, cost, false, &d[3]);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_I64(d[i].allowed, want->allowed, "line %d: store %d's peek", lineno, i);
        CHECK_EQ_I64(d[i].remaining, want->remaining, "line %d: store %d's remaining", lineno, i);
        CHECK_EQ_I64(d[i].retry_after_ns, want->retry_after_ns, "line %d: store %d", lineno, i);
        CHECK_EQ_I64(d[i].reset_after_ns, want->reset_after_ns, "line %d: store %d", lineno, i);
    }
}

static void store_follow(scenario *s, int lineno, int64_t now, const cr_signal *signal,
                         int64_t pending, double share, bool want)
{
    bool pulled[4];
    CHECK_EQ_I64(cr_limiter_follow(s->limiter, now, signal, pending, share, &pulled[0]), CR_OK,
                 "line %d", lineno);
    CHECK_EQ_I64(cr_limiter_follow(s->shared_limiter, now, signal, pending, share, &pulled[1]),
                 CR_OK, "line %d", lineno);
    CHECK_EQ_I64(
        cr_keyed_follow(s->keyed, KEY, now, CR_PLAN_DEFAULT, signal, pending, share, &pulled[2]),
        CR_OK, "line %d", lineno);
    CHECK_EQ_I64(cr_keyed_follow(s->shared_keyed, KEY, now, CR_PLAN_DEFAULT, signal, pending, share,
                                 &pulled[3]),
                 CR_OK, "line %d", lineno);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_I64(pulled[i], want, "line %d: store %d pulled", lineno, i);
}

static int run_vectors(const char *dir, int *signals, int *follows)
{
    char line[MAX_LINE];
    FILE *file = vectors_open(dir, "follow.txt");
    static field_set set;
    scenario s;
    memset(&s, 0, sizeof s);
    int lineno = 0, scenarios = 0;
    *signals = *follows = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *word = strtok(line, " \n");
        if (strcmp(word, "signal") == 0 || strcmp(word, "refused") == 0) {
            const bool refused = word[0] == 'r';
            const int64_t status = next_i64();
            const char *quota = strtok(NULL, " \n");
            const int64_t realtime = next_i64();
            if (!quota || !read_fields(&set, next_i64())) {
                CHECK(false, "line %d: cannot read", lineno);
                continue;
            }
            cr_signal signal;
            cr_status got = cr_signal_read(&signal, set.fields, set.count, status,
                                           quota_named(quota), realtime);
            if (refused) {
                const char *want = strtok(NULL, " \n");
                CHECK_EQ_STR(cr_status_name(got), want, "line %d", lineno);
                continue;
            }
            CHECK_EQ_I64(got, CR_OK, "line %d", lineno);
            const int64_t count = next_i64();
            CHECK_EQ_I64(signal.count, count, "line %d: bounds", lineno);
            for (int64_t i = 0; i < count && i < signal.count; i++) {
                const int64_t remaining = next_i64(), within = next_i64();
                CHECK_EQ_I64(signal.bound[i].remaining, remaining, "line %d: bound %d", lineno,
                             (int)i);
                CHECK_EQ_I64(signal.bound[i].within_ns, within, "line %d: bound %d", lineno,
                             (int)i);
            }
            (*signals)++;
        } else if (strcmp(word, "limit") == 0) {
            const char *name = strtok(NULL, " \n");
            const int64_t a = next_i64(), b = next_i64();
            /* as the faces build it: the vectors' limits derive exactly */
            const bool gcra = algorithm_named(name) == CR_ALGORITHM_GCRA;
            cr_limit_args args = {.rate = gcra ? 1.0 : (double)b,
                                  .period_s = (double)a / 1e9,
                                  .has_period = true,
                                  .burst = b,
                                  .has_burst = gcra,
                                  .algorithm = name,
                                  .algorithm_len = strlen(name)};
            cr_limit limit;
            CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "line %d", lineno);
            CHECK_EQ_I64(gcra ? limit.emission_ns : limit.tolerance_ns, a, "line %d", lineno);
            scenario_start(&s, &limit, scenarios++);
        } else if (strcmp(word, "check") == 0) {
            const int64_t now = next_i64(), cost = next_i64(), allowed = next_i64();
            const int64_t after = next_i64();
            cr_decision d;
            s.state = cr_decide(&s.limit, s.state, now, cost, &d);
            CHECK_EQ_I64(d.allowed, allowed, "line %d", lineno);
            CHECK_EQ_I64(s.state, after, "line %d: state", lineno);
            store_check(&s, lineno, now, cost, allowed);
        } else if (strcmp(word, "peek") == 0) {
            cr_decision want = {0}, d;
            const int64_t now = next_i64(), cost = next_i64();
            want.allowed = next_i64();
            want.remaining = next_i64();
            want.retry_after_ns = next_i64();
            want.reset_after_ns = next_i64();
            cr_decide(&s.limit, s.state, now, cost, &d);
            CHECK_EQ_I64(d.allowed, want.allowed, "line %d", lineno);
            CHECK_EQ_I64(d.remaining, want.remaining, "line %d", lineno);
            CHECK_EQ_I64(d.retry_after_ns, want.retry_after_ns, "line %d", lineno);
            CHECK_EQ_I64(d.reset_after_ns, want.reset_after_ns, "line %d", lineno);
            store_peek(&s, lineno, now, cost, &want);
        } else if (strcmp(word, "follow") == 0) {
            const int64_t now = next_i64(), status = next_i64();
            const char *quota = strtok(NULL, " \n");
            const int64_t pending = next_i64();
            const char *share_text = strtok(NULL, " \n");
            const double share = share_text ? strtod(share_text, NULL) : 0;
            if (!quota || !read_fields(&set, next_i64())) {
                CHECK(false, "line %d: cannot read", lineno);
                continue;
            }
            const int64_t pulled = next_i64(), after = next_i64();
            cr_signal signal;
            /* the realtime clock: no field of a follow holds an absolute time */
            CHECK_EQ_I64(cr_signal_read(&signal, set.fields, set.count, status, quota_named(quota),
                                        CR_CLOCK),
                         CR_OK, "line %d", lineno);
            const int64_t before = s.state;
            s.state = cr_follow(&s.limit, s.state, now, &signal, pending, share);
            CHECK_EQ_I64(s.state, after, "line %d: state", lineno);
            CHECK_EQ_I64(s.state != before, pulled, "line %d: pulled", lineno);
            store_follow(&s, lineno, now, &signal, pending, share, pulled);
            (*follows)++;
        } else if (strcmp(word, "retry") == 0) {
            const int64_t status = next_i64(), attempt = next_i64(), retries = next_i64();
            const int64_t backoff = next_i64(), cap = next_i64();
            const char *random_text = strtok(NULL, " \n");
            const uint64_t random = random_text ? strtoull(random_text, NULL, 10) : 0;
            const int64_t retry = next_i64(), wait = next_i64();
            int64_t got_wait;
            const bool got = cr_retry_wait(status, attempt, retries, backoff, cap, random,
                                           &got_wait);
            CHECK_EQ_I64(got, retry, "line %d", lineno);
            CHECK_EQ_I64(got_wait, wait, "line %d", lineno);
        } else {
            CHECK(false, "line %d: unknown line %s", lineno, word);
        }
    }
    scenario_end(&s);
    fclose(file);
    return lineno;
}

static cr_field field_of(const char *name, const char *value)
{
    cr_field field = {name, strlen(name), value, strlen(value)};
    return field;
}

static void test_arguments(void)
{
    cr_signal signal;
    cr_field fields[2] = {field_of("Retry-After", "5"), {NULL, 0, NULL, 0}};
    CHECK_EQ_I64(cr_signal_read(&signal, NULL, 0, 429, CR_QUOTA_REQUESTS, 0), CR_OK, "no fields");
    CHECK_EQ_I64(signal.count, 1, "a bare 429: nothing left now");
    CHECK_EQ_I64(cr_signal_read(&signal, NULL, 1, 0, CR_QUOTA_REQUESTS, 0), CR_E_HEADERS,
                 "NULL fields with a count");
    CHECK_EQ_I64(cr_signal_read(&signal, fields, 2, 429, CR_QUOTA_REQUESTS, 0), CR_OK,
                 "an empty field is no field");
    CHECK_EQ_I64(signal.count, 1, "Retry-After read");
    fields[1].name_len = 3;
    CHECK_EQ_I64(cr_signal_read(&signal, fields, 2, 429, CR_QUOTA_REQUESTS, 0), CR_E_HEADERS,
                 "a NULL name with a length");
    CHECK_EQ_I64(cr_signal_read(&signal, fields, 1, 429, CR_QUOTA_REQUESTS, -5), CR_E_NOW,
                 "a negative realtime");
    CHECK_EQ_I64(cr_signal_read(&signal, fields, 1, 429, (cr_quota)7, 0), CR_E_QUOTA, "quota");
    cr_quota quota;
    CHECK_EQ_I64(cr_parse_quota(NULL, 0, &quota), CR_OK, "NULL: requests");
    CHECK_EQ_I64(quota, CR_QUOTA_REQUESTS, "NULL: requests");
    CHECK_EQ_I64(cr_parse_quota("tokens", 6, &quota), CR_OK, "tokens");
    CHECK_EQ_I64(quota, CR_QUOTA_TOKENS, "tokens");
    CHECK_EQ_I64(cr_parse_quota("tokens!", 6, &quota), CR_OK, "the length given");
    CHECK_EQ_I64(cr_parse_quota("Tokens", 6, &quota), CR_E_QUOTA, "case matters");
    CHECK_EQ_STR(cr_quota_name((cr_quota)5), "", "out of range");
    CHECK_EQ_I64(cr_follow_check(-1, 1.0), CR_E_PENDING, "pending");
    CHECK_EQ_I64(cr_follow_check(0, 0.0), CR_E_SHARE, "share 0");
    CHECK_EQ_I64(cr_follow_check(0, 1.5), CR_E_SHARE, "share above 1");
    CHECK_EQ_I64(cr_follow_check(0, 0.0 / 0.0), CR_E_SHARE, "share NaN");
    CHECK_EQ_I64(cr_follow_check(0, 1e-300), CR_OK, "a tiny share");
    CHECK_EQ_I64(cr_retry_check(-1, 1, 1), CR_E_RETRIES, "retries");
    CHECK_EQ_I64(cr_retry_check(0, 0, 1), CR_E_BACKOFF, "backoff");
    CHECK_EQ_I64(cr_retry_check(0, 2, 1), CR_E_BACKOFF, "max_backoff below backoff");
    CHECK_EQ_I64(cr_retry_check(0, 1, 1), CR_OK, "retries 0");
    cr_limit limit = limit_of(100 * 1000000, 10);
    CHECK_EQ_I64(cr_follow(&limit, 5, 0, NULL, 0, 1.0), 5, "no signal: the state");
    cr_limiter *limiter;
    bool pulled;
    cr_limiter_new(&limiter, &limit);
    CHECK_EQ_I64(cr_limiter_follow(limiter, 0, &signal, -1, 1.0, &pulled), CR_E_PENDING, "store");
    CHECK_EQ_I64(cr_limiter_follow(limiter, 0, &signal, 0, 2.0, &pulled), CR_E_SHARE, "store");
    CHECK_EQ_I64(cr_limiter_follow(limiter, -7, &signal, 0, 1.0, &pulled), CR_E_NOW, "store");
    cr_limiter_free(limiter);
}

/* An HTTP-date read against the realtime clock (CR_CLOCK), and a signal's
 * hostile bounds (a caller's own) that cr_follow skips. */
static void test_realtime_clock(void)
{
    char date[64];
    const time_t later = (time_t)(cr_realtime_ns() / SECOND) + 120;
    struct tm tm;
    gmtime_r(&later, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cr_field field = field_of("Retry-After", date);
    cr_signal signal;
    CHECK_EQ_I64(cr_signal_read(&signal, &field, 1, 429, CR_QUOTA_REQUESTS, CR_CLOCK), CR_OK, "%s",
                 date);
    CHECK_EQ_I64(signal.count, 1, "%s", date);
    CHECK(signal.bound[0].within_ns > 110 * SECOND && signal.bound[0].within_ns <= 120 * SECOND,
          "within %" PRId64, signal.bound[0].within_ns);
    cr_limit limit = limit_of(100 * 1000000, 10);
    cr_signal hostile = {2, {{-1, 5}, {0, -5}}};
    CHECK_EQ_I64(cr_follow(&limit, 0, SECOND, &hostile, 0, 1.0), 0, "negative bounds skipped");
    cr_signal far = {1, {{0, INT64_MAX}}};
    CHECK_EQ_I64(cr_follow(&limit, 0, SECOND, &far, 0, 1.0), SECOND + 3600 * SECOND + 900 * 1000000,
                 "a bound past the cap is capped");
    cr_signal huge = {1, {{INT64_MAX, 0}}};
    CHECK_EQ_I64(cr_follow(&limit, 0, SECOND, &huge, 0, 1.0), 0, "a huge remaining: nothing");
}

/* Threads that follow and check one key at once (each on a clock of its
 * own): a follow never widens the limit, however they interleave. */
typedef struct {
    cr_limiter *limiter;
    cr_keyed *keyed;
    const cr_signal *signal;
    int64_t base;
    int admitted;
} worker_args;

static void *worker(void *arg)
{
    worker_args *w = arg;
    for (int i = 0; i < 20000; i++) {
        const int64_t now = w->base + i * 1000;
        bool pulled;
        cr_decision d;
        if (i % 3 == 0) {
            cr_limiter_follow(w->limiter, now, w->signal, 0, 1.0, &pulled);
            cr_keyed_follow(w->keyed, KEY, now, CR_PLAN_DEFAULT, w->signal, 0, 1.0, &pulled);
        }
        cr_limiter_check(w->limiter, now, 1, true, &d);
        w->admitted += d.allowed;
        cr_keyed_check(w->keyed, KEY, now, 1, true, &d);
        w->admitted += d.allowed;
    }
    return NULL;
}

static void test_threads(void)
{
    /* 1 unit per ms, burst 5, followed again and again with "2 left now": on
     * each store, at most those 2 and one unit per ms of the threads' clocks
     * (20 ms) are admitted, however the follows and checks interleave */
    cr_limit limit = limit_of(1000000, 5);
    cr_signal signal = {1, {{2, 0}}};
    cr_limiter *limiter;
    cr_keyed *keyed;
    cr_limiter_new(&limiter, &limit);
    cr_keyed_new(&keyed, &limit, 16);
    worker_args args[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_args){limiter, keyed, &signal, SECOND, 0};
        pthread_create(&threads[i], NULL, worker, &args[i]);
    }
    int admitted = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        admitted += args[i].admitted;
    }
    CHECK(admitted <= 2 * (2 + 20 + 1), "admitted %d", admitted);
    CHECK(admitted >= 2 * 2, "admitted %d: a follow leaves what it says is left", admitted);
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    int signals, follows;
    run_vectors(dir, &signals, &follows);
    CHECK(signals > 300, "follow.txt holds %d signals", signals);
    CHECK(follows > 100, "follow.txt holds %d follows", follows);
    printf("follow vectors: %d signals, %d follows (x 5: pure, limiter, keyed, shared both)\n",
           signals, follows);
    test_arguments();
    test_realtime_clock();
    test_threads();
    return check_summary("test_follow");
}
