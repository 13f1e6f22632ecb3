/*
 * A fleet share's member rules (cellrate/share.h) against
 * tests/vectors/share.txt, the reference model's (tests/model/share_model.py):
 * the local limit of a share, the share of a local limit, the units asked
 * from the counters, a heartbeat's numbers, the reply read, the step after.
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <math.h>
#include <stdlib.h>

/* The same double: bit for bit, any NaN as any other. */
static bool same(double got, double want)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    return got == want && signbit(got) == signbit(want);
}

#define CHECK_SAME(got, want, ...) CHECK(same((got), (want)), __VA_ARGS__)

static cr_limit fleet_of(double rate, double period_s, int64_t burst, const char *algorithm)
{
    cr_limit_args args = {.rate = rate,
                          .period_s = period_s,
                          .has_period = true,
                          .burst = burst,
                          .has_burst = algorithm == NULL,
                          .algorithm = algorithm,
                          .algorithm_len = algorithm ? strlen(algorithm) : 0};
    cr_limit fleet;
    memset(&fleet, 0, sizeof fleet);
    const cr_status status = cr_limit_init(&fleet, &args);
    CHECK_EQ_STR(cr_status_name(status), "OK", "the fleet %.17g per %.17g s, burst %" PRId64, rate,
                 period_s, burst);
    return fleet;
}

static bool flag(int value) { return value != 0; }

/* "-" is the empty text. */
static size_t text_len(const char *text) { return strcmp(text, "-") == 0 ? 0 : strlen(text); }

static void check_line(const char *line, int lineno)
{
    char name[64], status[64], a[128], b[128];
    double rate, period, share, local_rate, local_period, x, y, z, w;
    long long burst, local_burst, emission, admitted, refused, refunded, baseline, asked, counted,
        members;
    int i, j, k, l;
    unsigned long long value;

    if (sscanf(line, "constant %63s %llu", name, &value) == 2 &&
        strcmp(name, "floor_divisor") == 0) {
        CHECK_EQ_I64(CR_SHARE_FLOOR_DIVISOR, value, "share.txt:%d", lineno);
    } else if (sscanf(line, "constant %63s %lf", name, &x) == 2 &&
               strcmp(name, "cold_start") == 0) {
        CHECK_SAME(CR_SHARE_COLD_START, x, "share.txt:%d", lineno);
    } else if (sscanf(line, "constant %63s %llu", name, &value) == 2 &&
               strcmp(name, "slowest_ns") == 0) {
        CHECK_EQ_I64(CR_SHARE_SLOWEST_NS, value, "share.txt:%d", lineno);
    } else if (sscanf(line, "constant %63s %lf", name, &x) == 2 && strcmp(name, "unknown") == 0) {
        CHECK_SAME(CR_SHARE_UNKNOWN, x, "share.txt:%d", lineno);
    } else if (sscanf(line, "local %lf %lf %lld %lf %63s %lf %lf %lld %lld", &rate, &period, &burst,
                      &share, status, &local_rate, &local_period, &local_burst, &emission) == 9) {
        const cr_limit fleet = fleet_of(rate, period, burst, NULL);
        cr_limit local;
        memset(&local, 0, sizeof local);
        const cr_status got = cr_share_local_limit(&fleet, share, &local);
        CHECK_EQ_STR(cr_status_name(got), status, "share.txt:%d", lineno);
        if (got != CR_OK)
            return;
        CHECK_SAME(local.rate, local_rate, "share.txt:%d: rate %.17g", lineno, local.rate);
        CHECK_SAME(local.period_s, local_period, "share.txt:%d: period", lineno);
        CHECK_EQ_I64(local.burst, local_burst, "share.txt:%d", lineno);
        CHECK_EQ_I64(local.emission_ns, emission, "share.txt:%d", lineno);
        CHECK(local.tolerance_ns <= CR_HORIZON_NS, "share.txt:%d: a limit the core takes", lineno);
        CHECK(local.burst <= fleet.burst, "share.txt:%d: never more than the fleet's", lineno);
    } else if (sscanf(line, "algorithm %63s %lf %lf %lf %63s", name, &rate, &period, &share,
                      status) == 5) {
        const cr_limit fleet = fleet_of(rate, period, 0, name);
        cr_limit local;
        CHECK_EQ_STR(cr_status_name(cr_share_local_limit(&fleet, share, &local)), status,
                     "share.txt:%d", lineno);
    } else if (sscanf(line, "of %lf %lf %lld %lf %lf %lf", &rate, &period, &burst, &local_rate,
                      &local_period, &share) == 6) {
        const cr_limit fleet = fleet_of(rate, period, burst, NULL);
        CHECK_SAME(cr_share_of_rate(&fleet, local_rate, local_period), share, "share.txt:%d",
                   lineno);
    } else if (sscanf(line, "asked %lld %lld %lld %lld %lld %lld", &admitted, &refused, &refunded,
                      &baseline, &asked, &counted) == 6) {
        const cr_stats stats = {.units_admitted = (uint64_t)admitted,
                                .units_refused = (uint64_t)refused,
                                .units_refunded = (uint64_t)refunded};
        uint64_t now = 0;
        CHECK_EQ_I64(cr_share_asked(&stats, (uint64_t)baseline, &now), asked, "share.txt:%d",
                     lineno);
        CHECK_EQ_I64(now, counted, "share.txt:%d", lineno);
    } else if (sscanf(line, "report %lf %lf %lld %lf %lf %d %lf %d %lf %lf %lf", &rate, &period,
                      &burst, &x, &y, &i, &share, &j, &z, &w, &local_rate) == 11) {
        const cr_limit fleet = fleet_of(rate, period, burst, NULL);
        const cr_share_report report = cr_share_report_of(&fleet, x, y, flag(i), share, flag(j));
        CHECK_SAME(report.demand, z, "share.txt:%d: demand", lineno);
        CHECK_SAME(report.held, w, "share.txt:%d: held", lineno);
        CHECK_SAME(report.fleet_rate, local_rate, "share.txt:%d: fleet_rate", lineno);
    } else if (sscanf(line, "reply %127s %lld %127s %63s %lf %lf", a, &members, b, status, &x,
                      &y) == 6) {
        cr_share_reply reply = {.share = -2, .members = -2, .target = -2};
        const cr_status got = cr_share_read_reply(a, text_len(a), (int64_t)members, b, text_len(b),
                                                  &reply);
        CHECK_EQ_STR(cr_status_name(got), status, "share.txt:%d", lineno);
        if (got == CR_OK) {
            CHECK_SAME(reply.share, x, "share.txt:%d: share", lineno);
            CHECK_SAME(reply.target, y, "share.txt:%d: target", lineno);
            CHECK_EQ_I64(reply.members, members, "share.txt:%d", lineno);
        } else {
            CHECK(reply.share == -2 && reply.members == -2, "share.txt:%d: untouched", lineno);
        }
    } else if (sscanf(line, "after %63s %lf %d %lf %lf %lf %d %d", name, &share, &i, &x, &y, &z, &k,
                      &l) == 8) {
        int outcome = 0;
        while (outcome < CR_SHARE_OUTCOMES &&
               strcmp(cr_share_outcome_name((cr_share_outcome)outcome), name) != 0)
            outcome++;
        if (!CHECK(outcome < CR_SHARE_OUTCOMES, "share.txt:%d: outcome %s", lineno, name))
            return;
        const cr_share_step step = cr_share_after((cr_share_outcome)outcome, share, flag(i), x, y);
        CHECK_SAME(step.share, z, "share.txt:%d: share", lineno);
        CHECK_EQ_I64(step.apply, k, "share.txt:%d: apply", lineno);
        CHECK_EQ_I64(step.confirm, l, "share.txt:%d: confirm", lineno);
    } else {
        CHECK(false, "share.txt:%d: unreadable: %s", lineno, line);
    }
}

static void test_vectors(const char *dir)
{
    FILE *file = vectors_open(dir, "share.txt");
    char line[1024];
    int lineno = 0, lines = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        lines++;
        check_line(line, lineno);
    }
    fclose(file);
    CHECK(lines > 300, "share.txt: %d lines read", lines);
}

/* Outside the vectors: names out of range, a text read within its length. */
static void test_names_and_bounds(void)
{
    CHECK_EQ_STR(cr_share_outcome_name(CR_SHARE_OUTCOMES), "", "out of range");
    CHECK_EQ_STR(cr_share_outcome_name((cr_share_outcome)-1), "", "out of range");
    const cr_share_step step = cr_share_after(CR_SHARE_OUTCOMES, 0.25, true, 0.5, 1.0);
    CHECK(step.share == 0.25 && !step.apply && !step.confirm, "an unknown outcome changes nothing");
    cr_share_reply reply;
    CHECK_EQ_I64(cr_share_read_reply(NULL, 0, 1, "0.5", 3, &reply), CR_E_SHARE_REPLY, "no text");
    CHECK_EQ_I64(cr_share_read_reply("0.5", 3, 1, "0.5x", 3, &reply), CR_OK, "its length only");
    CHECK_SAME(reply.target, 0.5, "the text's length bounds it");
    CHECK_EQ_STR(cr_status_class_of(CR_E_SHARE_REPLY) == CR_STATUS_RUNTIME ? "runtime" : "other",
                 "runtime", "a reply not the script's is a failure of the moment");
}

int main(int argc, char **argv)
{
    test_vectors(argc > 1 ? argv[1] : "tests/vectors");
    test_names_and_bounds();
    return check_summary("test_share");
}
