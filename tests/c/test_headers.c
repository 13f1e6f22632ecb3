/*
 * HTTP header fields (cr_headers_format): exact field texts for known
 * decisions, the rounding up of every time at whole-second boundaries, the
 * policy name's quoting and refusals, and, over many decisions of the core,
 * that each field parses back to the decision it came from.
 */
#include "cellrate.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

#define SECOND INT64_C(1000000000)

/* The value of field `name` in `headers`, or NULL when absent. */
static const char *field(const cr_headers *headers, const char *name)
{
    for (int i = 0; i < headers->count; i++)
        if (strcmp(headers->field[i].name, name) == 0)
            return headers->field[i].value;
    return NULL;
}

static cr_decision decision_of(bool allowed, int64_t limit, int64_t remaining,
                               int64_t retry_after_ns, int64_t reset_after_ns)
{
    cr_decision decision = {allowed, limit, remaining, retry_after_ns, reset_after_ns, false};
    return decision;
}

static void test_known_fields(void)
{
    cr_headers headers;
    /* rate 300/minute, burst 60: T = 200 ms, window 12 s; one request admitted */
    cr_limit limit = limit_of(200 * 1000000, 60);
    CHECK_EQ_I64(cr_limit_window_ns(&limit), 12 * SECOND, "window is tau = burst * T");
    cr_decision d;
    cr_decide(&limit, 0, 100 * SECOND, 1, &d);
    CHECK_EQ_I64(cr_headers_format(&headers, &d, cr_limit_window_ns(&limit), "default", 7, false),
                 CR_OK, "admitted");
    CHECK_EQ_I64(headers.count, 2, "admitted: policy and RateLimit only");
    CHECK_EQ_STR(headers.field[0].name, "RateLimit-Policy", "first field");
    CHECK_EQ_STR(headers.field[0].value, "\"default\";q=60;w=12", "policy");
    CHECK_EQ_STR(headers.field[1].name, "RateLimit", "second field");
    CHECK_EQ_STR(headers.field[1].value, "\"default\";r=59;t=1", "reset 200 ms rounds up to 1");
    CHECK(field(&headers, "Retry-After") == NULL, "no Retry-After when admitted");

    /* refused: 10/s burst 1 at t = 0.25 s after TAT 0.3 s: retry after 50 ms */
    limit = limit_of(100 * 1000000, 1);
    cr_decide(&limit, 300 * 1000000, 250 * 1000000, 1, &d);
    CHECK(!d.allowed, "refused");
    CHECK_EQ_I64(cr_headers_format(&headers, &d, cr_limit_window_ns(&limit), "api", 3, true), CR_OK,
                 "refused, legacy");
    CHECK_EQ_I64(headers.count, 6, "refused with legacy: six fields");
    CHECK_EQ_STR(field(&headers, "RateLimit-Policy"), "\"api\";q=1;w=1", "policy");
    CHECK_EQ_STR(field(&headers, "RateLimit"), "\"api\";r=0;t=1", "ratelimit");
    CHECK_EQ_STR(field(&headers, "Retry-After"), "1", "50 ms rounds up to 1 s, never 0");
    CHECK_EQ_STR(field(&headers, "X-RateLimit-Limit"), "1", "legacy limit = q");
    CHECK_EQ_STR(field(&headers, "X-RateLimit-Remaining"), "0", "legacy remaining = r");
    CHECK_EQ_STR(field(&headers, "X-RateLimit-Reset"), "1", "legacy reset = t");

    /* unfittable: cost 2 against burst 1 */
    cr_decide(&limit, 0, SECOND, 2, &d);
    CHECK_EQ_I64(d.retry_after_ns, CR_NEVER, "unfittable");
    CHECK_EQ_I64(cr_headers_format(&headers, &d, cr_limit_window_ns(&limit), "api", 3, false),
                 CR_OK, "unfittable");
    CHECK(field(&headers, "Retry-After") == NULL, "an unfittable cost gets no Retry-After");
    CHECK_EQ_I64(headers.count, 2, "unfittable: two fields");
}

/* w is the time in which `limit` units come back, for every algorithm: tau
 * for GCRA and token_bucket, the window for the window algorithms. */
static void test_window_of_each_algorithm(void)
{
    static const struct {
        const char *algorithm;
        int64_t window_ns, limit;
    } cases[] = {
        {"gcra", 12 * SECOND, 60},
        {"token_bucket", 12 * SECOND, 60},
        {"fixed_window", 60 * SECOND, 300},
        {"sliding_window", 60 * SECOND, 300},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bool window = cases[i].limit == 300;
        cr_limit_args args = {.rate_text = "300/minute",
                              .rate_text_len = 10,
                              .burst = 60,
                              .has_burst = !window,
                              .algorithm = cases[i].algorithm,
                              .algorithm_len = strlen(cases[i].algorithm)};
        cr_limit limit;
        if (!CHECK_EQ_I64(cr_limit_init(&limit, &args), CR_OK, "%s", cases[i].algorithm))
            continue;
        CHECK_EQ_I64(cr_limit_window_ns(&limit), cases[i].window_ns, "%s", cases[i].algorithm);
        cr_decision d;
        cr_decide(&limit, 0, 100 * SECOND, 1, &d);
        cr_headers headers;
        CHECK_EQ_I64(cr_headers_format(&headers, &d, cr_limit_window_ns(&limit), "p", 1, false),
                     CR_OK, "%s", cases[i].algorithm);
        char want[64];
        snprintf(want, sizeof want, "\"p\";q=%" PRId64 ";w=%" PRId64, cases[i].limit,
                 cases[i].window_ns / SECOND);
        CHECK_EQ_STR(field(&headers, "RateLimit-Policy"), want, "%s", cases[i].algorithm);
    }
}

static void test_rounding(void)
{
    static const struct {
        int64_t ns;
        const char *seconds;
    } cases[] = {
        {0, "0"},
        {1, "1"},
        {SECOND - 1, "1"},
        {SECOND, "1"},
        {SECOND + 1, "2"},
        {3600 * SECOND, "3600"},
        {3600 * SECOND + 1, "3601"},
        {INT64_MAX - 1, "9223372037"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_headers headers;
        char want[64];
        cr_decision d = decision_of(false, 5, 0, cases[i].ns, cases[i].ns);
        CHECK_EQ_I64(cr_headers_format(&headers, &d, cases[i].ns, "p", 1, true), CR_OK,
                     "ns %" PRId64, cases[i].ns);
        snprintf(want, sizeof want, "\"p\";q=5;w=%s", cases[i].seconds);
        CHECK_EQ_STR(field(&headers, "RateLimit-Policy"), want, "w of %" PRId64 " ns", cases[i].ns);
        snprintf(want, sizeof want, "\"p\";r=0;t=%s", cases[i].seconds);
        CHECK_EQ_STR(field(&headers, "RateLimit"), want, "t of %" PRId64 " ns", cases[i].ns);
        CHECK_EQ_STR(field(&headers, "X-RateLimit-Reset"), cases[i].seconds, "legacy reset");
        const char *retry = cases[i].ns == 0 ? "1" : cases[i].seconds;
        CHECK_EQ_STR(field(&headers, "Retry-After"), retry, "Retry-After of %" PRId64 " ns",
                     cases[i].ns);
    }
}

static void test_names(void)
{
    cr_headers headers;
    cr_decision d = decision_of(true, 10, 9, 0, SECOND);
    CHECK_EQ_I64(cr_headers_format(&headers, &d, SECOND, "a\"b\\c", 5, false), CR_OK, "escapes");
    CHECK_EQ_STR(field(&headers, "RateLimit"), "\"a\\\"b\\\\c\";r=9;t=1", "quote and backslash");

    char longest[2 * CR_HEADER_NAME_MAX];
    memset(longest, '"', sizeof longest);
    CHECK_EQ_I64(cr_headers_format(&headers, &d, INT64_MAX, longest, CR_HEADER_NAME_MAX, true),
                 CR_OK, "the longest name, every byte escaped, with the widest numbers");
    CHECK_EQ_I64(strlen(field(&headers, "RateLimit-Policy")),
                 2 * CR_HEADER_NAME_MAX + 2 + strlen(";q=10;w=9223372037"), "not truncated");
    d = decision_of(true, INT64_MAX, INT64_MAX, 0, 0);
    CHECK_EQ_I64(cr_headers_format(&headers, &d, 0, "p", 1, true), CR_OK, "the widest integers");
    CHECK_EQ_STR(field(&headers, "RateLimit-Policy"), "\"p\";q=9223372036854775807;w=0",
                 "nineteen digits, and a zero");
    CHECK_EQ_STR(field(&headers, "X-RateLimit-Remaining"), "9223372036854775807", "legacy r");

    static const struct {
        const char *name;
        size_t len;
    } bad[] = {
        {"", 0}, {"tab\there", 8}, {"nul\0x", 5}, {"del\x7f", 4}, {"caf\xc3\xa9", 5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        headers.count = 99;
        CHECK_EQ_I64(cr_headers_format(&headers, &d, SECOND, bad[i].name, bad[i].len, false),
                     CR_E_HEADER_NAME, "bad name %zu", i);
        CHECK_EQ_I64(headers.count, 0, "nothing filled for bad name %zu", i);
        CHECK_EQ_I64(cr_headers_check_name(bad[i].name, bad[i].len), CR_E_HEADER_NAME,
                     "bad name %zu checked", i);
    }
    CHECK_EQ_I64(cr_headers_check_name(longest, CR_HEADER_NAME_MAX + 1), CR_E_HEADER_NAME,
                 "a name one byte too long, checked");
    CHECK_EQ_I64(cr_headers_check_name(longest, CR_HEADER_NAME_MAX), CR_OK,
                 "the longest name, checked");
    CHECK_EQ_I64(cr_headers_check_name("a\"b\\c", 5), CR_OK, "quote and backslash, checked");
    CHECK_EQ_I64(cr_headers_format(&headers, &d, SECOND, longest, CR_HEADER_NAME_MAX + 1, false),
                 CR_E_HEADER_NAME, "a name one byte too long");
    CHECK_EQ_STR(cr_status_param(CR_E_HEADER_NAME), "name", "the parameter is named");

    /* NULL is the core's default name, whatever the length beside it. */
    d = decision_of(false, 10, 0, SECOND, SECOND);
    CHECK_EQ_I64(cr_headers_format(&headers, &d, SECOND, NULL, 3, false), CR_OK, "NULL name");
    CHECK_EQ_STR(field(&headers, "RateLimit-Policy"), "\"" CR_HEADER_DEFAULT_NAME "\";q=10;w=1",
                 "NULL is the default name");
    CHECK_EQ_STR(CR_HEADER_DEFAULT_NAME, "default", "the default policy name");
    CHECK_EQ_I64(cr_headers_check_name(NULL, 0), CR_OK, "NULL name, checked");
}

static void test_bad_values(void)
{
    cr_headers headers;
    const cr_decision bad[] = {
        decision_of(true, -1, 0, 0, 0),
        decision_of(true, 1, -1, 0, 0),
        decision_of(false, 1, 0, -1, 0),
        decision_of(true, 1, 0, 0, -1),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_I64(cr_headers_format(&headers, &bad[i], SECOND, "p", 1, false), CR_E_HEADER_VALUE,
                     "negative field %zu", i);
    cr_decision good = decision_of(true, 1, 0, 0, 0);
    CHECK_EQ_I64(cr_headers_format(&headers, &good, -1, "p", 1, false), CR_E_HEADER_VALUE,
                 "negative window");

    int64_t ns = 0;
    CHECK_EQ_I64(cr_duration_from_seconds(INFINITY, &ns), CR_OK, "+inf");
    CHECK_EQ_I64(ns, CR_NEVER, "+inf is CR_NEVER, as cr_ns_to_seconds maps it");
    CHECK_EQ_I64(cr_duration_from_seconds(1.5, &ns), CR_OK, "1.5 s");
    CHECK_EQ_I64(ns, 1500000000, "1.5 s in ns");
    CHECK_EQ_I64(cr_duration_from_seconds(cr_ns_to_seconds(12345678901), &ns), CR_OK, "round");
    CHECK_EQ_I64(ns, 12345678901, "seconds from ns convert back exactly");
    CHECK_EQ_I64(cr_duration_from_seconds(-0.5, &ns), CR_E_HEADER_VALUE, "negative");
    CHECK_EQ_I64(cr_duration_from_seconds(NAN, &ns), CR_E_HEADER_VALUE, "NaN");
    CHECK_EQ_I64(cr_duration_from_seconds(-INFINITY, &ns), CR_E_HEADER_VALUE, "-inf");
    CHECK_EQ_I64(cr_duration_from_seconds(1e10, &ns), CR_E_HEADER_VALUE, "beyond 2^63 ns");
}

/* Every field read back: the integers are the decision's, each time is the
 * least whole number of seconds not below it, and Retry-After is present
 * exactly on a fittable refusal, never 0. */
static void test_fields_match_decisions(void)
{
    uint64_t state = 12345;
    int mismatches = 0;
    for (int i = 0; i < 200000; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        const int64_t T = 1 + (int64_t)((state >> 33) % (3 * SECOND));
        const int64_t burst = 1 + (int64_t)((state >> 13) % 50);
        const cr_limit limit = limit_of(T, burst);
        const int64_t now = 1000 * SECOND + (int64_t)((state >> 20) % (10 * SECOND));
        const int64_t tat = now + (int64_t)((state >> 7) % (uint64_t)(limit.tolerance_ns + 1)) -
                            limit.tolerance_ns / 4;
        const int64_t cost = (int64_t)((state >> 3) % 4);
        cr_decision d;
        cr_decide(&limit, tat, now, cost, &d);
        cr_headers headers;
        if (cr_headers_format(&headers, &d, cr_limit_window_ns(&limit), "x", 1, true) != CR_OK) {
            mismatches++;
            continue;
        }
        long long q, w, r, t, retry = -1, reset = -1;
        const char *retry_text = field(&headers, "Retry-After");
        bool ok = sscanf(field(&headers, "RateLimit-Policy"), "\"x\";q=%lld;w=%lld", &q, &w) == 2 &&
                  sscanf(field(&headers, "RateLimit"), "\"x\";r=%lld;t=%lld", &r, &t) == 2 &&
                  sscanf(field(&headers, "X-RateLimit-Reset"), "%lld", &reset) == 1;
        ok = ok && q == d.limit && r == d.remaining && reset == t;
        ok = ok && (w - 1) * SECOND < limit.tolerance_ns && limit.tolerance_ns <= w * SECOND;
        ok = ok && (t == 0 ? d.reset_after_ns == 0
                           : (t - 1) * SECOND < d.reset_after_ns && d.reset_after_ns <= t * SECOND);
        const bool wants_retry = !d.allowed && d.retry_after_ns != CR_NEVER;
        ok = ok && (retry_text != NULL) == wants_retry;
        for (int f = 0; f < headers.count; f++)
            ok = ok && headers.field[f].value_len == strlen(headers.field[f].value);
        if (ok && wants_retry)
            ok = sscanf(retry_text, "%lld", &retry) == 1 && retry >= 1 &&
                 (retry - 1) * SECOND < d.retry_after_ns && d.retry_after_ns <= retry * SECOND;
        if (!ok && mismatches++ < 5)
            fprintf(stderr,
                    "mismatch: T=%" PRId64 " burst=%" PRId64 " tat=%" PRId64 " now=%" PRId64
                    " cost=%" PRId64 "\n",
                    T, burst, tat, now, cost);
    }
    CHECK_EQ_I64(mismatches, 0, "fields parse back to their decisions");
}

int main(void)
{
    test_known_fields();
    test_window_of_each_algorithm();
    test_rounding();
    test_names();
    test_bad_values();
    test_fields_match_decisions();
    return check_summary("test_headers");
}
