/*
 * The shared conformance vectors (tests/vectors/, written by the reference
 * model) through every C entry point that decides or derives:
 *   decisions.txt  cr_decide, cr_limiter_check and cr_keyed_check
 *   limits.txt     cr_limit_init (and cr_parse_rate for its status)
 *   seconds.txt    cr_seconds_to_ns
 *
 * usage: test_vectors [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static const char *status_name(cr_status status)
{
    return (unsigned)status < CR_STATUS_COUNT ? cr_status_name(status) : "(out of range)";
}

static FILE *open_vectors(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return file;
}

/* Strips the line end; returns false for blank lines and comments. */
static bool meaningful(char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    return line[0] != '\0' && line[0] != '#';
}

static void bad_line(const char *file, int lineno, const char *line)
{
    fprintf(stderr, "%s:%d: cannot read vector line: %s\n", file, lineno, line);
    exit(2);
}

/* ------------------------------------------------------------------------ */
/* decisions.txt                                                             */

typedef struct {
    cr_limit limit;
    cr_limiter *limiter;
    cr_keyed *keyed;
    cr_limiter *allow_limiter; /* driven by cr_limiter_allow where an op commits */
    cr_keyed *allow_keyed;     /* driven by cr_keyed_allow likewise */
    char key[32];
    int64_t tat; /* what cr_decide's caller stores */
} sequence;

static void sequence_end(sequence *seq)
{
    cr_limiter_free(seq->limiter);
    cr_keyed_free(seq->keyed);
    cr_limiter_free(seq->allow_limiter);
    cr_keyed_free(seq->allow_keyed);
    seq->limiter = NULL;
    seq->keyed = NULL;
    seq->allow_limiter = NULL;
    seq->allow_keyed = NULL;
}

static void sequence_start(sequence *seq, int64_t emission_ns, int64_t burst, int index)
{
    sequence_end(seq);
    seq->limit = limit_of(emission_ns, burst); /* the vectors keep tau within 63 bits */
    seq->tat = 0;
    snprintf(seq->key, sizeof seq->key, "sequence-%d", index);
    if (cr_limiter_new(&seq->limiter, &seq->limit) != CR_OK ||
        cr_keyed_new(&seq->keyed, &seq->limit, 64) != CR_OK ||
        cr_limiter_new(&seq->allow_limiter, &seq->limit) != CR_OK ||
        cr_keyed_new(&seq->allow_keyed, &seq->limit, 64) != CR_OK) {
        fprintf(stderr, "cannot make a limiter or a keyed table\n");
        exit(2);
    }
}

typedef struct {
    int64_t now, cost;
    int commit, allowed;
    int64_t remaining, retry_after, reset_after, tat_after;
} vector_op;

static void compare(const char *via, int lineno, const vector_op *op, int64_t burst,
                    const cr_decision *got)
{
    CHECK_EQ_I64(got->allowed, op->allowed, "%s, decisions.txt:%d", via, lineno);
    CHECK_EQ_I64(got->remaining, op->remaining, "%s, decisions.txt:%d", via, lineno);
    CHECK_EQ_I64(got->retry_after_ns, op->retry_after, "%s, decisions.txt:%d", via, lineno);
    CHECK_EQ_I64(got->reset_after_ns, op->reset_after, "%s, decisions.txt:%d", via, lineno);
    CHECK_EQ_I64(got->limit, burst, "%s, decisions.txt:%d", via, lineno);
}

static void run_op(sequence *seq, int lineno, const vector_op *op)
{
    cr_decision got;

    /* cr_decide returns the TAT an admission would store even for a peek. */
    memset(&got, 0xa5, sizeof got);
    int64_t stored = cr_decide(&seq->limit, seq->tat, op->now, op->cost, &got);
    compare("cr_decide", lineno, op, seq->limit.burst, &got);
    int64_t want_stored = op->commit ? op->tat_after
                          : (op->allowed && op->cost > 0) ? op->now + op->reset_after
                                                         : seq->tat;
    CHECK_EQ_I64(stored, want_stored, "cr_decide's TAT, decisions.txt:%d", lineno);
    seq->tat = op->tat_after;

    memset(&got, 0xa5, sizeof got);
    cr_status status = cr_limiter_check(seq->limiter, op->now, op->cost, op->commit, &got);
    CHECK_EQ_I64(status, CR_OK, "cr_limiter_check, decisions.txt:%d", lineno);
    compare("cr_limiter_check", lineno, op, seq->limit.burst, &got);

    memset(&got, 0xa5, sizeof got);
    status = cr_keyed_check(seq->keyed, seq->key, strlen(seq->key), op->now, op->cost, op->commit,
                            &got);
    CHECK_EQ_I64(status, CR_OK, "cr_keyed_check, decisions.txt:%d", lineno);
    compare("cr_keyed_check", lineno, op, seq->limit.burst, &got);

    /* The allow() fast paths: the same admissions, and so the same states. */
    if (op->commit) {
        bool allowed = !op->allowed;
        status = cr_limiter_allow(seq->allow_limiter, op->now, op->cost, &allowed);
        CHECK_EQ_I64(status, CR_OK, "cr_limiter_allow, decisions.txt:%d", lineno);
        CHECK_EQ_I64(allowed, op->allowed, "cr_limiter_allow, decisions.txt:%d", lineno);
        allowed = !op->allowed;
        status = cr_keyed_allow(seq->allow_keyed, seq->key, strlen(seq->key), op->now, op->cost,
                                &allowed);
        CHECK_EQ_I64(status, CR_OK, "cr_keyed_allow, decisions.txt:%d", lineno);
        CHECK_EQ_I64(allowed, op->allowed, "cr_keyed_allow, decisions.txt:%d", lineno);
    }
}

static int run_decisions(const char *dir)
{
    FILE *file = open_vectors(dir, "decisions.txt");
    char line[1024];
    int lineno = 0, ops = 0, sequences = 0;
    sequence seq = {0};
    bool started = false;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!meaningful(line))
            continue;
        int64_t emission_ns, burst;
        vector_op op;
        if (sscanf(line, "limit %" SCNd64 " %" SCNd64, &emission_ns, &burst) == 2) {
            sequence_start(&seq, emission_ns, burst, sequences++);
            started = true;
        } else if (started && strcmp(line, "reset") == 0) {
            seq.tat = 0;
            cr_limiter_reset(seq.limiter);
            cr_keyed_reset(seq.keyed, seq.key, strlen(seq.key));
            cr_limiter_reset(seq.allow_limiter);
            cr_keyed_reset(seq.allow_keyed, seq.key, strlen(seq.key));
        } else if (started &&
                   sscanf(line,
                          "op %" SCNd64 " %" SCNd64 " %d %d %" SCNd64 " %" SCNd64 " %" SCNd64
                          " %" SCNd64,
                          &op.now, &op.cost, &op.commit, &op.allowed, &op.remaining,
                          &op.retry_after, &op.reset_after, &op.tat_after) == 8) {
            run_op(&seq, lineno, &op);
            ops++;
        } else {
            bad_line("decisions.txt", lineno, line);
        }
    }
    sequence_end(&seq);
    fclose(file);
    return ops;
}

/* ------------------------------------------------------------------------ */
/* limits.txt                                                                */

static void compare_limit(const char *what, int lineno, cr_status status, const cr_limit *got,
                          const char *want_status, int64_t want_emission, int64_t want_burst)
{
    CHECK_EQ_STR(status_name(status), want_status, "%s, limits.txt:%d", what, lineno);
    if (strcmp(want_status, "OK") == 0) {
        CHECK_EQ_I64(got->emission_ns, want_emission, "%s, limits.txt:%d", what, lineno);
        CHECK_EQ_I64(got->burst, want_burst, "%s, limits.txt:%d", what, lineno);
        CHECK_EQ_I64(got->tolerance_ns, want_emission * want_burst, "%s, limits.txt:%d", what,
                     lineno);
    } else {
        /* "On error `limit` is left untouched." */
        cr_limit untouched;
        memset(&untouched, 0x5a, sizeof untouched);
        CHECK(memcmp(got, &untouched, sizeof untouched) == 0, "%s, limits.txt:%d", what, lineno);
    }
}

static void run_number(int lineno, const char *line)
{
    char rate[64], period[64], burst[64], want_status[64];
    int64_t want_emission, want_burst;
    if (sscanf(line, "number %63s %63s %63s %63s %" SCNd64 " %" SCNd64, rate, period, burst,
               want_status, &want_emission, &want_burst) != 6)
        bad_line("limits.txt", lineno, line);
    cr_limit_args args = {0};
    args.rate = strtod(rate, NULL);
    if (strcmp(period, "-") != 0) {
        args.has_period = true;
        args.period_s = strtod(period, NULL);
    }
    if (strcmp(burst, "-") != 0) {
        args.has_burst = true;
        args.burst = strtoll(burst, NULL, 10);
    }
    cr_limit limit;
    memset(&limit, 0x5a, sizeof limit);
    cr_status status = cr_limit_init(&limit, &args);
    compare_limit("cr_limit_init(number)", lineno, status, &limit, want_status, want_emission,
                  want_burst);
}

static void run_text(int lineno, const char *line)
{
    char want_status[64];
    int64_t want_emission, want_burst;
    int period_given, start = -1;
    if (sscanf(line, "text %63s %" SCNd64 " %" SCNd64 " %d |%n", want_status, &want_emission,
               &want_burst, &period_given, &start) != 4 ||
        start < 0)
        bad_line("limits.txt", lineno, line);
    /* sscanf's " |" skips spaces after the bar; find the bar itself. */
    const char *bar = strchr(line + strlen("text "), '|');
    const char *text = bar + 1;
    size_t len = strlen(text);

    /* An exact-size copy: the core must not read past `len` (ASan watches). */
    char *exact = malloc(len ? len : 1);
    if (!exact)
        exit(2);
    memcpy(exact, text, len);

    cr_limit_args args = {0};
    args.rate_text = exact;
    args.rate_text_len = len;
    args.has_period = period_given != 0;
    args.period_s = 1.0;
    cr_limit limit;
    memset(&limit, 0x5a, sizeof limit);
    cr_status status = cr_limit_init(&limit, &args);
    compare_limit("cr_limit_init(text)", lineno, status, &limit, want_status, want_emission,
                  want_burst);

    /* Syntax and calendar errors are the parser's; anything else parsed. */
    double rate = -1, period_s = -1;
    status = cr_parse_rate(exact, len, &rate, &period_s);
    const char *want_parse = strcmp(want_status, "E_RATE_SYNTAX") == 0 ? "E_RATE_SYNTAX"
                             : strcmp(want_status, "E_RATE_CALENDAR") == 0 ? "E_RATE_CALENDAR"
                                                                          : "OK";
    CHECK_EQ_STR(status_name(status), want_parse, "cr_parse_rate, limits.txt:%d", lineno);
    if (status == CR_OK)
        CHECK(rate >= 0 && period_s >= 0, "cr_parse_rate, limits.txt:%d", lineno);
    free(exact);
}

static int run_limits(const char *dir)
{
    FILE *file = open_vectors(dir, "limits.txt");
    char line[1024];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!meaningful(line))
            continue;
        if (strncmp(line, "number ", 7) == 0)
            run_number(lineno, line);
        else if (strncmp(line, "text ", 5) == 0)
            run_text(lineno, line);
        else
            bad_line("limits.txt", lineno, line);
        count++;
    }
    fclose(file);
    return count;
}

/* ------------------------------------------------------------------------ */
/* seconds.txt                                                               */

static int run_seconds(const char *dir)
{
    FILE *file = open_vectors(dir, "seconds.txt");
    char line[1024];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!meaningful(line))
            continue;
        char seconds[64], want_status[64];
        int64_t want_ns;
        if (sscanf(line, "seconds %63s %63s %" SCNd64, seconds, want_status, &want_ns) != 3)
            bad_line("seconds.txt", lineno, line);
        int64_t ns = -7;
        cr_status status = cr_seconds_to_ns(strtod(seconds, NULL), &ns);
        CHECK_EQ_STR(status_name(status), want_status, "cr_seconds_to_ns(%s), seconds.txt:%d",
                     seconds, lineno);
        if (status == CR_OK)
            CHECK_EQ_I64(ns, want_ns, "cr_seconds_to_ns(%s), seconds.txt:%d", seconds, lineno);
        count++;
    }
    fclose(file);
    return count;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/vectors";
    int ops = run_decisions(dir);
    int limits = run_limits(dir);
    int seconds = run_seconds(dir);
    CHECK(ops > 5000, "decisions.txt holds %d ops", ops);
    CHECK(limits > 300, "limits.txt holds %d lines", limits);
    CHECK(seconds > 50, "seconds.txt holds %d lines", seconds);
    printf("vectors: %d decision ops x 3 entry points, %d limits, %d seconds\n", ops, limits, seconds);
    return check_summary("test_vectors");
}
