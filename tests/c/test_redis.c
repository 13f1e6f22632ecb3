/*
 * The Redis store's protocol (cellrate/redis.h) against tests/vectors/redis.txt,
 * written by the reference model (tests/model/redis_model.py): the script's
 * constants, keys, requests' words, replies, failures, the cluster slots'
 * message, the deny cache's answers, on_error's answers and the back-off.
 *
 * usage: test_redis [vectors-dir]   (default tests/vectors)
 */
#include "cellrate.h"
#include "check.h"
#include "vectors.h"

#include <stdlib.h>

#define LINE_MAX_BYTES 32768
#define FIELDS_MAX 64
#define LIMITS_MAX 16
#define TEXT_MAX 4096

/* A text field of the vectors: '-' (none), else a quote and bytes with %XX. */
typedef struct text {
    bool given;
    size_t len;
    char bytes[TEXT_MAX];
} text;

static void decode(const char *field, text *out)
{
    out->given = strcmp(field, "-") != 0;
    out->len = 0;
    if (!out->given)
        return;
    CHECK(field[0] == '\'', "a text field starts with a quote: %s", field);
    out->len = vectors_decode(field + 1, out->bytes, TEXT_MAX - 1);
}

/* Splits `line` at spaces, in place. */
static int split(char *line, char **fields)
{
    int n = 0;
    for (char *p = strtok(line, " "); p != NULL && n < FIELDS_MAX * 4; p = strtok(NULL, " "))
        fields[n++] = p;
    return n;
}

static int64_t number(const char *field) { return strtoll(field, NULL, 10); }

static cr_redis_mode mode_named(const char *name)
{
    static const char *const names[] = {"peek", "check", "allow", "refund", "charge", "take"};
    for (int i = 0; i < 6; i++)
        if (strcmp(name, names[i]) == 0)
            return (cr_redis_mode)i;
    CHECK(false, "a mode: %s", name);
    return CR_REDIS_PEEK;
}

static const char *status_name(cr_status status)
{
    return (unsigned)status < CR_STATUS_COUNT ? cr_status_name(status) : "(out of range)";
}

static cr_limit limits[LIMITS_MAX];

/* limit <id> <algorithm> <rate> <period> <burst|-> <max_debt|-> <T> <tau> <burst> <max_debt> */
static const cr_limit *read_limit(char **f, int n, int at)
{
    CHECK_EQ_I64(n, 11, "redis.txt:%d", at);
    cr_limit_args args;
    memset(&args, 0, sizeof args);
    args.algorithm = f[2];
    args.algorithm_len = strlen(f[2]);
    args.rate = strtod(f[3], NULL);
    args.period_s = strtod(f[4], NULL);
    args.has_period = true;
    args.has_burst = strcmp(f[5], "-") != 0;
    args.burst = args.has_burst ? number(f[5]) : 0;
    args.has_max_debt = strcmp(f[6], "-") != 0;
    args.max_debt = args.has_max_debt ? number(f[6]) : 0;
    const int64_t id = number(f[1]);
    CHECK(id >= 0 && id < LIMITS_MAX, "redis.txt:%d", at);
    cr_limit *limit = &limits[id];
    CHECK_EQ_STR(status_name(cr_limit_init(limit, &args)), "OK", "redis.txt:%d", at);
    CHECK_EQ_I64(limit->emission_ns, number(f[7]), "redis.txt:%d", at);
    CHECK_EQ_I64(limit->tolerance_ns, number(f[8]), "redis.txt:%d", at);
    CHECK_EQ_I64(limit->burst, number(f[9]), "redis.txt:%d", at);
    CHECK_EQ_I64(limit->max_debt, number(f[10]), "redis.txt:%d", at);
    return limit;
}

static text texts[3 * FIELDS_MAX + 1];

/* request <mode> <cost> <now s|-> <n> (<limit> <prefix> <name> <key>)*n, then the words. */
static void run_request(char **f, int n, char *expected, int at, bool marked)
{
    const cr_redis_mode mode = (cr_redis_mode)((unsigned)mode_named(f[1]) |
                                               (marked ? CR_REDIS_WIPE_MARKER : 0u));
    const int64_t cost = number(f[2]);
    int64_t now_ns = CR_CLOCK;
    cr_status status = CR_OK;
    if (strcmp(f[3], "-") != 0)
        status = cr_seconds_to_ns(strtod(f[3], NULL), &now_ns);
    const int nitems = (int)number(f[4]);
    CHECK_EQ_I64(n, 5 + 4 * nitems, "redis.txt:%d", at);
    cr_redis_item items[FIELDS_MAX];
    for (int i = 0; i < nitems; i++) {
        char **item = f + 5 + 4 * i;
        for (int j = 0; j < 3; j++)
            decode(item[1 + j], &texts[3 * i + j]);
        items[i] = (cr_redis_item){&limits[number(item[0])],
                                   texts[3 * i].bytes,
                                   texts[3 * i].len,
                                   texts[3 * i + 1].bytes,
                                   texts[3 * i + 1].len,
                                   texts[3 * i + 2].bytes,
                                   texts[3 * i + 2].len,
                                   -1,
                                   NULL};
    }
    static char buf[LINE_MAX_BYTES];
    cr_redis_word words[CR_REDIS_REQUEST_WORDS(FIELDS_MAX)];
    size_t count = 0;
    if (status == CR_OK) {
        const size_t size = cr_redis_request_size(items, (size_t)nitems);
        CHECK(size <= sizeof buf, "redis.txt:%d: %zu bytes", at, size);
        status = cr_redis_request(mode, cost, now_ns, items, (size_t)nitems, buf, size, words,
                                  &count);
        /* one byte short of what it writes: refused, nothing located */
        if (status == CR_OK && words[count - 1].offset + words[count - 1].len > 0) {
            size_t short_count = 0;
            const size_t used = words[count - 1].offset + words[count - 1].len;
            static char small[LINE_MAX_BYTES];
            CHECK_EQ_STR(status_name(cr_redis_request(mode, cost, now_ns, items, (size_t)nitems,
                                                      small, used - 1, words, &short_count)),
                         "E_NOMEM", "redis.txt:%d", at);
            CHECK(cr_redis_request(mode, cost, now_ns, items, (size_t)nitems, buf, used, words,
                                   &count) == CR_OK,
                  "redis.txt:%d: exactly its bytes", at);
        }
    }
    char *e[FIELDS_MAX * 4];
    const int m = split(expected, e);
    if (strcmp(e[0], "refused") == 0) {
        CHECK_EQ_STR(status_name(status), e[1], "redis.txt:%d", at);
        return;
    }
    CHECK_EQ_STR(status_name(status), "OK", "redis.txt:%d", at);
    CHECK_EQ_I64(count, number(e[1]), "redis.txt:%d: words", at);
    CHECK_EQ_I64(m, 2 + (int)count, "redis.txt:%d", at);
    for (size_t i = 0; status == CR_OK && i < count && (int)(2 + i) < m; i++) {
        static text want;
        decode(e[2 + i], &want);
        CHECK(words[i].len == want.len && memcmp(buf + words[i].offset, want.bytes, want.len) == 0,
              "redis.txt:%d: word %zu is \"%.*s\", want \"%.*s\"", at, i, (int)words[i].len,
              buf + words[i].offset, (int)want.len, want.bytes);
    }
}

/* batch <now s|-> <ncalls> (<mode>[+marker] <cost> <n> (<limit> <prefix> <name> <key>)*n)*ncalls,
 * then the words. */
static void run_batch(char **f, int n, char *expected, int at)
{
    int64_t now_ns = CR_CLOCK;
    cr_status status = CR_OK;
    if (strcmp(f[1], "-") != 0)
        status = cr_seconds_to_ns(strtod(f[1], NULL), &now_ns);
    const int ncalls = (int)number(f[2]);
    cr_redis_call calls[FIELDS_MAX];
    cr_redis_item items[FIELDS_MAX];
    int field = 3, nitems = 0;
    for (int c = 0; c < ncalls; c++) {
        CHECK(field + 3 <= n, "redis.txt:%d", at);
        /* <mode>+marker: the mode with the wipe marker */
        char *plus = strchr(f[field], '+');
        const bool marked = plus != NULL && strcmp(plus, "+marker") == 0;
        if (marked)
            *plus = '\0';
        const unsigned mode = (unsigned)mode_named(f[field]) | (marked ? CR_REDIS_WIPE_MARKER : 0u);
        calls[c] = (cr_redis_call){(cr_redis_mode)mode, number(f[field + 1]), items + nitems,
                                   (size_t)number(f[field + 2])};
        field += 3;
        for (size_t i = 0; i < calls[c].nitems; i++, nitems++, field += 4) {
            char **item = f + field;
            for (int j = 0; j < 3; j++)
                decode(item[1 + j], &texts[3 * nitems + j]);
            items[nitems] = (cr_redis_item){&limits[number(item[0])],
                                            texts[3 * nitems].bytes,
                                            texts[3 * nitems].len,
                                            texts[3 * nitems + 1].bytes,
                                            texts[3 * nitems + 1].len,
                                            texts[3 * nitems + 2].bytes,
                                            texts[3 * nitems + 2].len,
                                            -1,
                                            NULL};
        }
    }
    CHECK_EQ_I64(n, field, "redis.txt:%d", at);
    static char buf[LINE_MAX_BYTES];
    cr_redis_word words[CR_REDIS_BATCH_WORDS(FIELDS_MAX, FIELDS_MAX)];
    size_t count = 0, failed = 0;
    if (status == CR_OK) {
        const size_t size = cr_redis_batch_size(calls, (size_t)ncalls);
        CHECK(size <= sizeof buf, "redis.txt:%d: %zu bytes", at, size);
        status = cr_redis_batch(calls, (size_t)ncalls, now_ns, buf, size, words, &count, &failed);
        CHECK(status == CR_OK ? failed == (size_t)ncalls : true, "redis.txt:%d: failed", at);
        CHECK(count <= CR_REDIS_BATCH_WORDS(ncalls, nitems), "redis.txt:%d: words", at);
        if (status == CR_OK) { /* one byte short of what it writes: refused */
            const size_t used = words[count - 1].offset + words[count - 1].len;
            static char small[LINE_MAX_BYTES];
            size_t short_count = 0;
            CHECK_EQ_STR(status_name(cr_redis_batch(calls, (size_t)ncalls, now_ns, small, used - 1,
                                                    words, &short_count, NULL)),
                         "E_NOMEM", "redis.txt:%d", at);
            CHECK(cr_redis_batch(calls, (size_t)ncalls, now_ns, buf, used, words, &count, NULL) ==
                      CR_OK,
                  "redis.txt:%d: exactly its bytes", at);
        }
    }
    char *e[FIELDS_MAX * 4];
    const int m = split(expected, e);
    if (strcmp(e[0], "refused") == 0) {
        CHECK_EQ_STR(status_name(status), e[1], "redis.txt:%d", at);
        return;
    }
    CHECK_EQ_STR(status_name(status), "OK", "redis.txt:%d", at);
    CHECK_EQ_I64(count, number(e[1]), "redis.txt:%d: words", at);
    CHECK_EQ_I64(m, 2 + (int)count, "redis.txt:%d", at);
    for (size_t i = 0; i < count && (int)(2 + i) < m; i++) {
        static text want;
        decode(e[2 + i], &want);
        CHECK(words[i].len == want.len && memcmp(buf + words[i].offset, want.bytes, want.len) == 0,
              "redis.txt:%d: word %zu is \"%.*s\", want \"%.*s\"", at, i, (int)words[i].len,
              buf + words[i].offset, (int)want.len, want.bytes);
    }
}

/* reply <mode> <n> <limit>... int <v> | list <count> <field>..., then the answer. */
static void run_reply(char **f, int n, char *expected, int at)
{
    const cr_redis_mode mode = mode_named(f[1]);
    const int nlimits = (int)number(f[2]);
    const cr_limit *chosen[LIMITS_MAX];
    for (int i = 0; i < nlimits; i++)
        chosen[i] = &limits[number(f[3 + i])];
    char **shape = f + 3 + nlimits;
    const bool is_list = strcmp(shape[0], "list") == 0;
    int64_t fields[FIELDS_MAX];
    size_t nfields = 0;
    cr_status status = CR_OK;
    if (is_list) {
        nfields = (size_t)number(shape[1]);
        CHECK_EQ_I64(n, 5 + nlimits + (int)nfields, "redis.txt:%d", at);
        for (size_t i = 0; i < nfields; i++) {
            if (shape[2 + i][0] == '\'') {
                static text field;
                decode(shape[2 + i], &field);
                if (cr_redis_parse_integer(field.bytes, field.len, &fields[i]) != CR_OK)
                    status = CR_E_REDIS_REPLY;
            } else {
                fields[i] = number(shape[2 + i]);
            }
        }
    } else {
        fields[0] = number(shape[1]);
        nfields = 1;
    }
    cr_redis_answer answer;
    if (status == CR_OK)
        status = cr_redis_read_reply(mode, is_list, fields, nfields, chosen, (size_t)nlimits,
                                     &answer);
    char *e[16];
    const int m = split(expected, e);
    if (strcmp(e[0], "refused") == 0) {
        CHECK_EQ_STR(status_name(status), e[1], "redis.txt:%d", at);
    } else if (strcmp(e[0], "count") == 0) {
        CHECK_EQ_STR(status_name(status), "OK", "redis.txt:%d", at);
        CHECK_EQ_I64(answer.count, number(e[1]), "redis.txt:%d", at);
    } else {
        CHECK_EQ_I64(m, 8, "redis.txt:%d", at);
        CHECK_EQ_STR(status_name(status), "OK", "redis.txt:%d", at);
        if (status != CR_OK)
            return;
        CHECK_EQ_I64(answer.decision.allowed, number(e[1]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.decision.remaining, number(e[2]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.decision.retry_after_ns, number(e[3]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.decision.reset_after_ns, number(e[4]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.decision.limit, number(e[5]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.index, number(e[6]), "redis.txt:%d", at);
        CHECK_EQ_I64(answer.decision.clipped, number(e[7]), "redis.txt:%d", at);
    }
}

static const char *failure_name(cr_redis_failure failure)
{
    static const char *const names[] = {"cannot_decide", "mistake", "wrong_algorithm", "cross_slot",
                                        "no_script"};
    return (unsigned)failure < 5 ? names[failure] : "(out of range)";
}

static void run_file(FILE *file, int *lines)
{
    static char line[LINE_MAX_BYTES], next[LINE_MAX_BYTES];
    char *f[FIELDS_MAX * 4];
    size_t unavailable = 0;
    int at = 0, batch_lines = 0;
    while (fgets(line, sizeof line, file)) {
        at++;
        if (!vectors_meaningful(line))
            continue;
        CHECK(strlen(line) < sizeof line - 2, "redis.txt:%d: a line within the buffer", at);
        ++*lines;
        const int n = split(line, f);
        if (strcmp(f[0], "constant") == 0) {
            if (strcmp(f[1], "ALGORITHM_REPLY") == 0) {
                static text want;
                decode(f[2], &want);
                CHECK(want.len == strlen(CR_REDIS_ALGORITHM_REPLY) &&
                          memcmp(want.bytes, CR_REDIS_ALGORITHM_REPLY, want.len) == 0,
                      "redis.txt:%d", at);
                continue;
            }
            const int64_t value = strcmp(f[1], "MAX_TOLERANCE_NS") == 0 ? CR_REDIS_MAX_TOLERANCE_NS
                                  : strcmp(f[1], "MAX_DEBT_NS") == 0    ? CR_REDIS_MAX_DEBT_NS
                                  : strcmp(f[1], "FIRST_BACKOFF_NS") == 0
                                      ? CR_REDIS_FIRST_BACKOFF_NS
                                  : strcmp(f[1], "MAX_BACKOFF_NS") == 0 ? CR_REDIS_MAX_BACKOFF_NS
                                                                        : -1;
            CHECK_EQ_I64(value, number(f[2]), "redis.txt:%d: %s", at, f[1]);
        } else if (strcmp(f[0], "mode") == 0) {
            CHECK_EQ_I64(mode_named(f[1]), number(f[2]), "redis.txt:%d", at);
        } else if (strcmp(f[0], "unavailable") == 0) {
            CHECK_EQ_STR(cr_redis_unavailable_reply(unavailable), f[1], "redis.txt:%d", at);
            unavailable++;
        } else if (strcmp(f[0], "limit") == 0) {
            const cr_limit *limit = read_limit(f, n, at);
            /* signature <text>: the next line */
            at++;
            CHECK(fgets(next, sizeof next, file) != NULL, "redis.txt:%d: its signature", at);
            next[strcspn(next, "\r\n")] = '\0';
            char *e[4];
            CHECK_EQ_I64(split(next, e), 2, "redis.txt:%d", at);
            static text want;
            decode(e[1], &want);
            want.bytes[want.len] = '\0';
            char signature[64];
            CHECK_EQ_I64(cr_redis_signature(signature, sizeof signature, limit), want.len,
                         "redis.txt:%d", at);
            CHECK_EQ_STR(signature, want.bytes, "redis.txt:%d", at);
        } else if (strcmp(f[0], "key") == 0) {
            static text prefix, name, key, want;
            decode(f[1], &prefix);
            decode(f[2], &name);
            decode(f[3], &key);
            decode(f[4], &want);
            static char buf[LINE_MAX_BYTES];
            const size_t len = cr_redis_key(buf, sizeof buf, prefix.bytes, prefix.len, name.bytes,
                                            name.len, key.given ? key.bytes : NULL, key.len);
            CHECK(len == want.len && memcmp(buf, want.bytes, len) == 0, "redis.txt:%d", at);
            char tiny[4];
            CHECK_EQ_I64(cr_redis_key(tiny, sizeof tiny, prefix.bytes, prefix.len, name.bytes,
                                      name.len, key.given ? key.bytes : NULL, key.len),
                         want.len, "redis.txt:%d: the length whatever fits", at);
        } else if (strcmp(f[0], "marker") == 0) {
            /* marker <redis key> <slot> <wipe marker> */
            static text key, want;
            decode(f[1], &key);
            decode(f[3], &want);
            CHECK_EQ_I64(cr_redis_slot(key.bytes, key.len), number(f[2]), "redis.txt:%d", at);
            static char buf[LINE_MAX_BYTES];
            const size_t len = cr_redis_wipe_marker(buf, sizeof buf, key.bytes, key.len);
            CHECK(len == want.len && memcmp(buf, want.bytes, len) == 0, "redis.txt:%d", at);
            char tiny[2];
            CHECK_EQ_I64(cr_redis_wipe_marker(tiny, sizeof tiny, key.bytes, key.len), want.len,
                         "redis.txt:%d: the length whatever fits", at);
        } else if (strcmp(f[0], "batch_max") == 0) {
            CHECK_EQ_I64(number(f[1]), CR_REDIS_BATCH_MAX, "redis.txt:%d", at);
            batch_lines++;
        } else if (strcmp(f[0], "batch_reply") == 0) {
            CHECK_EQ_STR(
                status_name(cr_redis_batch_reply((size_t)number(f[1]), strcmp(f[2], "list") == 0,
                                                 (size_t)number(f[3]))),
                f[4], "redis.txt:%d", at);
            batch_lines++;
        } else if (strcmp(f[0], "request") == 0 || strcmp(f[0], "marked") == 0 ||
                   strcmp(f[0], "reply") == 0 || strcmp(f[0], "recall") == 0 ||
                   strcmp(f[0], "batch") == 0) {
            at++;
            CHECK(fgets(next, sizeof next, file) != NULL, "redis.txt:%d: its answer", at);
            next[strcspn(next, "\r\n")] = '\0';
            if (strcmp(f[0], "batch") == 0) {
                run_batch(f, n, next, at);
                batch_lines++;
            } else if (strcmp(f[0], "request") == 0 || strcmp(f[0], "marked") == 0) {
                run_request(f, n, next, at, strcmp(f[0], "marked") == 0);
            } else if (strcmp(f[0], "reply") == 0) {
                run_reply(f, n, next, at);
            } else {
                /* recall <limit> <asked> <cost> <remaining> <retry> <reset> <mode> <n> <now> <cost> <clock> */
                const cr_redis_refusal refusal = {number(f[2]), number(f[3]), number(f[4]),
                                                  number(f[5]), number(f[6])};
                cr_decision out;
                const cr_redis_recall outcome = cr_redis_recall_refusal(
                    &limits[number(f[1])], &refusal, mode_named(f[7]), (size_t)number(f[8]),
                    strcmp(f[9], "-") == 0 ? CR_CLOCK : number(f[9]), number(f[10]), number(f[11]),
                    &out);
                char *e[8];
                split(next, e);
                static const char *const outcomes[] = {"recalled", "ask", "expired"};
                CHECK_EQ_STR(outcomes[outcome], e[0], "redis.txt:%d", at);
                if (outcome == CR_REDIS_RECALLED && strcmp(e[0], "recalled") == 0) {
                    CHECK_EQ_I64(out.allowed, number(e[1]), "redis.txt:%d", at);
                    CHECK_EQ_I64(out.remaining, number(e[2]), "redis.txt:%d", at);
                    CHECK_EQ_I64(out.retry_after_ns, number(e[3]), "redis.txt:%d", at);
                    CHECK_EQ_I64(out.reset_after_ns, number(e[4]), "redis.txt:%d", at);
                    CHECK_EQ_I64(out.limit, number(e[5]), "redis.txt:%d", at);
                }
            }
        } else if (strcmp(f[0], "failure") == 0) {
            static text word, message;
            decode(f[1], &word);
            decode(f[2], &message);
            size_t message_at = SIZE_MAX;
            const cr_redis_failure failure = cr_redis_classify(
                word.given ? word.bytes : NULL, word.len, message.bytes, message.len, &message_at);
            CHECK_EQ_STR(failure_name(failure), f[3], "redis.txt:%d", at);
            if (strcmp(f[4], "-") != 0)
                CHECK_EQ_I64(message_at, number(f[4]), "redis.txt:%d", at);
        } else if (strcmp(f[0], "slots") == 0) {
            const int nkeys = (int)number(f[1]);
            const char *keys[FIELDS_MAX];
            size_t key_lens[FIELDS_MAX];
            int64_t slots[FIELDS_MAX];
            for (int i = 0; i < nkeys; i++) {
                decode(f[2 + 2 * i], &texts[i]);
                keys[i] = texts[i].bytes;
                key_lens[i] = texts[i].len;
                slots[i] = number(f[3 + 2 * i]);
            }
            static text want;
            decode(f[2 + 2 * nkeys], &want);
            want.bytes[want.len] = '\0';
            static char buf[LINE_MAX_BYTES];
            const size_t len = cr_redis_slots_message(buf, sizeof buf, keys, key_lens, slots,
                                                      (size_t)nkeys);
            CHECK_EQ_I64(len, want.len, "redis.txt:%d", at);
            CHECK_EQ_STR(buf, want.bytes, "redis.txt:%d", at);
            char small[16];
            CHECK_EQ_I64(
                cr_redis_slots_message(small, sizeof small, keys, key_lens, slots, (size_t)nkeys),
                want.len, "redis.txt:%d: the length whatever fits", at);
            CHECK(strlen(small) == sizeof small - 1 && memcmp(small, want.bytes, 15) == 0,
                  "redis.txt:%d: what fits, with its NUL", at);
        } else if (strcmp(f[0], "remember") == 0) {
            const cr_decision decision = {.allowed = number(f[5]) == 1,
                                          .remaining = number(f[6]),
                                          .retry_after_ns = number(f[7]),
                                          .reset_after_ns = number(f[8])};
            cr_redis_refusal refusal;
            const bool kept = cr_redis_remember(mode_named(f[1]), (size_t)number(f[2]),
                                                strcmp(f[3], "-") == 0 ? CR_CLOCK : number(f[3]),
                                                number(f[4]), &decision, number(f[9]), &refusal);
            CHECK_EQ_I64(kept, number(f[10]), "redis.txt:%d", at);
            if (kept) {
                CHECK_EQ_I64(refusal.asked_ns, number(f[9]), "redis.txt:%d", at);
                CHECK_EQ_I64(refusal.cost, number(f[4]), "redis.txt:%d", at);
                CHECK_EQ_I64(refusal.retry_after_ns, number(f[7]), "redis.txt:%d", at);
            }
        } else if (strcmp(f[0], "unavailable_answer") == 0) {
            cr_decision out;
            const int64_t taken = cr_redis_unavailable(&limits[number(f[1])],
                                                       strcmp(f[2], "allow") == 0, number(f[3]),
                                                       number(f[4]), &out);
            CHECK_EQ_I64(out.allowed, number(f[5]), "redis.txt:%d", at);
            CHECK_EQ_I64(out.remaining, number(f[6]), "redis.txt:%d", at);
            CHECK_EQ_I64(out.retry_after_ns, number(f[7]), "redis.txt:%d", at);
            CHECK_EQ_I64(out.reset_after_ns, number(f[8]), "redis.txt:%d", at);
            CHECK_EQ_I64(out.limit, number(f[9]), "redis.txt:%d", at);
            CHECK_EQ_I64(taken, number(f[10]), "redis.txt:%d", at);
        } else if (strcmp(f[0], "backoff") == 0) {
            CHECK_EQ_I64(cr_redis_backoff(number(f[1])), number(f[2]), "redis.txt:%d", at);
        } else if (strcmp(f[0], "fallback_check") == 0) {
            const cr_status status = cr_redis_fallback_check(f[1], strlen(f[1]),
                                                             strcmp(f[2], "1") == 0);
            CHECK_EQ_STR(status_name(status), f[3], "redis.txt:%d", at);
        } else if (strcmp(f[0], "nginx_items") == 0) {
            const cr_status status = cr_redis_nginx_items(
                (size_t)number(f[1]), strcmp(f[2], "1") == 0, strcmp(f[3], "1") == 0);
            CHECK_EQ_STR(status_name(status), f[4], "redis.txt:%d", at);
        } else if (strcmp(f[0], "fallback_limit") == 0) {
            cr_limit out;
            const cr_status status = cr_redis_fallback_limit(&limits[number(f[1])],
                                                             strtod(f[2], NULL), &out);
            CHECK_EQ_STR(status_name(status), f[3], "redis.txt:%d", at);
            if (status == CR_OK) {
                CHECK_EQ_STR(cr_algorithm_name(out.algorithm), f[4], "redis.txt:%d", at);
                CHECK_EQ_I64(out.emission_ns, number(f[5]), "redis.txt:%d", at);
                CHECK_EQ_I64(out.tolerance_ns, number(f[6]), "redis.txt:%d", at);
                CHECK_EQ_I64(out.burst, number(f[7]), "redis.txt:%d", at);
            }
        } else if (strcmp(f[0], "going_back") == 0) {
            cr_redis_mode sent;
            bool settled;
            const int64_t cost = cr_redis_going_back(mode_named(f[2]), number(f[3]),
                                                     &limits[number(f[1])], number(f[4]), &sent,
                                                     &settled);
            CHECK_EQ_I64(sent, mode_named(f[5]), "redis.txt:%d", at);
            CHECK_EQ_I64(cost, number(f[6]), "redis.txt:%d", at);
            CHECK_EQ_I64(settled, number(f[7]), "redis.txt:%d", at);
        } else if (strcmp(f[0], "change") == 0) {
            const bool none = strcmp(f[3], "-") == 0;
            const cr_status status = cr_redis_check_change(
                strcmp(f[1], "1") == 0, f[2], strlen(f[2]), none ? NULL : f[3], strlen(f[3]));
            CHECK_EQ_STR(status_name(status), f[4], "redis.txt:%d", at);
        } else if (strcmp(f[0], "items") == 0) {
            uintptr_t clients[16];
            const size_t nitems = (size_t)number(f[1]);
            CHECK(nitems <= 16, "redis.txt:%d: too many items", at);
            for (size_t i = 0; i < nitems && i < 16; i++)
                clients[i] = strcmp(f[2 + i], "-") == 0 ? 0 : (uintptr_t)number(f[2 + i]);
            CHECK_EQ_STR(status_name(cr_redis_check_items(clients, nitems)), f[2 + nitems],
                         "redis.txt:%d", at);
        } else {
            CHECK(false, "redis.txt:%d: an unknown line: %s", at, f[0]);
        }
    }
    CHECK(cr_redis_unavailable_reply(unavailable) == NULL, "the list's words are the vectors'");
    CHECK(batch_lines >= 15, "redis.txt: the batches' lines (%d)", batch_lines);
}

/* A class's request: the class's reserve_ns after the limit's words (before
 * now), one item only, a class the limit has; its reply read as the plain
 * mode's; the deny cache keeps none of it. */
static void class_requests(void)
{
    cr_limit_args args = {0};
    args.rate = 10;
    args.burst = 10;
    args.has_burst = true;
    const cr_priority_arg classes[] = {{"critical", 8, 0.0}, {"bulk", 4, 0.5}};
    args.priorities = classes;
    args.npriorities = 2;
    args.has_priorities = true;
    cr_limit limit, plain;
    CHECK(cr_limit_init(&limit, &args) == CR_OK, "a limit with classes");
    args.has_priorities = false;
    CHECK(cr_limit_init(&plain, &args) == CR_OK, "a limit without");
    cr_redis_item item = {&limit, "p:", 2, "n", 1, "k", 1, 0, NULL}; /* bulk: index 0 */
    char buf[512];
    cr_redis_word words[CR_REDIS_REQUEST_WORDS(2)];
    size_t count = 0;
    CHECK(cr_redis_request(CR_REDIS_ALLOW_CLASS, 1, 5, &item, 1, buf, sizeof buf, words, &count) ==
              CR_OK,
          "a class's allow");
    CHECK_EQ_I64((int64_t)count, 10, "numkeys, key, mode, cost, 4 limit words, reserve, now");
    CHECK(words[2].len == 1 && buf[words[2].offset] == '8', "mode 8");
    CHECK(words[8].len == 9 && memcmp(buf + words[8].offset, "500000000", 9) == 0,
          "bulk's reserve: half of 1 s");
    CHECK(words[9].len == 1 && buf[words[9].offset] == '5', "then now");
    cr_redis_item two[2] = {item, item};
    CHECK(cr_redis_request(CR_REDIS_CHECK_CLASS, 1, 5, two, 2, buf, sizeof buf, words, &count) ==
              CR_E_PRIORITY_SEVERAL,
          "several limits take no class");
    item.priority = 2;
    CHECK(cr_redis_request(CR_REDIS_PEEK_CLASS, 1, 5, &item, 1, buf, sizeof buf, words, &count) ==
              CR_E_PRIORITY,
          "an index the limit lacks");
    item.limit = &plain;
    item.priority = 0;
    CHECK(cr_redis_request(CR_REDIS_PEEK_CLASS, 1, 5, &item, 1, buf, sizeof buf, words, &count) ==
              CR_E_PRIORITY_NONE,
          "a limit without classes");
    CHECK(cr_redis_plain_mode(CR_REDIS_ALLOW_CLASS) == CR_REDIS_ALLOW &&
              cr_redis_plain_mode(CR_REDIS_TAKE) == CR_REDIS_TAKE,
          "plain modes");
    const cr_limit *classed[1] = {&limit};
    const int64_t admitted = 1;
    cr_redis_answer answer;
    CHECK(cr_redis_read_reply(CR_REDIS_ALLOW_CLASS, false, &admitted, 1, classed, 1, &answer) ==
                  CR_OK &&
              answer.decision.allowed,
          "allow's admission: 1 alone");
    const int64_t refused[5] = {0, 0, 100000000, 500000000, 1};
    CHECK(cr_redis_read_reply(CR_REDIS_CHECK_CLASS, true, refused, 5, classed, 1, &answer) == CR_OK,
          "a class's refusal");
    cr_redis_refusal kept;
    CHECK(!cr_redis_remember(CR_REDIS_CHECK_CLASS, 1, CR_CLOCK, 1, &answer.decision, 0, &kept),
          "the deny cache keeps no class's refusal");
}

/* A Redis limit's plans (cr_redis_check_plans): named, and each plan a limit
 * the script carries; the table itself is cr_plans_set's (test_plans). */
static void plan_tables(void)
{
    cr_limit_args args = {0};
    args.rate = 10;
    cr_limit limit, pro, slow;
    CHECK(cr_limit_init(&limit, &args) == CR_OK, "the default");
    args.rate = 100;
    CHECK(cr_limit_init(&pro, &args) == CR_OK, "pro");
    args.rate = 1;
    args.period_s = 86400.0 * 200; /* a tolerance past CR_REDIS_MAX_TOLERANCE_NS */
    args.has_period = true;
    CHECK(cr_limit_init(&slow, &args) == CR_OK, "slow");
    cr_plan_table table;
    const cr_plan_arg plans[] = {{"pro", 3, &pro}, {"slow", 4, &slow}};
    CHECK(cr_plans_set(&table, &limit, plans, 1) == CR_OK, "a table of pro");
    CHECK(cr_redis_check_plans(true, &table) == CR_OK, "named: carried");
    CHECK(cr_redis_check_plans(false, &table) == CR_E_REDIS_PLANS_NAME, "unnamed: refused");
    CHECK(cr_plans_set(&table, &limit, plans, 2) == CR_OK, "a table of pro and slow");
    CHECK(cr_redis_check_plans(true, &table) == CR_E_REDIS_TOLERANCE, "slow: not carried");
    CHECK_EQ_STR(cr_status_param(CR_E_REDIS_PLANS_NAME), "name", "the parameter");
}

/* A calendar quota's words (docs/design/calendar.md, "Through Redis"): in
 * the place of emission_ns and tolerance_ns the bounds of the period holding
 * the client's now and of its neighbours, then its name; the unnamed keys'
 * signature names it; a year passes cr_redis_check_limit; no fallback. */
static void calendar_requests(void)
{
    const cr_zone *berlin;
    CHECK(cr_zone_open("Europe/Berlin", 13, NULL, 0, &berlin) == CR_OK, "Europe/Berlin");
    cr_limit_args args = {0};
    args.rate_text = "7/month";
    args.rate_text_len = 7;
    args.algorithm = "calendar";
    args.algorithm_len = 8;
    args.zone = berlin;
    cr_limit month, year;
    CHECK(cr_limit_init(&month, &args) == CR_OK, "7/month");
    args.rate_text = "7/year";
    args.rate_text_len = 6;
    CHECK(cr_limit_init(&year, &args) == CR_OK, "7/year");
    CHECK(cr_redis_check_limit(&year) == CR_OK, "a year carries (two-number times)");
    cr_redis_item item = {&month, "p:", 2, "n", 1, "k", 1, -1, NULL};
    static char buf[1024];
    cr_redis_word words[CR_REDIS_REQUEST_WORDS(1)];
    size_t count = 0;
    CHECK(cr_redis_request_size(&item, 1) <= sizeof buf, "the size");
    /* 2021-03-15 in Berlin: February, March (ends in CEST) and April */
    CHECK(cr_redis_request(CR_REDIS_CHECK, 1, INT64_C(1615766400000000000), &item, 1, buf,
                           cr_redis_request_size(&item, 1), words, &count) == CR_OK,
          "a quota's check");
    CHECK_EQ_I64((int64_t)count, 9, "numkeys, key, mode, cost, 4 limit words, now");
    const char *bounds = "1612134000:1614553200:1617228000:1619820000";
    CHECK(words[4].len == 8 && memcmp(buf + words[4].offset, "calendar", 8) == 0, "calendar");
    CHECK(words[5].len == strlen(bounds) &&
              memcmp(buf + words[5].offset, bounds, strlen(bounds)) == 0,
          "the bounds around the client's now");
    CHECK(words[6].len == 20 && memcmp(buf + words[6].offset, "1month@Europe/Berlin", 20) == 0,
          "the calendar's name");
    CHECK(words[7].len == 1 && buf[words[7].offset] == '7', "the amount");
    char signature[64];
    cr_redis_signature(signature, sizeof signature, &month);
    CHECK_EQ_STR(signature, "calendar:1month@Europe/Berlin:7", "an unnamed quota's keys");
    cr_limit out;
    CHECK(cr_redis_fallback_limit(&month, 1.0, &out) == CR_E_REDIS_CALENDAR_FALLBACK,
          "no fallback");
}

int main(int argc, char **argv)
{
    calendar_requests();
    class_requests();
    plan_tables();
    FILE *file = vectors_open(argc > 1 ? argv[1] : "tests/vectors", "redis.txt");
    int lines = 0;
    run_file(file, &lines);
    fclose(file);
    CHECK(lines > 300, "redis.txt holds %d lines", lines);
    printf("redis: %d vector lines\n", lines);
    return check_summary("test_redis");
}
