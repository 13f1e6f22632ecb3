/*
 * libFuzzer target: the rate parser and limit validation (docs/design.md §3, §13).
 *
 * Input: one flags byte, then (as the flags say) a period, a burst and a
 * numeric rate as raw 8-byte values, then the rate text. Checked:
 * - cr_parse_rate agrees with an independent reading of the grammar: the
 *   number is strtod's (correctly rounded) and the period is the count times
 *   the unit; whatever it refuses, it refuses without reading past `len`.
 * - cr_limit_init either refuses with a status whose message starts with the
 *   parameter it names, or returns a limit that satisfies every rule of §3:
 *   T >= 1, burst >= 1 (the given one, or max(1, ceil(rate))), tau = T * burst
 *   without overflow, T within one of period * 1e9 / rate.
 * - cr_seconds_to_ns (every `now` of both faces) on the numeric rate's bits:
 *   refused unless 0 <= s * 1e9 < 2^63 (or the horizon, where there is one), else exactly s * 1e9 rounded half away
 *   from zero, computed in binary128 (53 + 30 bits fit in its 113).
 */
#include "cellrate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL_SECONDS(seconds, what)                                          \
    do {                                                                     \
        fprintf(stderr, "cr_seconds_to_ns(%.17g): %s\n", (seconds), (what)); \
        abort();                                                             \
    } while (0)

static char lower(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch; }

/* The seconds a unit word names, 0 for none (an independent table). */
static double unit_seconds(const char *word, size_t len)
{
    static const struct {
        const char *name;
        double seconds;
    } names[] = {
        {"ns", 1e-9},
        {"nanosecond", 1e-9},
        {"nanoseconds", 1e-9},
        {"us", 1e-6},
        {"microsecond", 1e-6},
        {"microseconds", 1e-6},
        {"ms", 1e-3},
        {"millisecond", 1e-3},
        {"milliseconds", 1e-3},
        {"s", 1},
        {"sec", 1},
        {"secs", 1},
        {"second", 1},
        {"seconds", 1},
        {"m", 60},
        {"min", 60},
        {"mins", 60},
        {"minute", 60},
        {"minutes", 60},
        {"h", 3600},
        {"hr", 3600},
        {"hrs", 3600},
        {"hour", 3600},
        {"hours", 3600},
        {"d", 86400},
        {"day", 86400},
        {"days", 86400},
        {"w", 604800},
        {"wk", 604800},
        {"wks", 604800},
        {"week", 604800},
        {"weeks", 604800},
    };
    char buf[16];
    if (len >= sizeof buf)
        return 0;
    for (size_t i = 0; i < len; i++)
        buf[i] = lower(word[i]);
    buf[len] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(buf, names[i].name) == 0)
            return names[i].seconds;
    return 0;
}

/* strtod of the run of digits and points at text[*at], moving *at past it. */
static double read_number(const char *text, size_t len, size_t *at)
{
    size_t start = *at;
    while (*at < len && ((text[*at] >= '0' && text[*at] <= '9') || text[*at] == '.'))
        (*at)++;
    size_t n = *at - start;
    char *copy = malloc(n + 1);
    memcpy(copy, text + start, n);
    copy[n] = '\0';
    double value = strtod(copy, NULL);
    free(copy);
    return value;
}

static void skip_spaces(const char *text, size_t len, size_t *at)
{
    while (*at < len && text[*at] == ' ')
        (*at)++;
}

/* The reading of an accepted text: every accepted text has this shape. */
static void check_parse(const char *text, size_t len, double rate, double period)
{
    size_t at = 0;
    skip_spaces(text, len, &at);
    double units = read_number(text, len, &at);
    if (units != rate) {
        fprintf(stderr, "rate %.17g, strtod reads %.17g\n", rate, units);
        abort();
    }
    skip_spaces(text, len, &at);
    at += text[at] == '/' ? 1 : 3; /* "/" or "per" */
    skip_spaces(text, len, &at);
    double count = 1;
    if (at < len && ((text[at] >= '0' && text[at] <= '9') || text[at] == '.')) {
        count = read_number(text, len, &at);
        skip_spaces(text, len, &at);
    }
    size_t word = at;
    while (at < len && lower(text[at]) >= 'a' && lower(text[at]) <= 'z')
        at++;
    double unit = unit_seconds(text + word, at - word);
    if (unit == 0 || count * unit != period) {
        fprintf(stderr, "period %.17g, expected %.17g * %.17g\n", period, count, unit);
        abort();
    }
}

static void check_status(cr_status status)
{
    if ((unsigned)status >= CR_STATUS_COUNT)
        abort();
    const char *param = cr_status_param(status);
    const char *message = cr_strerror(status);
    if (status != CR_OK && (param[0] == '\0' || strncmp(message, param, strlen(param)) != 0)) {
        fprintf(stderr, "status %d: message \"%s\" does not name \"%s\"\n", (int)status, message,
                param);
        abort();
    }
}

static void check_seconds(double seconds)
{
    int64_t ns = -1;
    cr_status status = cr_seconds_to_ns(seconds, &ns);
    __float128 exact = (__float128)seconds * 1000000000;
#ifdef CR_HORIZON_NS
    const __float128 limit = (__float128)CR_HORIZON_NS; /* times end at the horizon */
#else
    const __float128 limit = (__float128)9223372036854775807.0 + 1; /* 2^63 */
#endif
    bool representable = seconds >= 0 && exact < limit;
    if (!representable) {
        if (status != CR_E_NOW)
            FAIL_SECONDS(seconds, "accepted");
        return;
    }
    int64_t whole = (int64_t)exact; /* truncates: exact >= 0 */
    int64_t want = whole + (exact - whole >= (__float128)0.5 ? 1 : 0);
    if ((__float128)want >= limit || want < 0) /* rounds up to the limit */
        return;
    if (status != CR_OK || ns != want)
        FAIL_SECONDS(seconds, "converted wrong");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    data++;
    size--;
    cr_limit_args args;
    memset(&args, 0, sizeof args);
    args.rate = 10;
    if ((flags & 1) && size >= 8) {
        memcpy(&args.period_s, data, 8);
        args.has_period = true;
        data += 8;
        size -= 8;
    }
    if ((flags & 2) && size >= 8) {
        memcpy(&args.burst, data, 8);
        args.has_burst = true;
        data += 8;
        size -= 8;
    }
    if ((flags & 4) && size >= 8) {
        memcpy(&args.rate, data, 8);
        data += 8;
        size -= 8;
    }
    if (flags & 8)
        args.clock = (flags & 16) ? "fast" : "monotonic", args.clock_len = (flags & 16) ? 4 : 9;

    /* The text in a buffer of exactly its size: ASan sees any read past it. */
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    if (!(flags & 4)) {
        args.rate_text = text;
        args.rate_text_len = size;
    }

    check_seconds(args.rate);
    check_seconds(args.period_s);

    double rate = -1, period = -1;
    cr_status status = cr_parse_rate(text, size, &rate, &period);
    check_status(status);
    if (status == CR_OK)
        check_parse(text, size, rate, period);

    cr_limit limit;
    status = cr_limit_init(&limit, &args);
    check_status(status);
    if (status == CR_OK) {
        double want_rate = args.rate_text ? rate : args.rate;
        double want_period = args.rate_text ? period : args.has_period ? args.period_s : 1.0;
        int64_t tau;
        if (limit.emission_ns < 1 || limit.burst < 1 ||
            __builtin_mul_overflow(limit.emission_ns, limit.burst, &tau) ||
            tau != limit.tolerance_ns || !(limit.rate > 0) || !isfinite(limit.rate) ||
            !(limit.period_s > 0) || !isfinite(limit.period_s) || limit.rate != want_rate ||
            limit.period_s != want_period)
            abort();
        int64_t want_burst = args.has_burst ? args.burst
                                            : (ceil(want_rate) < 1 ? 1 : (int64_t)ceil(want_rate));
        if (limit.burst != want_burst)
            abort();
        double interval = want_period * 1e9 / want_rate;
        if (fabs((double)limit.emission_ns - interval) > 1.0 + interval * 1e-15)
            abort();
    }
    free(text);
    return 0;
}
