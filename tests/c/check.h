/* A minimal check harness for the C tests: count, report, exit status.
 * Every CHECK takes a printf-style context after its operands. */
#ifndef CELLRATE_TEST_CHECK_H
#define CELLRATE_TEST_CHECK_H

#include "cellrate.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_passed;
static int check_failed;

/* Failures print at most this many lines; the counts stay exact. */
#define CHECK_MAX_REPORTS 40

__attribute__((format(printf, 4, 0))) static inline void
check_vreport(const char *file, int line, const char *what, const char *fmt, va_list ap)
{
    check_failed++;
    if (check_failed > CHECK_MAX_REPORTS)
        return;
    fprintf(stderr, "%s:%d: FAIL: %s; ", file, line, what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

__attribute__((format(printf, 5, 6))) static inline bool
check_true_at(const char *file, int line, const char *expr, bool ok, const char *fmt, ...)
{
    if (ok) {
        check_passed++;
        return true;
    }
    va_list ap;
    va_start(ap, fmt);
    check_vreport(file, line, expr, fmt, ap);
    va_end(ap);
    return false;
}

__attribute__((format(printf, 6, 7))) static inline bool check_i64_at(const char *file, int line,
                                                                      const char *expr, int64_t got,
                                                                      int64_t want, const char *fmt,
                                                                      ...)
{
    if (got == want) {
        check_passed++;
        return true;
    }
    char what[256];
    snprintf(what, sizeof what, "%s = %" PRId64 ", want %" PRId64, expr, got, want);
    va_list ap;
    va_start(ap, fmt);
    check_vreport(file, line, what, fmt, ap);
    va_end(ap);
    return false;
}

__attribute__((format(printf, 6, 7))) static inline bool
check_str_at(const char *file, int line, const char *expr, const char *got, const char *want,
             const char *fmt, ...)
{
    if (got && want && strcmp(got, want) == 0) {
        check_passed++;
        return true;
    }
    char what[512];
    snprintf(what, sizeof what, "%s = \"%s\", want \"%s\"", expr, got ? got : "(null)",
             want ? want : "(null)");
    va_list ap;
    va_start(ap, fmt);
    check_vreport(file, line, what, fmt, ap);
    va_end(ap);
    return false;
}

#define CHECK(cond, ...) check_true_at(__FILE__, __LINE__, #cond, (cond), __VA_ARGS__)
#define CHECK_EQ_I64(got, want, ...) \
    check_i64_at(__FILE__, __LINE__, #got, (int64_t)(got), (int64_t)(want), __VA_ARGS__)
#define CHECK_EQ_STR(got, want, ...) \
    check_str_at(__FILE__, __LINE__, #got, (got), (want), __VA_ARGS__)

/* Prints "<name>: N passed, M failed" and returns the exit status. */
static inline int check_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

/* A limit given by its emission interval and burst, as the vectors state it. */
static inline cr_limit limit_of(int64_t emission_ns, int64_t burst)
{
    cr_limit limit;
    memset(&limit, 0, sizeof limit);
    limit.emission_ns = emission_ns;
    limit.burst = burst;
    limit.tolerance_ns = emission_ns * burst;
    limit.rate = 1.0;
    limit.period_s = (double)emission_ns / 1e9;
    limit.max_debt = burst; /* cr_limit_init's default */
    return limit;
}

/* A window algorithm's limit: `rate` units per window of `window_ns` (the
 * fields as cr_limit_init fills them, documented in core/cellrate/limit.h). */
static inline cr_limit window_limit_of(cr_algorithm algorithm, int64_t window_ns, int64_t rate)
{
    cr_limit limit;
    memset(&limit, 0, sizeof limit);
    limit.algorithm = algorithm;
    limit.tolerance_ns = window_ns;
    limit.burst = rate;
    limit.emission_ns = window_ns / rate > 0 ? window_ns / rate : 1;
    limit.window_inverse = UINT64_MAX / (uint64_t)window_ns;
    limit.count_inverse = UINT64_MAX / ((uint64_t)rate + 1);
    limit.rate = (double)rate;
    limit.period_s = (double)window_ns / 1e9;
    limit.max_debt = rate; /* cr_limit_init's default */
    return limit;
}

#endif
