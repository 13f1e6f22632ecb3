/*
 * The shared conformance vectors (tests/vectors/, written by the reference
 * model) through every C entry point that decides or derives:
 *   decisions.txt  cr_decide, cr_limiter_check and cr_keyed_check (and reserve,
 *                  refund, charge, take and live changes likewise)
 *   limits.txt     cr_limit_init (and cr_parse_rate for its status)
 *   seconds.txt    cr_seconds_to_ns
 *
 * usage: test_vectors [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static const char *status_name(cr_status status)
{
    return (unsigned)status < CR_STATUS_COUNT ? cr_status_name(status) : "(out of range)";
}

/* ------------------------------------------------------------------------ */
/* decisions.txt                                                             */

/* One limit run through every entry point; a `limit` line runs as gcra and as
 * token_bucket (identical decisions), a `window` line as its algorithm. */
typedef struct {
    cr_limit limit;
    cr_limiter *limiter;
    cr_keyed *keyed;
    cr_limiter *allow_limiter; /* driven by cr_limiter_allow where an op commits */
    cr_keyed *allow_keyed;     /* driven by cr_keyed_allow likewise */
    int64_t state;             /* what cr_decide's caller stores */
} variant;

typedef struct {
    variant variants[2];
    int count;
    char key[32];
} sequence;

static void sequence_end(sequence *seq)
{
    for (int i = 0; i < seq->count; i++) {
        variant *v = &seq->variants[i];
        cr_limiter_free(v->limiter);
        cr_keyed_free(v->keyed);
        cr_limiter_free(v->allow_limiter);
        cr_keyed_free(v->allow_keyed);
    }
    memset(seq->variants, 0, sizeof seq->variants);
    seq->count = 0;
}

static void sequence_add(sequence *seq, const cr_limit *limit)
{
    variant *v = &seq->variants[seq->count++];
    v->limit = *limit;
    v->state = 0;
    if (cr_limiter_new(&v->limiter, limit) != CR_OK ||
        cr_keyed_new(&v->keyed, limit, 64) != CR_OK ||
        cr_limiter_new(&v->allow_limiter, limit) != CR_OK ||
        cr_keyed_new(&v->allow_keyed, limit, 64) != CR_OK) {
        fprintf(stderr, "cannot make a limiter or a keyed table\n");
        exit(2);
    }
}

static void sequence_start(sequence *seq, const cr_limit *limit, int index)
{
    sequence_end(seq);
    snprintf(seq->key, sizeof seq->key, "sequence-%d", index);
    sequence_add(seq, limit);
    if (limit->algorithm == CR_ALGORITHM_GCRA) {
        cr_limit bucket = *limit;
        bucket.algorithm = CR_ALGORITHM_TOKEN_BUCKET;
        sequence_add(seq, &bucket);
    }
}

typedef struct {
    int64_t now, cost;
    int commit, allowed;
    int64_t remaining, retry_after, reset_after, tat_after;
} vector_op;

static void compare(const char *via, const char *algorithm, int lineno, const vector_op *op,
                    int64_t burst, const cr_decision *got)
{
    CHECK_EQ_I64(got->allowed, op->allowed, "%s (%s), decisions.txt:%d", via, algorithm, lineno);
    CHECK_EQ_I64(got->remaining, op->remaining, "%s (%s), decisions.txt:%d", via, algorithm,
                 lineno);
    CHECK_EQ_I64(got->retry_after_ns, op->retry_after, "%s (%s), decisions.txt:%d", via, algorithm,
                 lineno);
    CHECK_EQ_I64(got->reset_after_ns, op->reset_after, "%s (%s), decisions.txt:%d", via, algorithm,
                 lineno);
    CHECK_EQ_I64(got->limit, burst, "%s (%s), decisions.txt:%d", via, algorithm, lineno);
}

static void run_op(variant *v, const char *key, int lineno, const vector_op *op)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    cr_decision got;

    /* cr_decide returns the state an admission would store even for a peek. */
    memset(&got, 0xa5, sizeof got);
    int64_t stored = cr_decide(&v->limit, v->state, op->now, op->cost, &got);
    compare("cr_decide", name, lineno, op, v->limit.burst, &got);
    bool gcra = v->limit.algorithm <= CR_ALGORITHM_TOKEN_BUCKET;
    if (op->commit || !op->allowed || op->cost == 0 || gcra) {
        int64_t want_stored = op->commit                      ? op->tat_after
                              : (op->allowed && op->cost > 0) ? op->now + op->reset_after
                                                              : v->state;
        CHECK_EQ_I64(stored, want_stored, "cr_decide's state (%s), decisions.txt:%d", name, lineno);
    }
    v->state = op->tat_after;

    memset(&got, 0xa5, sizeof got);
    cr_status status = cr_limiter_check(v->limiter, op->now, op->cost, op->commit, &got);
    CHECK_EQ_I64(status, CR_OK, "cr_limiter_check, decisions.txt:%d", lineno);
    compare("cr_limiter_check", name, lineno, op, v->limit.burst, &got);

    memset(&got, 0xa5, sizeof got);
    status = cr_keyed_check(v->keyed, key, strlen(key), op->now, op->cost, op->commit, &got);
    CHECK_EQ_I64(status, CR_OK, "cr_keyed_check, decisions.txt:%d", lineno);
    compare("cr_keyed_check", name, lineno, op, v->limit.burst, &got);

    /* The allow() fast paths: the same admissions, and so the same states. */
    if (op->commit) {
        bool allowed = !op->allowed;
        status = cr_limiter_allow(v->allow_limiter, op->now, op->cost, &allowed);
        CHECK_EQ_I64(status, CR_OK, "cr_limiter_allow, decisions.txt:%d", lineno);
        CHECK_EQ_I64(allowed, op->allowed, "cr_limiter_allow (%s), decisions.txt:%d", name, lineno);
        allowed = !op->allowed;
        status = cr_keyed_allow(v->allow_keyed, key, strlen(key), op->now, op->cost, &allowed);
        CHECK_EQ_I64(status, CR_OK, "cr_keyed_allow, decisions.txt:%d", lineno);
        CHECK_EQ_I64(allowed, op->allowed, "cr_keyed_allow (%s), decisions.txt:%d", name, lineno);
    }
}

/* A reservation through cr_reserve, cr_limiter_reserve and cr_keyed_reserve
 * (and the allow stores, to keep them in step). */
static void run_reserve(variant *v, const char *key, int lineno, int64_t now, int64_t cost,
                        int64_t max_wait, int want_reserved, int64_t want_delay, int64_t want_state)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    if (max_wait < 0)
        max_wait = CR_NEVER;
    bool reserved = !want_reserved;
    int64_t delay = -7;
    int64_t state = cr_reserve(&v->limit, v->state, now, cost, max_wait, &reserved, &delay);
    CHECK_EQ_I64(reserved, want_reserved, "cr_reserve (%s), decisions.txt:%d", name, lineno);
    CHECK_EQ_I64(delay, want_delay, "cr_reserve (%s), decisions.txt:%d", name, lineno);
    CHECK_EQ_I64(state, want_state, "cr_reserve's state (%s), decisions.txt:%d", name, lineno);
    v->state = want_state;
    cr_limiter *limiters[2] = {v->limiter, v->allow_limiter};
    cr_keyed *tables[2] = {v->keyed, v->allow_keyed};
    for (int i = 0; i < 2; i++) {
        reserved = !want_reserved;
        delay = -7;
        CHECK_EQ_I64(cr_limiter_reserve(limiters[i], now, cost, max_wait, &reserved, &delay), CR_OK,
                     "cr_limiter_reserve, decisions.txt:%d", lineno);
        CHECK_EQ_I64(reserved, want_reserved, "cr_limiter_reserve (%s), decisions.txt:%d", name,
                     lineno);
        CHECK_EQ_I64(delay, want_delay, "cr_limiter_reserve (%s), decisions.txt:%d", name, lineno);
        reserved = !want_reserved;
        delay = -7;
        CHECK_EQ_I64(cr_keyed_reserve(tables[i], key, strlen(key), now, CR_PLAN_DEFAULT, cost,
                                      max_wait, &reserved, &delay),
                     CR_OK, "cr_keyed_reserve, decisions.txt:%d", lineno);
        CHECK_EQ_I64(reserved, want_reserved, "cr_keyed_reserve (%s), decisions.txt:%d", name,
                     lineno);
        CHECK_EQ_I64(delay, want_delay, "cr_keyed_reserve (%s), decisions.txt:%d", name, lineno);
    }
}

/* A counter of the limiter and of the keyed table (`field`: a member of
 * cr_stats) into out[0] and out[1]. */
#define READ_COUNTER(v, field, out)                  \
    do {                                             \
        cr_stats read_stats;                         \
        cr_limiter_stats((v)->limiter, &read_stats); \
        (out)[0] = read_stats.field;                 \
        cr_keyed_stats((v)->keyed, &read_stats);     \
        (out)[1] = read_stats.field;                 \
    } while (0)

/* That the counter moved by `want` from `before` to `after` (unless it
 * saturated: a sequence's huge units may get it there). */
static void check_counted(const char *what, const char *name, int lineno, const uint64_t before[2],
                          const uint64_t after[2], int64_t want)
{
    for (int i = 0; i < 2; i++)
        if (after[i] != (uint64_t)CR_COUNT_MAX)
            CHECK_EQ_I64((int64_t)(after[i] - before[i]), want, "%s%s (%s), decisions.txt:%d",
                         i ? "keyed " : "", what, name, lineno);
}

static void run_refund(variant *v, const char *key, int lineno, int64_t now, int64_t cost,
                       int64_t want_given, int64_t want_state)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    int64_t state = cr_refund(&v->limit, v->state, now, cost);
    CHECK_EQ_I64(state, want_state, "cr_refund's state (%s), decisions.txt:%d", name, lineno);
    v->state = want_state;
    uint64_t refunded[2];
    READ_COUNTER(v, units_refunded, refunded);
    CHECK_EQ_I64(cr_limiter_refund(v->limiter, now, cost), CR_OK, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_limiter_refund(v->allow_limiter, now, cost), CR_OK, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_keyed_refund(v->keyed, key, strlen(key), now, CR_PLAN_DEFAULT, cost), CR_OK,
                 "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_keyed_refund(v->allow_keyed, key, strlen(key), now, CR_PLAN_DEFAULT, cost),
                 CR_OK, "decisions.txt:%d", lineno);
    uint64_t after[2];
    READ_COUNTER(v, units_refunded, after);
    check_counted("units_refunded", name, lineno, refunded, after, want_given);
}

/* A charge through cr_charge, cr_limiter_charge and cr_keyed_charge (and the
 * allow stores, to keep them in step); the stores count what it committed. */
static void run_charge(variant *v, const char *key, int lineno, const vector_op *op, int clipped,
                       int64_t committed)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    cr_decision got;
    memset(&got, 0xa5, sizeof got);
    int64_t state = cr_charge(&v->limit, v->state, op->now, op->cost, &got);
    compare("cr_charge", name, lineno, op, v->limit.burst, &got);
    CHECK_EQ_I64(got.clipped, clipped, "cr_charge (%s), decisions.txt:%d", name, lineno);
    CHECK_EQ_I64(state, op->tat_after, "cr_charge's state (%s), decisions.txt:%d", name, lineno);
    v->state = op->tat_after;
    uint64_t admitted[2];
    READ_COUNTER(v, units_admitted, admitted);
    cr_limiter *limiters[2] = {v->limiter, v->allow_limiter};
    cr_keyed *tables[2] = {v->keyed, v->allow_keyed};
    for (int i = 0; i < 2; i++) {
        memset(&got, 0xa5, sizeof got);
        CHECK_EQ_I64(cr_limiter_charge(limiters[i], op->now, op->cost, i == 0 ? &got : NULL), CR_OK,
                     "cr_limiter_charge, decisions.txt:%d", lineno);
        if (i == 0) {
            compare("cr_limiter_charge", name, lineno, op, v->limit.burst, &got);
            CHECK_EQ_I64(got.clipped, clipped, "cr_limiter_charge, decisions.txt:%d", lineno);
        }
        memset(&got, 0xa5, sizeof got);
        CHECK_EQ_I64(cr_keyed_charge(tables[i], key, strlen(key), op->now, CR_PLAN_DEFAULT,
                                     op->cost, i == 0 ? &got : NULL),
                     CR_OK, "cr_keyed_charge, decisions.txt:%d", lineno);
        if (i == 0) {
            compare("cr_keyed_charge", name, lineno, op, v->limit.burst, &got);
            CHECK_EQ_I64(got.clipped, clipped, "cr_keyed_charge, decisions.txt:%d", lineno);
        }
    }
    uint64_t after[2];
    READ_COUNTER(v, units_admitted, after);
    check_counted("units_admitted", name, lineno, admitted, after, committed);
}

/* A take through cr_take, cr_limiter_take and cr_keyed_take. */
static void run_take(variant *v, const char *key, int lineno, int64_t now, int64_t max_cost,
                     int64_t want_taken, int64_t want_state)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    int64_t taken = -7;
    int64_t state = cr_take(&v->limit, v->state, now, max_cost, &taken);
    CHECK_EQ_I64(taken, want_taken, "cr_take (%s), decisions.txt:%d", name, lineno);
    CHECK_EQ_I64(state, want_state, "cr_take's state (%s), decisions.txt:%d", name, lineno);
    v->state = want_state;
    cr_limiter *limiters[2] = {v->limiter, v->allow_limiter};
    cr_keyed *tables[2] = {v->keyed, v->allow_keyed};
    for (int i = 0; i < 2; i++) {
        taken = -7;
        CHECK_EQ_I64(cr_limiter_take(limiters[i], now, max_cost, &taken), CR_OK,
                     "cr_limiter_take, decisions.txt:%d", lineno);
        CHECK_EQ_I64(taken, want_taken, "cr_limiter_take (%s), decisions.txt:%d", name, lineno);
        taken = -7;
        CHECK_EQ_I64(
            cr_keyed_take(tables[i], key, strlen(key), now, CR_PLAN_DEFAULT, max_cost, &taken),
            CR_OK, "cr_keyed_take, decisions.txt:%d", lineno);
        CHECK_EQ_I64(taken, want_taken, "cr_keyed_take (%s), decisions.txt:%d", name, lineno);
    }
}

/* A live change through cr_carry, cr_limiter_reconfigure and
 * cr_keyed_reconfigure (the key converts on its next touch). */
static void run_reconfigure(variant *v, int lineno, int64_t now, int64_t emission_or_window,
                            int64_t burst_or_rate, int64_t want_state)
{
    const char *name = cr_algorithm_name(v->limit.algorithm);
    cr_limit to = v->limit.algorithm >= CR_ALGORITHM_FIXED_WINDOW
                      ? window_limit_of(v->limit.algorithm, emission_or_window, burst_or_rate)
                      : limit_of(emission_or_window, burst_or_rate);
    to.algorithm = v->limit.algorithm;
    CHECK_EQ_I64(cr_limit_reconfigurable(&v->limit, &to), CR_OK, "decisions.txt:%d", lineno);
    int64_t state = cr_carry(&v->limit, &to, v->state, now);
    CHECK_EQ_I64(state, want_state, "cr_carry's state (%s), decisions.txt:%d", name, lineno);
    v->state = want_state;
    v->limit = to;
    CHECK_EQ_I64(cr_limiter_reconfigure(v->limiter, &to, now), CR_OK, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_limiter_reconfigure(v->allow_limiter, &to, now), CR_OK, "decisions.txt:%d",
                 lineno);
    CHECK_EQ_I64(cr_limiter_limit(v->limiter)->burst, burst_or_rate, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_keyed_reconfigure(v->keyed, &to, now), CR_OK, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_keyed_reconfigure(v->allow_keyed, &to, now), CR_OK, "decisions.txt:%d", lineno);
    CHECK_EQ_I64(cr_keyed_limit(v->keyed)->burst, burst_or_rate, "decisions.txt:%d", lineno);
}

static cr_algorithm algorithm_named(const char *name)
{
    for (int a = CR_ALGORITHM_GCRA; a <= CR_ALGORITHM_SLIDING_WINDOW; a++)
        if (strcmp(cr_algorithm_name((cr_algorithm)a), name) == 0)
            return (cr_algorithm)a;
    fprintf(stderr, "unknown algorithm %s\n", name);
    exit(2);
}

static int run_decisions(const char *dir)
{
    FILE *file = vectors_open(dir, "decisions.txt");
    char line[1024], name[64];
    int lineno = 0, ops = 0, sequences = 0;
    sequence seq = {0};
    bool started = false;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        int64_t emission_ns, burst, now, cost, max_wait, delay, state, max_debt, given;
        int reserved, clipped, fields;
        vector_op op;
        if ((fields = sscanf(line, "limit %" SCNd64 " %" SCNd64 " %" SCNd64, &emission_ns, &burst,
                             &max_debt)) >= 2) {
            cr_limit limit = limit_of(emission_ns, burst); /* the vectors keep tau <= 2^62 */
            if (fields == 3)
                limit.max_debt = max_debt;
            sequence_start(&seq, &limit, sequences++);
            started = true;
        } else if ((fields = sscanf(line, "window %63s %" SCNd64 " %" SCNd64 " %" SCNd64, name,
                                    &emission_ns, &burst, &max_debt)) >= 3) {
            cr_limit limit = window_limit_of(algorithm_named(name), emission_ns, burst);
            if (fields == 4)
                limit.max_debt = max_debt;
            sequence_start(&seq, &limit, sequences++);
            started = true;
        } else if (started && strcmp(line, "reset") == 0) {
            for (int i = 0; i < seq.count; i++) {
                variant *v = &seq.variants[i];
                v->state = 0;
                cr_limiter_reset(v->limiter);
                cr_keyed_reset(v->keyed, seq.key, strlen(seq.key));
                cr_limiter_reset(v->allow_limiter);
                cr_keyed_reset(v->allow_keyed, seq.key, strlen(seq.key));
            }
        } else if (started && sscanf(line,
                                     "op %" SCNd64 " %" SCNd64 " %d %d %" SCNd64 " %" SCNd64
                                     " %" SCNd64 " %" SCNd64,
                                     &op.now, &op.cost, &op.commit, &op.allowed, &op.remaining,
                                     &op.retry_after, &op.reset_after, &op.tat_after) == 8) {
            for (int i = 0; i < seq.count; i++)
                run_op(&seq.variants[i], seq.key, lineno, &op);
            ops++;
        } else if (started &&
                   sscanf(line,
                          "reserve %" SCNd64 " %" SCNd64 " %" SCNd64 " %d %" SCNd64 " %" SCNd64,
                          &now, &cost, &max_wait, &reserved, &delay, &state) == 6) {
            for (int i = 0; i < seq.count; i++)
                run_reserve(&seq.variants[i], seq.key, lineno, now, cost, max_wait, reserved, delay,
                            state);
            ops++;
        } else if (started && sscanf(line, "refund %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64,
                                     &now, &cost, &given, &state) == 4) {
            for (int i = 0; i < seq.count; i++)
                run_refund(&seq.variants[i], seq.key, lineno, now, cost, given, state);
            ops++;
        } else if (started && sscanf(line,
                                     "charge %" SCNd64 " %" SCNd64 " %d %" SCNd64 " %" SCNd64
                                     " %" SCNd64 " %d %" SCNd64 " %" SCNd64,
                                     &op.now, &op.cost, &op.allowed, &op.remaining, &op.retry_after,
                                     &op.reset_after, &clipped, &given, &op.tat_after) == 9) {
            for (int i = 0; i < seq.count; i++)
                run_charge(&seq.variants[i], seq.key, lineno, &op, clipped, given);
            ops++;
        } else if (started && sscanf(line, "take %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64,
                                     &now, &cost, &delay, &state) == 4) {
            for (int i = 0; i < seq.count; i++)
                run_take(&seq.variants[i], seq.key, lineno, now, cost, delay, state);
            ops++;
        } else if (started &&
                   sscanf(line, "reconfigure %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64, &now,
                          &emission_ns, &burst, &state) == 4) {
            for (int i = 0; i < seq.count; i++)
                run_reconfigure(&seq.variants[i], lineno, now, emission_ns, burst, state);
            ops++;
        } else {
            vectors_bad_line("decisions.txt", lineno, line);
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
        vectors_bad_line("limits.txt", lineno, line);
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
        vectors_bad_line("limits.txt", lineno, line);
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

    /* Syntax, calendar and several-limit errors are the parser's; anything else parsed. */
    double rate = -1, period_s = -1;
    status = cr_parse_rate(exact, len, &rate, &period_s);
    const char *want_parse = strcmp(want_status, "E_RATE_SYNTAX") == 0 ? "E_RATE_SYNTAX"
                             : strcmp(want_status, "E_RATE_CALENDAR") == 0 ||
                                     strcmp(want_status, "E_RATE_CALENDAR_ALGORITHM") == 0
                                 ? "E_RATE_CALENDAR"
                             : strcmp(want_status, "E_RATE_SEVERAL") == 0 ? "E_RATE_SEVERAL"
                                                                          : "OK";
    CHECK_EQ_STR(status_name(status), want_parse, "cr_parse_rate, limits.txt:%d", lineno);
    if (status == CR_OK)
        CHECK(rate >= 0 && period_s >= 0, "cr_parse_rate, limits.txt:%d", lineno);
    free(exact);
}

/* "algorithm" and "algorithm_text" lines: a limit with an algorithm name. */
static void run_algorithm(int lineno, const char *line)
{
    char name[64], rate[64], period[64], burst[64], want_status[64];
    int64_t want_emission, want_tolerance, want_burst;
    cr_limit_args args = {0};
    char *exact = NULL;
    if (strncmp(line, "algorithm_text ", 15) == 0) {
        if (sscanf(line, "algorithm_text %63s %63s %" SCNd64 " %" SCNd64 " %" SCNd64, name,
                   want_status, &want_emission, &want_tolerance, &want_burst) != 5)
            vectors_bad_line("limits.txt", lineno, line);
        const char *text = strchr(line, '|') + 1;
        size_t len = strlen(text);
        exact = malloc(len ? len : 1); /* exact size: ASan sees any read past len */
        if (!exact)
            exit(2);
        memcpy(exact, text, len);
        args.rate_text = exact;
        args.rate_text_len = len;
    } else {
        if (sscanf(line, "algorithm %63s %63s %63s %63s %63s %" SCNd64 " %" SCNd64 " %" SCNd64,
                   name, rate, period, burst, want_status, &want_emission, &want_tolerance,
                   &want_burst) != 8)
            vectors_bad_line("limits.txt", lineno, line);
        args.rate = strtod(rate, NULL);
        if (strcmp(period, "-") != 0) {
            args.has_period = true;
            args.period_s = strtod(period, NULL);
        }
        if (strcmp(burst, "-") != 0) {
            args.has_burst = true;
            args.burst = strtoll(burst, NULL, 10);
        }
    }
    /* "-" is the empty name: given, with length 0 (not NULL, which means gcra) */
    bool empty = strcmp(name, "-") == 0;
    args.algorithm = empty ? "" : name;
    args.algorithm_len = empty ? 0 : strlen(name);
    cr_limit limit;
    memset(&limit, 0x5a, sizeof limit);
    cr_status status = cr_limit_init(&limit, &args);
    CHECK_EQ_STR(status_name(status), want_status, "cr_limit_init(%s), limits.txt:%d", name,
                 lineno);
    if (status == CR_OK) {
        CHECK_EQ_I64(limit.emission_ns, want_emission, "limits.txt:%d", lineno);
        CHECK_EQ_I64(limit.tolerance_ns, want_tolerance, "limits.txt:%d", lineno);
        CHECK_EQ_I64(limit.burst, want_burst, "limits.txt:%d", lineno);
        CHECK_EQ_STR(cr_algorithm_name(limit.algorithm), name, "limits.txt:%d", lineno);
        if (limit.algorithm >= CR_ALGORITHM_FIXED_WINDOW)
            CHECK_EQ_STR(cr_clock_name(&limit), "realtime", "limits.txt:%d", lineno);
    }
    free(exact);
}

static int run_limits(const char *dir)
{
    FILE *file = vectors_open(dir, "limits.txt");
    char line[1024];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        if (strncmp(line, "number ", 7) == 0)
            run_number(lineno, line);
        else if (strncmp(line, "text ", 5) == 0)
            run_text(lineno, line);
        else if (strncmp(line, "algorithm", 9) == 0)
            run_algorithm(lineno, line);
        else
            vectors_bad_line("limits.txt", lineno, line);
        count++;
    }
    fclose(file);
    return count;
}

/* ------------------------------------------------------------------------ */
/* seconds.txt                                                               */

static int run_seconds(const char *dir)
{
    FILE *file = vectors_open(dir, "seconds.txt");
    char line[1024];
    int lineno = 0, count = 0;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        char seconds[64], want_status[64];
        int64_t want_ns;
        if (sscanf(line, "seconds %63s %63s %" SCNd64, seconds, want_status, &want_ns) != 3)
            vectors_bad_line("seconds.txt", lineno, line);
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

/* ------------------------------------------------------------------------ */
/* status.txt: the model's status table, row for row the core's              */

/* A class as status.txt writes it. */
static const char *class_text(cr_status_class status_class)
{
    switch (status_class) {
    case CR_STATUS_ARGUMENT:
        return "argument";
    case CR_STATUS_RUNTIME:
        return "runtime";
    case CR_STATUS_REGION:
        return "region";
    default:
        return "-";
    }
}

static int run_status(const char *dir)
{
    FILE *file = vectors_open(dir, "status.txt");
    char line[1024];
    int lineno = 0, count = 0, last = -1;
    while (fgets(line, sizeof line, file)) {
        lineno++;
        if (!vectors_meaningful(line))
            continue;
        int number, message_at = 0;
        char name[64], class_name[64], param[64];
        if (sscanf(line, "status %d %63s %63s %63s |%n", &number, name, class_name, param,
                   &message_at) != 4 ||
            message_at == 0)
            vectors_bad_line("status.txt", lineno, line);
        const cr_status status = (cr_status)number;
        CHECK(number > last, "numbers ascend, status.txt:%d", lineno);
        last = number;
        CHECK_EQ_STR(cr_status_name(status), name, "status %d, status.txt:%d", number, lineno);
        CHECK_EQ_STR(class_text(cr_status_class_of(status)), class_name,
                     "class of %s, status.txt:%d", name, lineno);
        CHECK_EQ_STR(cr_status_param(status), strcmp(param, "-") == 0 ? "" : param,
                     "status %s, status.txt:%d", name, lineno);
        CHECK_EQ_STR(cr_strerror(status), line + message_at, "status %s, status.txt:%d", name,
                     lineno);
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
    int statuses = run_status(dir);
    CHECK(ops > 5000, "decisions.txt holds %d ops", ops);
    CHECK(limits > 300, "limits.txt holds %d lines", limits);
    CHECK(seconds > 50, "seconds.txt holds %d lines", seconds);
#define CR_TEST_ROW_(number, name, class, param, message) +1
    CHECK_EQ_I64(statuses, 0 CR_STATUS_LIST(CR_TEST_ROW_), "status.txt holds one row per status");
#undef CR_TEST_ROW_
    printf("vectors: %d decision ops x 3 entry points, %d limits, %d seconds, %d statuses\n", ops,
           limits, seconds, statuses);
    return check_summary("test_vectors");
}
