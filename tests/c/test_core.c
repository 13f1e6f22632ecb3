/*
 * The C API one entry point at a time: bad arguments, status messages,
 * versions, time conversions, and the keyed table's bookkeeping (slots,
 * memory, eviction). The decision arithmetic itself is test_vectors.c's.
 */
#include "cellrate.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#define SECOND INT64_C(1000000000)
#define HOUR (3600 * SECOND)

/* A small deterministic generator (splitmix64) for keys and costs. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t next_random(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------ */

static void test_status_table(void)
{
    static const char *const params[] = {
#define CR_TEST_PARAM_(number, name, class, param, message) [number] = param,
        CR_STATUS_LIST(CR_TEST_PARAM_)
#undef CR_TEST_PARAM_
    };
    static const char *const names[] = {
#define CR_TEST_NAME_(number, name, class, param, message) [number] = #name,
        CR_STATUS_LIST(CR_TEST_NAME_)
#undef CR_TEST_NAME_
    };
    CHECK_EQ_I64(sizeof params / sizeof params[0], CR_STATUS_COUNT, "one row per status");
    CHECK_EQ_I64(CR_OK, 0, "CR_OK is zero");
    for (int i = 0; i < CR_STATUS_COUNT; i++) {
        if (!names[i]) { /* a reserved number: out of range */
            CHECK_EQ_STR(cr_strerror((cr_status)i), "unknown status", "reserved status %d", i);
            CHECK_EQ_STR(cr_status_name((cr_status)i), "", "reserved status %d", i);
            continue;
        }
        const char *message = cr_strerror((cr_status)i);
        const char *param = cr_status_param((cr_status)i);
        if (!CHECK(message && param, "status %s", names[i]))
            continue;
        CHECK(message[0] != '\0', "status %s has a message", names[i]);
        CHECK_EQ_STR(param, params[i], "status %s", names[i]);
        CHECK_EQ_STR(cr_status_name((cr_status)i), names[i], "name of status %d", i);
        CHECK(strncmp(message, param, strlen(param)) == 0,
              "message of %s (\"%s\") starts with its parameter \"%s\"", names[i], message, param);
        CHECK(strcmp(message, "unknown status") != 0, "status %s", names[i]);
        for (int j = 0; j < i; j++)
            CHECK(!names[j] || strcmp(message, cr_strerror((cr_status)j)) != 0,
                  "%s and %s share a message", names[i], names[j]);
    }
    CHECK_EQ_I64(cr_status_class_of(CR_OK), CR_STATUS_NONE, "CR_OK has no class");
    CHECK_EQ_I64(cr_status_class_of(CR_E_RATE), CR_STATUS_ARGUMENT, "a mistake");
    CHECK_EQ_I64(cr_status_class_of(CR_E_SHARED_LOCK), CR_STATUS_RUNTIME, "a lock held");
    CHECK_EQ_I64(cr_status_class_of(CR_E_SHARED_RATE), CR_STATUS_REGION, "another region");
    CHECK_EQ_I64(cr_status_class_of((cr_status)CR_STATUS_COUNT), CR_STATUS_NONE, "out of range");
    CHECK_EQ_I64(cr_status_class_of((cr_status)-1), CR_STATUS_NONE, "out of range");
    CHECK_EQ_STR(cr_strerror(CR_OK), "ok", "CR_OK");
    CHECK_EQ_STR(cr_status_param(CR_OK), "", "CR_OK names no parameter");
    CHECK_EQ_STR(cr_status_param(CR_E_NOMEM), "", "out of memory names no parameter");
    const int out_of_range[] = {CR_STATUS_COUNT, CR_STATUS_COUNT + 1, 1000, -1};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++) {
        CHECK_EQ_STR(cr_strerror((cr_status)out_of_range[i]), "unknown status", "status %d",
                     out_of_range[i]);
        CHECK_EQ_STR(cr_status_param((cr_status)out_of_range[i]), "", "status %d", out_of_range[i]);
        CHECK_EQ_STR(cr_status_name((cr_status)out_of_range[i]), "", "status %d", out_of_range[i]);
    }
}

/* ------------------------------------------------------------------------ */

static cr_status init_text(cr_limit *limit, const char *text, size_t len)
{
    cr_limit_args args = {0};
    args.rate_text = text;
    args.rate_text_len = len;
    return cr_limit_init(limit, &args);
}

static void test_limit_init(void)
{
    cr_limit limit;
    cr_limit_args args = {0};

    args.rate = 300;
    args.period_s = 60;
    args.has_period = true;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "300 per 60 s");
    CHECK_EQ_I64(limit.emission_ns, 200 * 1000 * 1000, "300 per 60 s");
    CHECK_EQ_I64(limit.burst, 300, "default burst is ceil(rate)");
    CHECK_EQ_I64(limit.tolerance_ns, limit.emission_ns * 300, "tau = T * burst");
    CHECK(limit.rate == 300.0 && limit.period_s == 60.0, "rate and period as given");

    args = (cr_limit_args){0};
    args.rate = 10;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "10 per (default) second");
    CHECK(limit.period_s == 1.0, "absent period is 1 s");

    /* A rate string need not be NUL-terminated: only `len` bytes count. */
    const char buffer[] = "300/5mXYZ";
    CHECK_EQ_I64(init_text(&limit, buffer, 6), CR_OK, "'300/5m' out of a longer buffer");
    CHECK(limit.rate == 300.0 && limit.period_s == 300.0, "rate and period as parsed");
    CHECK_EQ_I64(limit.emission_ns, SECOND, "300 per 5 minutes");
    CHECK_EQ_I64(init_text(&limit, buffer, 7), CR_E_RATE_SYNTAX, "'300/5mX'");
    CHECK_EQ_I64(init_text(&limit, "10/s\0", 5), CR_E_RATE_SYNTAX, "a NUL byte is not a space");
    CHECK_EQ_I64(init_text(&limit, "10\0/s", 5), CR_E_RATE_SYNTAX, "a NUL byte is not a space");
    CHECK_EQ_I64(init_text(&limit, "10/s", 0), CR_E_RATE_SYNTAX, "an empty string");

    /* The text takes the place of the number, whatever the number says. */
    args = (cr_limit_args){0};
    args.rate = -1;
    args.rate_text = "10/s";
    args.rate_text_len = 4;
    args.burst = 3;
    args.has_burst = true;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "rate_text with a bad numeric rate");
    CHECK_EQ_I64(limit.burst, 3, "a burst given with a rate string");
    args.burst = 0;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_BURST, "burst 0 with a rate string");

    double rate = -1, period_s = -1;
    CHECK_EQ_I64(cr_parse_rate("5 per 2 hours", 13, &rate, &period_s), CR_OK, "cr_parse_rate");
    CHECK(rate == 5.0 && period_s == 7200.0, "cr_parse_rate: %g per %g s", rate, period_s);
    CHECK_EQ_I64(cr_parse_rate("5 per 2 months", 14, &rate, &period_s), CR_E_RATE_CALENDAR,
                 "cr_parse_rate");
}

/* ------------------------------------------------------------------------ */

static void test_time(void)
{
    CHECK(isinf(cr_ns_to_seconds(CR_NEVER)) && cr_ns_to_seconds(CR_NEVER) > 0,
          "CR_NEVER is +infinity in seconds");
    int64_t samples[64] = {0,
                           1,
                           2,
                           999999999,
                           SECOND,
                           1500 * 1000 * 1000,
                           INT64_C(1) << 50,
                           (INT64_C(1) << 53) - 1,
                           INT64_C(1) << 53};
    for (int i = 9; i < 64; i++)
        samples[i] = (int64_t)(next_random() >> (11 + (unsigned)i % 20));
    for (int i = 0; i < 64; i++) {
        int64_t ns = samples[i];
        /* Below 2^53 ns the conversion is exact, so the answer is the one
         * correctly rounded quotient. */
        double seconds = cr_ns_to_seconds(ns);
        CHECK(seconds == (double)ns / 1e9, "cr_ns_to_seconds(%" PRId64 ") = %.17g", ns, seconds);
        if (ns < (INT64_C(1) << 50)) {
            int64_t back = -1;
            CHECK_EQ_I64(cr_seconds_to_ns(seconds, &back), CR_OK, "ns %" PRId64, ns);
            CHECK_EQ_I64(back, ns, "seconds -> ns -> seconds round trip");
        }
    }
    int64_t ns = -1;
    CHECK_EQ_I64(cr_seconds_to_ns(NAN, &ns), CR_E_NOW, "NaN");
    CHECK_EQ_I64(cr_seconds_to_ns(-INFINITY, &ns), CR_E_NOW, "-inf");
    CHECK_EQ_I64(cr_seconds_to_ns(-1e-300, &ns), CR_E_NOW, "a tiny negative");

    /* A longest wait: beyond the horizon (or infinite) is any wait. */
    const struct {
        double seconds;
        cr_status status;
        int64_t ns;
    } waits[] = {
        {0, CR_OK, 0},
        {1.5, CR_OK, 1500 * 1000 * 1000},
        {1e-9 * 0.6, CR_OK, 1},
        {4611686018.0, CR_OK, INT64_C(4611686018000000000)}, /* below 2^62 ns */
        {4611686018.427388, CR_OK, CR_NEVER},                /* 2^62 ns and beyond */
        {1e300, CR_OK, CR_NEVER},
        {INFINITY, CR_OK, CR_NEVER},
        {-1e-300, CR_E_TIMEOUT, -1},
        {-INFINITY, CR_E_TIMEOUT, -1},
        {NAN, CR_E_TIMEOUT, -1},
    };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        ns = -1;
        CHECK_EQ_I64(cr_wait_from_seconds(waits[i].seconds, CR_E_TIMEOUT, &ns), waits[i].status,
                     "wait of %.17g s", waits[i].seconds);
        CHECK_EQ_I64(ns, waits[i].ns, "wait of %.17g s", waits[i].seconds);
    }
    CHECK_EQ_I64(cr_wait_from_seconds(-1, CR_E_TIMEOUT, &ns), CR_E_TIMEOUT,
                 "the parameter's own status");

    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t before = (int64_t)ts.tv_sec * SECOND + ts.tv_nsec;
    int64_t previous = cr_clock_ns();
    CHECK(previous >= before, "cr_clock_ns() is CLOCK_MONOTONIC");
    bool monotonic = true;
    for (int i = 0; i < 10000; i++) {
        int64_t now = cr_clock_ns();
        monotonic = monotonic && now >= previous;
        previous = now;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t after = (int64_t)ts.tv_sec * SECOND + ts.tv_nsec;
    CHECK(monotonic, "cr_clock_ns() never steps back");
    CHECK(previous <= after, "cr_clock_ns() is CLOCK_MONOTONIC");
}

/* ------------------------------------------------------------------------ */

/* A limit of these arguments, which must be valid. */
static cr_limit limit_from_text(const char *rate_text, const char *algorithm, bool fast)
{
    cr_limit_args args = {.rate_text = rate_text, .rate_text_len = strlen(rate_text)};
    if (algorithm) {
        args.algorithm = algorithm;
        args.algorithm_len = strlen(algorithm);
    }
    if (!fast) {
        args.clock = "monotonic";
        args.clock_len = 9;
    }
    cr_limit limit;
    memset(&limit, 0, sizeof limit);
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "limit %s", rate_text);
    return limit;
}

static void test_limit_describe(void)
{
    char text[CR_LIMIT_DESCRIPTION_MAX];
    cr_limit limit = limit_from_text("300/minute", NULL, true);
    size_t len = cr_limit_describe(text, sizeof text, "cellrate.Limiter", &limit, -1);
    CHECK_EQ_STR(text, "cellrate.Limiter(rate=300, period=60, burst=300)", "a gcra limit");
    CHECK_EQ_I64(len, strlen(text), "the length written");
    limit = limit_from_text("0.1/250ms", NULL, false);
    cr_limit_describe(text, sizeof text, "T", &limit, 7);
    CHECK_EQ_STR(text, "T(rate=0.1, period=0.25, burst=1, clock='monotonic', capacity=7)",
                 "fractions, the clock and a capacity");
    limit = limit_from_text("10/s", "sliding_window", true);
    cr_limit_describe(text, sizeof text, "cellrate.Limit", &limit, -1);
    CHECK_EQ_STR(text, "cellrate.Limit(rate=10, period=1, algorithm='sliding_window')",
                 "a window takes no burst");
    char small[8];
    len = cr_limit_describe(small, sizeof small, "cellrate.Limit", &limit, -1);
    CHECK_EQ_I64(len, strlen(text), "the whole length, as snprintf");
    CHECK_EQ_STR(small, "cellrat", "cut to the buffer, NUL-terminated");
    /* The longest: a 64-byte type name, the widest numbers and every part. */
    cr_limit widest = limit_from_text("0.1/1ns", "token_bucket", true);
    widest.fast_clock = false; /* the clock named */
    widest.rate = -0x1.fffffffffffffp1023 / 3;
    widest.period_s = 0x1.0000000000001p-1022;
    widest.burst = INT64_MIN;
    len = cr_limit_describe(text, sizeof text,
                            "0123456789012345678901234567890123456789012345678901234567890123",
                            &widest, INT64_MAX);
    CHECK(len < sizeof text, "the widest description fits (%zu bytes)", len);
}

static void test_limiter(void)
{
    cr_limiter_free(NULL); /* a no-op */
    cr_keyed_free(NULL);

    cr_limit limit = limit_of(HOUR, 3);
    cr_limiter *limiter = NULL;
    if (!CHECK(cr_limiter_new(&limiter, &limit) == CR_OK && limiter, "cr_limiter_new"))
        return;
    const cr_limit *held = cr_limiter_limit(limiter);
    CHECK(held->emission_ns == HOUR && held->burst == 3 && held->tolerance_ns == 3 * HOUR,
          "cr_limiter_limit returns the limit given");

    cr_decision d;
    CHECK_EQ_I64(cr_limiter_check(limiter, 0, -1, true, &d), CR_E_COST, "cost -1");
    CHECK_EQ_I64(cr_limiter_check(limiter, 0, INT64_MIN, true, &d), CR_E_COST, "cost INT64_MIN");
    CHECK_EQ_I64(cr_limiter_check(limiter, -2, 1, true, &d), CR_E_NOW, "now -2");
    CHECK_EQ_I64(cr_limiter_check(limiter, INT64_MIN, 1, true, &d), CR_E_NOW, "now INT64_MIN");
    CHECK_EQ_I64(cr_limiter_check(limiter, -2, 1, false, &d), CR_E_NOW, "peek at now -2");
    CHECK_EQ_I64(cr_limiter_check(limiter, 5, 0, true, &d), CR_OK, "after bad arguments");
    CHECK(d.allowed && d.remaining == 3, "bad arguments stored nothing");

    /* CR_CLOCK: the limiter reads the clock; T is an hour, so no refill here. */
    int admitted = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_I64(cr_limiter_check(limiter, CR_CLOCK, 1, true, &d), CR_OK, "CR_CLOCK");
        admitted += d.allowed;
    }
    CHECK_EQ_I64(admitted, 3, "an idle limiter on the real clock admits its burst");
    CHECK(!d.allowed && d.retry_after_ns > 0 && d.retry_after_ns <= HOUR, "retry_after %" PRId64,
          d.retry_after_ns);
    cr_limiter_reset(limiter);
    CHECK_EQ_I64(cr_limiter_check(limiter, CR_CLOCK, 3, true, &d), CR_OK, "after reset");
    CHECK(d.allowed, "reset gives back the full burst");
    cr_limiter_free(limiter);
}

/* ------------------------------------------------------------------------ */

static bool key_is_idle(cr_keyed *keyed, const void *key, size_t len, int64_t now)
{
    cr_decision d;
    cr_keyed_check(keyed, key, len, now, 0, false, &d);
    return d.reset_after_ns == 0;
}

static void test_keyed_arguments(void)
{
    cr_limit limit = limit_of(SECOND, 2);
    cr_keyed *keyed = NULL;
    const int64_t bad[] = {0, -1, INT64_MIN, (INT64_C(1) << 32) + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_I64(cr_keyed_new(&keyed, &limit, bad[i]), CR_E_CAPACITY, "capacity %" PRId64,
                     bad[i]);

    if (!CHECK(cr_keyed_new(&keyed, &limit, 1) == CR_OK && keyed, "capacity 1"))
        return;
    CHECK_EQ_I64(cr_keyed_capacity(keyed), 1, "cr_keyed_capacity");
    const cr_limit *held = cr_keyed_limit(keyed);
    CHECK(held->emission_ns == SECOND && held->burst == 2, "cr_keyed_limit returns the limit");
    cr_keyed_free(keyed);

    if (!CHECK(cr_keyed_new(&keyed, &limit, 100) == CR_OK, "capacity 100"))
        return;
    CHECK_EQ_I64(cr_keyed_capacity(keyed), 100, "cr_keyed_capacity");
    cr_decision d;
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, -1, true, &d), CR_E_COST, "cost -1");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, INT64_MIN, true, &d), CR_E_COST,
                 "cost INT64_MIN");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, -2, 1, true, &d), CR_E_NOW, "now -2");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, INT64_MIN, 1, false, &d), CR_E_NOW, "now INT64_MIN");
    CHECK_EQ_I64(cr_keyed_len(keyed), 0, "bad arguments claim no slot");
    CHECK_EQ_I64(cr_keyed_evictions(keyed), 0, "no evictions yet");

    /* Only a committed admission of cost >= 1 claims a slot. */
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 1, false, &d), CR_OK, "peek");
    CHECK_EQ_I64(cr_keyed_len(keyed), 0, "a peek claims no slot");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 0, true, &d), CR_OK, "probe");
    CHECK_EQ_I64(cr_keyed_len(keyed), 0, "a cost-0 probe claims no slot");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 3, true, &d), CR_OK, "unfittable");
    CHECK(!d.allowed && d.retry_after_ns == CR_NEVER, "cost 3 never fits burst 2");
    CHECK_EQ_I64(cr_keyed_len(keyed), 0, "a turn-away claims no slot");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 1, true, &d), CR_OK, "admission");
    CHECK_EQ_I64(cr_keyed_len(keyed), 1, "an admission claims a slot");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 1, true, &d), CR_OK, "admission");
    CHECK_EQ_I64(cr_keyed_len(keyed), 1, "a key holds one slot");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a", 1, 0, 1, true, &d), CR_OK, "turn-away");
    CHECK(!d.allowed, "burst 2 spent");

    /* Keys are bytes: length counts, NUL bytes are ordinary. */
    CHECK_EQ_I64(cr_keyed_check(keyed, "", 0, 0, 2, true, &d), CR_OK, "the empty key");
    CHECK(d.allowed, "the empty key is a key of its own");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a\0", 2, 0, 2, true, &d), CR_OK, "\"a\\0\"");
    CHECK(d.allowed, "\"a\\0\" is not \"a\"");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a\0b", 3, 0, 2, true, &d), CR_OK, "\"a\\0b\"");
    CHECK(d.allowed, "\"a\\0b\" is a key of its own");
    CHECK_EQ_I64(cr_keyed_check(keyed, "a\0c", 3, 0, 1, true, &d), CR_OK, "\"a\\0c\"");
    CHECK(d.allowed && d.remaining == 1, "\"a\\0c\" is not \"a\\0b\"");
    size_t long_len = 100000;
    char *long_key = malloc(long_len);
    if (long_key) {
        memset(long_key, 'k', long_len);
        CHECK_EQ_I64(cr_keyed_check(keyed, long_key, long_len, 0, 2, true, &d), CR_OK, "long key");
        long_key[long_len - 1] = 'K';
        CHECK_EQ_I64(cr_keyed_check(keyed, long_key, long_len, 0, 2, true, &d), CR_OK, "long key");
        CHECK(d.allowed, "keys differing in their last byte are distinct");
        free(long_key);
    }
    CHECK_EQ_I64(cr_keyed_len(keyed), 7, "seven keys hold slots");

    /* Reset frees the slot and gives the burst back; of an absent key, a no-op. */
    cr_keyed_reset(keyed, "a", 1);
    CHECK_EQ_I64(cr_keyed_len(keyed), 6, "reset frees the slot");
    CHECK(key_is_idle(keyed, "a", 1, 0), "a reset key is idle");
    cr_keyed_reset(keyed, "never seen", 10);
    cr_keyed_reset(keyed, "a", 1);
    CHECK_EQ_I64(cr_keyed_len(keyed), 6, "resetting an absent key changes nothing");
    CHECK(!key_is_idle(keyed, "", 0, 0), "other keys keep their state");
    CHECK_EQ_I64(cr_keyed_evictions(keyed), 0, "no evictions in a roomy table");
    cr_keyed_free(keyed);
}

/* Distinct keys, 10x capacity, all live at one frozen instant: every key is
 * admitted, the table never grows, and each key beyond the free slots
 * evicts exactly one live key. */
static void test_keyed_flood_live(void)
{
    const int64_t capacity = 1000;
    const int keys = 10 * (int)capacity;
    cr_limit limit = limit_of(HOUR, 1);
    cr_keyed *keyed = NULL;
    if (!CHECK(cr_keyed_new(&keyed, &limit, capacity) == CR_OK, "cr_keyed_new"))
        return;
    size_t memory = cr_keyed_memory(keyed);
    int refused = 0;
    size_t max_len = 0;
    bool memory_constant = true;
    for (int i = 0; i < keys; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "live-%d", i);
        cr_decision d;
        cr_keyed_check(keyed, key, (size_t)len, SECOND, 1, true, &d);
        refused += !d.allowed;
        size_t held = cr_keyed_len(keyed);
        max_len = held > max_len ? held : max_len;
        memory_constant = memory_constant && cr_keyed_memory(keyed) == memory;
    }
    CHECK_EQ_I64(refused, 0, "a key the table has no room for is idle, so admitted");
    CHECK(max_len <= 2 * (size_t)capacity, "len peaked at %zu for capacity %" PRId64, max_len,
          capacity);
    CHECK(max_len >= (size_t)capacity, "a table for %" PRId64 " keys held only %zu", capacity,
          max_len);
    CHECK(memory_constant, "cr_keyed_memory is fixed at creation");
    uint64_t evictions = cr_keyed_evictions(keyed);
    CHECK_EQ_I64((int64_t)evictions + (int64_t)cr_keyed_len(keyed), keys,
                 "every key took a free slot or evicted one live key");
    cr_keyed_free(keyed);
}

/* Distinct keys, 10x capacity, each idle again before the next arrives:
 * expired slots are reused, so nothing live is ever evicted. */
static void test_keyed_flood_expired(void)
{
    const int64_t capacity = 1000;
    const int keys = 10 * (int)capacity;
    cr_limit limit = limit_of(5, 2);
    cr_keyed *keyed = NULL;
    if (!CHECK(cr_keyed_new(&keyed, &limit, capacity) == CR_OK, "cr_keyed_new"))
        return;
    size_t memory = cr_keyed_memory(keyed);
    size_t max_len = 0;
    bool memory_constant = true;
    for (int i = 0; i < keys; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "expiring-%d", i);
        cr_decision d;
        cr_keyed_check(keyed, key, (size_t)len, SECOND + 10 * (int64_t)i, 2, true, &d);
        size_t held = cr_keyed_len(keyed);
        max_len = held > max_len ? held : max_len;
        memory_constant = memory_constant && cr_keyed_memory(keyed) == memory;
    }
    CHECK_EQ_I64(cr_keyed_evictions(keyed), 0, "expired slots are reused before live ones");
    CHECK(max_len <= 2 * (size_t)capacity, "len peaked at %zu", max_len);
    CHECK(memory_constant, "cr_keyed_memory is fixed at creation");
    cr_keyed_free(keyed);
}

/*
 * The eviction choice. A table for 4 keys has two buckets of four slots, and
 * every key's two candidate buckets are those two: the whole table. (Checked
 * first: 8 live keys fit with no eviction.) So the policy is visible from
 * outside: the new key takes an empty slot if any; else the slot whose TAT is
 * smallest, which is a free reuse when that TAT has passed and otherwise the
 * eviction of that live key, counted.
 */
#define SMALL_SLOTS 8
typedef struct {
    char name[16];
    int64_t tat; /* 0: not in the table */
} held_key;

static void test_keyed_eviction_policy(void)
{
    const int64_t burst = 1000;
    cr_limit limit = limit_of(SECOND, burst);
    cr_keyed *keyed = NULL;
    if (!CHECK(cr_keyed_new(&keyed, &limit, 4) == CR_OK, "cr_keyed_new"))
        return;

    held_key table[SMALL_SLOTS];
    int next_name = 0;
    int64_t now = 0;
    cr_decision d;
    for (int i = 0; i < SMALL_SLOTS; i++) {
        held_key *k = &table[i];
        snprintf(k->name, sizeof k->name, "k%d", next_name++);
        int64_t cost = 10 + (int64_t)(next_random() % 500);
        cr_keyed_check(keyed, k->name, strlen(k->name), now, cost, true, &d);
        k->tat = now + cost * SECOND;
    }
    if (!CHECK(cr_keyed_len(keyed) == SMALL_SLOTS && cr_keyed_evictions(keyed) == 0,
               "a table for 4 keys holds 8 live keys without evicting (len %zu, evictions %" PRIu64
               "); the eviction checks below assume it",
               cr_keyed_len(keyed), cr_keyed_evictions(keyed))) {
        cr_keyed_free(keyed);
        return;
    }

    uint64_t want_evictions = 0;
    for (int round = 0; round < 400; round++) {
        if (round % 7 == 3)
            now += (int64_t)(next_random() % 200) * SECOND; /* some keys expire */
        if (round % 13 == 5) {
            /* A reset frees a slot: the next new key takes it, evicting nothing. */
            held_key *k = &table[next_random() % SMALL_SLOTS];
            cr_keyed_reset(keyed, k->name, strlen(k->name));
            held_key fresh;
            snprintf(fresh.name, sizeof fresh.name, "k%d", next_name++);
            cr_keyed_check(keyed, fresh.name, strlen(fresh.name), now, 1, true, &d);
            fresh.tat = now + SECOND;
            *k = fresh;
            CHECK_EQ_I64(cr_keyed_evictions(keyed), want_evictions, "round %d: a freed slot",
                         round);
            continue;
        }
        /* The victim: smallest TAT; on a tie, the model cannot say which. */
        int victim = 0, ties = 0;
        for (int i = 1; i < SMALL_SLOTS; i++)
            if (table[i].tat < table[victim].tat)
                victim = i;
        for (int i = 0; i < SMALL_SLOTS; i++)
            ties += table[i].tat == table[victim].tat;
        if (ties > 1) {
            /* make the TATs distinct again by spending on all but one key */
            for (int i = 0; i < SMALL_SLOTS; i++) {
                if (i != victim && table[i].tat == table[victim].tat) {
                    int64_t base = table[i].tat > now ? table[i].tat : now;
                    cr_keyed_check(keyed, table[i].name, strlen(table[i].name), now, 1, true, &d);
                    if (d.allowed)
                        table[i].tat = base + SECOND;
                }
            }
            continue;
        }
        bool live = table[victim].tat > now;
        held_key fresh;
        snprintf(fresh.name, sizeof fresh.name, "k%d", next_name++);
        int64_t cost = 1 + (int64_t)(next_random() % 600);
        cr_keyed_check(keyed, fresh.name, strlen(fresh.name), now, cost, true, &d);
        CHECK(d.allowed, "round %d: a new key is idle", round);
        fresh.tat = now + cost * SECOND;
        want_evictions += live;
        CHECK_EQ_I64(cr_keyed_evictions(keyed), want_evictions,
                     "round %d: %s the key with the smallest TAT", round,
                     live ? "evicting (live)" : "reusing (expired)");
        CHECK_EQ_I64(cr_keyed_len(keyed), SMALL_SLOTS, "round %d: the table stays full", round);
        if (live)
            CHECK(key_is_idle(keyed, table[victim].name, strlen(table[victim].name), now),
                  "round %d: the live key with the smallest TAT (%s) was the one evicted", round,
                  table[victim].name);
        table[victim] = fresh;
        for (int i = 0; i < SMALL_SLOTS; i++) {
            if (table[i].tat <= now)
                continue; /* idle either way */
            cr_keyed_check(keyed, table[i].name, strlen(table[i].name), now, 0, false, &d);
            CHECK_EQ_I64(d.reset_after_ns, table[i].tat - now, "round %d: key %s kept its TAT",
                         round, table[i].name);
        }
    }
    CHECK(want_evictions > 50, "the rounds evicted live keys %" PRIu64 " times", want_evictions);
    cr_keyed_free(keyed);
}

static void test_keyed_memory(void)
{
    cr_limit limit = limit_of(SECOND, 1);
    cr_keyed *keyed = NULL;
    const int64_t million = 1000 * 1000;
    if (!CHECK(cr_keyed_new(&keyed, &limit, million) == CR_OK, "capacity 1e6"))
        return;
    double per_key = (double)cr_keyed_memory(keyed) / (double)million;
    CHECK(per_key <= 32.0, "%.2f bytes of table per key at capacity 1e6", per_key);
    CHECK(per_key >= 16.0, "%.2f bytes per key cannot hold a 64-bit key hash and TAT", per_key);
    printf("keyed table: %.2f bytes per key at capacity 1e6\n", per_key);
    cr_keyed_free(keyed);
}

/* Keys that sleep through many live changes (more than the sweep's period,
 * more than the 256 values of a slot's generation tag) and keys touched
 * between them decide as if every key had been carried at every change. */
static void test_keyed_sleeping_keys(void)
{
    enum { KEYS = 40, CHANGES = 600 };
    const cr_limit limits[3] = {limit_of(INT64_C(1000000), 50), limit_of(INT64_C(7000000), 9),
                                limit_of(INT64_C(300000), 400)};
    cr_keyed *keyed = NULL;
    CHECK(cr_keyed_new(&keyed, &limits[0], 1000) == CR_OK, "cr_keyed_new");
    int64_t state[KEYS] = {0};
    char key[16];
    int64_t now = SECOND;
    for (int k = 0; k < KEYS; k++) {
        int len = snprintf(key, sizeof key, "k%d", k);
        cr_decision d;
        CHECK(cr_keyed_check(keyed, key, (size_t)len, now, 1 + k, true, &d) == CR_OK, "check");
        state[k] = cr_decide(&limits[0], 0, now, 1 + k, &d);
    }
    for (int c = 1; c <= CHANGES; c++) {
        const cr_limit *from = &limits[(c - 1) % 3], *to = &limits[c % 3];
        now += 1000 + c; /* changes faster than any key recovers */
        CHECK(cr_keyed_reconfigure(keyed, to, now) == CR_OK, "change %d", c);
        for (int k = 0; k < KEYS; k++)
            state[k] = cr_carry(from, to, state[k], now);
        const int touched = c % (KEYS / 2); /* half the keys sleep through every change */
        int len = snprintf(key, sizeof key, "k%d", touched);
        cr_decision got, want;
        CHECK(cr_keyed_check(keyed, key, (size_t)len, now, 1, true, &got) == CR_OK, "check");
        state[touched] = cr_decide(to, state[touched], now, 1, &want);
        CHECK(got.allowed == want.allowed && got.remaining == want.remaining &&
                  got.reset_after_ns == want.reset_after_ns,
              "change %d, key %d", c, touched);
    }
    const cr_limit *last = &limits[CHANGES % 3];
    for (int k = 0; k < KEYS; k++) {
        int len = snprintf(key, sizeof key, "k%d", k);
        cr_decision got, want;
        CHECK(cr_keyed_check(keyed, key, (size_t)len, now, 0, false, &got) == CR_OK, "peek");
        cr_decide(last, state[k], now, 0, &want);
        CHECK(got.remaining == want.remaining && got.reset_after_ns == want.reset_after_ns,
              "key %d: remaining %" PRId64 " want %" PRId64, k, got.remaining, want.remaining);
    }
    CHECK(cr_keyed_reconfigure(keyed, last, now) == CR_OK, "the same limit: nothing changes");
    cr_limit window = window_limit_of(CR_ALGORITHM_FIXED_WINDOW, SECOND, 10);
    CHECK(cr_keyed_reconfigure(keyed, &window, now) == CR_E_RECONFIGURE_ALGORITHM, "algorithm");
    cr_keyed_free(keyed);
}

/* max_cost= (docs/design.md §9): a limit that could never admit it is a
 * configuration mistake, refused naming the burst (or a window's rate). */
static void test_max_cost(void)
{
    cr_limit limit;
    cr_limit_args args = {0};
    args.rate_text = "1000/minute";
    args.rate_text_len = 11;
    args.has_max_cost = true;
    args.max_cost = 1000;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "the default burst 1000 fits max_cost 1000");
    args.max_cost = 1001;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_BURST_MAX_COST, "default burst 1000 < 1001");
    CHECK_EQ_STR(cr_status_param(CR_E_BURST_MAX_COST), "burst", "the parameter to change");
    args.burst = 4000;
    args.has_burst = true;
    args.max_cost = 4000;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "burst 4000 fits max_cost 4000");
    args.max_cost = 4001;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_BURST_MAX_COST, "burst 4000 < 4001");
    args.max_cost = -1;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_MAX_COST, "a negative max_cost");
    CHECK_EQ_STR(cr_status_param(CR_E_MAX_COST), "max_cost", "max_cost named");
    args.max_cost = 0;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "max_cost 0 fits anything");
    args.has_burst = false;
    args.algorithm = "fixed_window";
    args.algorithm_len = 12;
    args.max_cost = 1000;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "a window of 1000 fits max_cost 1000");
    args.max_cost = 1001;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_RATE_MAX_COST, "a window of 1000 < 1001");
    CHECK_EQ_STR(cr_status_param(CR_E_RATE_MAX_COST), "rate", "a window's amount is its rate");
    CHECK_EQ_I64(cr_status_class_of(CR_E_RATE_MAX_COST), CR_STATUS_ARGUMENT, "an argument mistake");

    /* take's max_cost is named as such, in every store */
    cr_limiter *limiter;
    cr_keyed *keyed;
    int64_t taken = 7;
    limit = limit_of(SECOND, 5);
    if (!CHECK(cr_limiter_new(&limiter, &limit) == CR_OK &&
                   cr_keyed_new(&keyed, &limit, 8) == CR_OK,
               "stores"))
        return;
    CHECK_EQ_I64(cr_limiter_take(limiter, 0, -1, &taken), CR_E_MAX_COST, "take(-1)");
    CHECK_EQ_I64(cr_keyed_take(keyed, "k", 1, 0, CR_PLAN_DEFAULT, -1, &taken), CR_E_MAX_COST,
                 "keyed take(-1)");
    CHECK_EQ_I64(cr_limiter_charge(limiter, 0, -1, NULL), CR_E_COST, "charge(-1)");
    CHECK_EQ_I64(cr_keyed_charge(keyed, "k", 1, -5, CR_PLAN_DEFAULT, 1, NULL), CR_E_NOW,
                 "charge at a bad now");
    CHECK_EQ_I64(cr_limiter_take(limiter, CR_HORIZON_NS, 1, &taken), CR_E_NOW, "take at a bad now");
    CHECK_EQ_I64(taken, 7, "nothing set on an error");
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);
}

/* The debt bound and what the counters count (docs/design.md §9, §4
 * Counters): a charge of any figure commits at most max_debt units beyond the
 * limit (default: the burst) and counts what it committed; a refund counts
 * what it gave back, in units_refunded; nothing falls, nothing wraps. */
static cr_limit limit_text(const char *text, int64_t burst, int64_t max_debt, const char *algorithm)
{
    cr_limit limit;
    cr_limit_args args = {0};
    args.rate_text = text;
    args.rate_text_len = strlen(text);
    args.burst = burst;
    args.has_burst = burst > 0;
    args.max_debt = max_debt;
    args.has_max_debt = max_debt >= 0;
    args.algorithm = algorithm;
    args.algorithm_len = algorithm ? strlen(algorithm) : 0;
    if (cr_limit_init(&limit, &args) != CR_OK)
        memset(&limit, 0, sizeof limit);
    return limit;
}

static void test_debt_and_counters(void)
{
    const int64_t T = SECOND / 10, now = SECOND;
    cr_limit limit = limit_text("10/s", 10, -1, NULL);
    CHECK_EQ_I64(limit.max_debt, 10, "the default max_debt: the burst");
    cr_limiter *limiter;
    cr_keyed *keyed;
    cr_decision d;
    cr_stats stats;
    if (!CHECK(cr_limiter_new(&limiter, &limit) == CR_OK &&
                   cr_keyed_new(&keyed, &limit, 8) == CR_OK,
               "stores"))
        return;

    /* a refund of a fresh key gives nothing back and counts nothing */
    CHECK_EQ_I64(cr_limiter_refund(limiter, now, 5), CR_OK, "refund(5)");
    CHECK_EQ_I64(cr_keyed_refund(keyed, "a", 1, now, CR_PLAN_DEFAULT, 3), CR_OK, "refund('a', 3)");
    cr_limiter_stats(limiter, &stats);
    CHECK(stats.units_admitted == 0 && stats.units_refunded == 0,
          "a fresh refund: %" PRIu64 " admitted, %" PRIu64 " refunded", stats.units_admitted,
          stats.units_refunded);
    cr_keyed_stats(keyed, &stats);
    CHECK(stats.units_admitted == 0 && stats.units_refunded == 0,
          "keyed: %" PRIu64 " admitted, %" PRIu64 " refunded", stats.units_admitted,
          stats.units_refunded);

    /* a refund of more than was taken counts what it gave back */
    CHECK_EQ_I64(cr_limiter_check(limiter, now, 4, true, &d), CR_OK, "check(4)");
    CHECK_EQ_I64(cr_limiter_refund(limiter, now, 10), CR_OK, "refund(10)");
    cr_limiter_stats(limiter, &stats);
    CHECK_EQ_I64((int64_t)stats.units_admitted, 4, "units_admitted stays");
    CHECK_EQ_I64((int64_t)stats.units_refunded, 4, "the 4 units given back");
    /* half a unit outstanding: given back, counted as a unit */
    CHECK_EQ_I64(cr_limiter_check(limiter, now, 1, true, &d), CR_OK, "check(1)");
    CHECK_EQ_I64(cr_limiter_refund(limiter, now + T / 2, 3), CR_OK, "refund(3), later");
    cr_limiter_stats(limiter, &stats);
    CHECK_EQ_I64((int64_t)stats.units_refunded, 5, "a part of a unit counted whole");
    cr_limiter_reset(limiter);
    CHECK_EQ_I64(cr_limiter_reset_stats(limiter), CR_OK, "reset_stats");

    /* a charge of 2^63 - 1: clipped at max_debt beyond the burst, refused for
     * (max_debt + 1) * T, counted as the 20 units it committed; again: none */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_I64(cr_limiter_charge(limiter, now, INT64_MAX, &d), CR_OK, "charge");
        CHECK(!d.allowed && d.clipped, "charge %d refused and clipped", i);
        CHECK_EQ_I64(d.retry_after_ns, 11 * T, "charge %d: in debt of 10 units, one more to fit",
                     i);
    }
    cr_limiter_stats(limiter, &stats);
    CHECK_EQ_I64((int64_t)stats.admitted, 3, "three charges");
    CHECK_EQ_I64((int64_t)stats.units_admitted, 20, "the units committed: burst + max_debt");
    CHECK(cr_limiter_check(limiter, now + 11 * T - 1, 1, false, &d) == CR_OK && !d.allowed,
          "refused until the debt has drained");
    CHECK(cr_limiter_check(limiter, now + 11 * T, 1, false, &d) == CR_OK && d.allowed,
          "admitted 1.1 s later, not 146 years");
    /* a charge past the bound commits the most whole units below it */
    CHECK_EQ_I64(cr_limiter_charge(limiter, now + T / 2, 5, &d), CR_OK, "charge(5)");
    CHECK(d.clipped && d.retry_after_ns == 10 * T + T / 2, "half a unit drained: none fits");
    CHECK_EQ_I64(cr_limiter_charge(limiter, now + 3 * T / 2, 5, &d), CR_OK, "charge(5)");
    CHECK(d.clipped && d.retry_after_ns == 10 * T + T / 2, "1.5 units drained: one fits");
    cr_limiter_stats(limiter, &stats);
    CHECK_EQ_I64((int64_t)stats.units_admitted, 21, "the one unit committed, counted");
    cr_limiter_free(limiter);

    /* keyed, explicit max_debt */
    cr_keyed_free(keyed);
    limit = limit_text("10/s", 10, 100, NULL);
    CHECK(cr_keyed_new(&keyed, &limit, 8) == CR_OK, "keyed, max_debt 100");
    CHECK_EQ_I64(cr_keyed_charge(keyed, "k", 1, now, CR_PLAN_DEFAULT, 50, &d), CR_OK, "charge(50)");
    CHECK(!d.clipped && d.retry_after_ns == 41 * T, "50 units: 40 in debt, not clipped");
    CHECK_EQ_I64(cr_keyed_charge(keyed, "k", 1, now, CR_PLAN_DEFAULT, INT64_MAX, &d), CR_OK,
                 "charge(huge)");
    CHECK(d.clipped && d.retry_after_ns == 101 * T, "clipped at 100 in debt: %" PRId64,
          d.retry_after_ns);
    cr_keyed_stats(keyed, &stats);
    CHECK_EQ_I64((int64_t)stats.units_admitted, 110, "50 + 60 committed");
    cr_keyed_free(keyed);

    /* max_debt 0: a charge fills the limit, no debt */
    limit = limit_text("10/s", 10, 0, NULL);
    CHECK_EQ_I64(limit.max_debt, 0, "max_debt 0 kept");
    CHECK_EQ_I64(cr_charge(&limit, 0, now, 15, &d), now + 10 * T, "max_debt 0: the burst, no more");
    CHECK(d.clipped, "and clipped");

    /* windows: fixed passes the rate by max_debt; sliding carries no debt */
    limit = limit_text("10/s", 0, -1, "fixed_window");
    CHECK_EQ_I64(limit.max_debt, 10, "a window's default: its rate");
    int64_t state = cr_charge(&limit, 0, now, INT64_MAX, &d);
    CHECK(d.clipped && state == now + SECOND + 20, "fixed: 20 counted, clipped");
    limit = limit_text("10/s", 0, 1000000000, "fixed_window");
    state = cr_charge(&limit, 0, now, INT64_MAX, &d);
    CHECK(d.clipped && state == now + SECOND + SECOND - 1, "fixed: at most period_ns - 1");
    limit = limit_text("10/s", 0, -1, "sliding_window");
    state = cr_charge(&limit, 0, now, 25, &d);
    CHECK(d.clipped && state == now + 2 * SECOND + 10, "sliding: the window full");

    /* validation */
    cr_limit_args args = {0};
    args.rate = 10;
    args.has_max_debt = true;
    args.max_debt = -1;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_MAX_DEBT, "a negative max_debt");
    CHECK_EQ_STR(cr_status_param(CR_E_MAX_DEBT), "max_debt", "max_debt named");
    args.algorithm = "sliding_window";
    args.algorithm_len = 14;
    CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_E_MAX_DEBT, "windows too");

    /* counters saturate: three refusals of 2^63 - 1 units each */
    limit = limit_of(T, 10);
    CHECK(cr_limiter_new(&limiter, &limit) == CR_OK, "limiter");
    for (int i = 0; i < 3; i++)
        CHECK(cr_limiter_check(limiter, now, INT64_MAX, true, &d) == CR_OK && !d.allowed,
              "unfittable");
    CHECK(cr_limiter_check(limiter, now, 0, true, &d) == CR_OK && d.allowed, "a probe");
    cr_limiter_stats(limiter, &stats);
    CHECK(stats.units_refused == (uint64_t)CR_COUNT_MAX, "units_refused saturated: %" PRIu64,
          stats.units_refused);
    CHECK_EQ_I64((int64_t)stats.refused, 3, "three refusals");
    CHECK_EQ_I64((int64_t)stats.units_admitted, 0, "a probe: no units");
    CHECK_EQ_I64(cr_limiter_reset_stats(limiter), CR_OK, "reset_stats");
    cr_limiter_stats(limiter, &stats);
    CHECK(stats.units_refused == (uint64_t)CR_COUNT_MAX, "saturated stays saturated");
    CHECK_EQ_I64((int64_t)stats.refused, 0, "the rest reset");
    cr_limiter_free(limiter);
}

int main(void)
{
    test_debt_and_counters();
    test_max_cost();
    test_status_table();
    test_limit_init();
    test_time();
    test_limit_describe();
    test_limiter();
    test_keyed_arguments();
    test_keyed_flood_live();
    test_keyed_flood_expired();
    test_keyed_eviction_policy();
    test_keyed_memory();
    test_keyed_sleeping_keys();
    return check_summary("test_core");
}
