/* A fleet share's member rules (cellrate/share.h): the local limit of a
 * share, the heartbeat's report and reply, the step after each heartbeat.
 * The split itself is the server script's (redis/share.lua). */
#include "cellrate/share.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fraction of the fleet: NaN and below 0 are 0 (-0 too), above 1 is 1. */
static double fraction(double share)
{
    if (share > 1)
        return 1;
    return share > 0 ? share : 0.0;
}

cr_status cr_share_local_limit(const cr_limit *fleet, double share, cr_limit *local)
{
    if (fleet->algorithm != CR_ALGORITHM_GCRA && fleet->algorithm != CR_ALGORITHM_TOKEN_BUCKET)
        return CR_E_ALGORITHM;
    share = fraction(share);
    /* never below the slowest rate, nor above the fleet's (a fleet slower still) */
    double slowest = fleet->period_s * 1e9 / (double)CR_SHARE_SLOWEST_NS;
    if (slowest > fleet->rate)
        slowest = fleet->rate;
    double rate = fleet->rate * share;
    if (rate < slowest)
        rate = slowest;
    /* burst * share as a double, floored: at most 2^62, so the conversion is exact;
     * a burst beyond 2^53 rounds up to a double above it, hence the fleet's cap */
    const double scaled = floor((double)fleet->burst * share);
    int64_t burst = scaled < 1 ? 1 : (int64_t)scaled;
    if (burst > fleet->burst)
        burst = fleet->burst;

    const char *algorithm = cr_algorithm_name(fleet->algorithm);
    cr_limit_args args = {.rate = rate,
                          .period_s = fleet->period_s,
                          .has_period = true,
                          .burst = 1,
                          .has_burst = true,
                          .algorithm = algorithm,
                          .algorithm_len = strlen(algorithm)};
    /* T as the local limiter derives it (burst 1 always fits: T <= the horizon),
     * then the burst that keeps T * burst within the horizon: a share of a fleet
     * near the ceilings rounds T up, and burst * share would not fit beside it */
    cr_limit unit;
    const cr_status status = cr_limit_init(&unit, &args);
    if (status != CR_OK)
        return status;
    if (burst > CR_HORIZON_NS / unit.emission_ns)
        burst = CR_HORIZON_NS / unit.emission_ns;
    args.burst = burst;
    return cr_limit_init(local, &args);
}

double cr_share_of_rate(const cr_limit *fleet, double rate, double period_s)
{
    return fraction((rate / period_s) / (fleet->rate / fleet->period_s));
}

uint64_t cr_share_asked(const cr_stats *stats, uint64_t baseline, uint64_t *counted)
{
    uint64_t asked;
    if (__builtin_add_overflow(stats->units_admitted, stats->units_refused, &asked))
        asked = UINT64_MAX;
    asked = asked > stats->units_refunded ? asked - stats->units_refunded : 0;
    if (asked > (uint64_t)CR_COUNT_MAX)
        asked = (uint64_t)CR_COUNT_MAX;
    *counted = asked;
    return asked > baseline ? asked - baseline : 0;
}

cr_share_report cr_share_report_of(const cr_limit *fleet, double asked, double elapsed_s,
                                   bool known, double share, bool joined)
{
    cr_share_report report = {.demand = CR_SHARE_UNKNOWN,
                              .held = joined ? fraction(share) : 0.0,
                              .fleet_rate = fleet->rate / fleet->period_s};
    if (known && elapsed_s > 0 && elapsed_s < INFINITY && asked >= 0 && asked < INFINITY) {
        /* more than the whole fleet splits as the whole fleet does (the script's
         * bound): said as the fleet's rate, never as an infinity */
        report.demand = asked / elapsed_s;
        if (!(report.demand <= report.fleet_rate))
            report.demand = report.fleet_rate;
    }
    return report;
}

/* Significant digits a decimal text may carry (%.17g writes 17). */
#define REPLY_DIGITS_MAX 40

/* A decimal text (digits, an optional point, an optional exponent; no sign,
 * no space) as the double nearest to it. strtod alone would read the point
 * of the C library's locale (a comma in some): the digits go to it with an
 * exponent and no point, which every locale reads alike. */
static bool read_decimal(const char *text, size_t len, double *value)
{
    char digits[REPLY_DIGITS_MAX + 1];
    size_t count = 0, at = 0;
    long exponent = 0;
    bool point = false, any = false;
    for (; at < len; at++) {
        const char ch = text[at];
        if (ch == '.' && !point) {
            point = true;
            continue;
        }
        if (ch < '0' || ch > '9')
            break;
        any = true;
        exponent -= point;
        if (count == 0 && ch == '0')
            continue; /* a leading zero */
        if (count == REPLY_DIGITS_MAX)
            return false;
        digits[count++] = ch;
    }
    if (!any)
        return false;
    if (at < len && (text[at] == 'e' || text[at] == 'E')) {
        at++;
        const bool negative = at < len && text[at] == '-';
        if (at < len && (text[at] == '-' || text[at] == '+'))
            at++;
        const size_t start = at;
        long power = 0;
        for (; at < len && text[at] >= '0' && text[at] <= '9'; at++)
            if (power < 100000) /* beyond, every value is 0 or infinite alike */
                power = power * 10 + (text[at] - '0');
        if (at == start)
            return false;
        exponent += negative ? -power : power;
    }
    if (at != len)
        return false;
    if (count == 0) {
        *value = 0;
        return true;
    }
    char decimal[REPLY_DIGITS_MAX + 32];
    snprintf(decimal, sizeof decimal, "%.*se%ld", (int)count, digits, exponent);
    *value = strtod(decimal, NULL);
    return true;
}

static bool read_fraction(const char *text, size_t len, double *value)
{
    return text != NULL && read_decimal(text, len, value) && *value >= 0 && *value <= 1;
}

cr_status cr_share_read_reply(const char *share, size_t share_len, int64_t members,
                              const char *target, size_t target_len, cr_share_reply *reply)
{
    cr_share_reply read = {.members = members};
    if (!read_fraction(share, share_len, &read.share) ||
        !read_fraction(target, target_len, &read.target) || members < 1)
        return CR_E_SHARE_REPLY;
    *reply = read;
    return CR_OK;
}

static const char *const outcome_names[CR_SHARE_OUTCOMES] = {"answered", "confirmed", "unavailable",
                                                             "refused", "left"};

const char *cr_share_outcome_name(cr_share_outcome outcome)
{
    return (unsigned)outcome < CR_SHARE_OUTCOMES ? outcome_names[outcome] : "";
}

cr_share_step cr_share_after(cr_share_outcome outcome, double share, bool joined, double held,
                             double answered)
{
    cr_share_step step = {.share = share, .apply = false, .confirm = false};
    switch (outcome) {
    case CR_SHARE_ANSWERED:
    case CR_SHARE_CONFIRMED:
        step.share = fraction(answered);
        step.apply = true;
        step.confirm = outcome == CR_SHARE_ANSWERED && step.share < held;
        break;
    case CR_SHARE_UNAVAILABLE:
        step.apply = joined; /* the cold start stays; once joined, never more than the last */
        break;
    case CR_SHARE_REFUSED:
    case CR_SHARE_LEFT:
        step.share = 0.0;
        step.apply = true;
        break;
    default:
        break;
    }
    return step;
}
