/*
 * libFuzzer target: reading a provider's response (cr_signal_read) and
 * following it (cr_follow), against the invariants of docs/design.md §18.
 *
 * Input: a status (2 bytes), a quota bit, a realtime instant (8 bytes), a
 * limit (an algorithm, its interval or window, its burst or rate), a state
 * and a time, then fields: lines "name: value" separated by '\n', each copied
 * into a buffer of its exact length, so that AddressSanitizer catches a read
 * past a field. Checked:
 * - the reading never fails on what the fields hold, reads no byte beyond
 *   them, and gives 0..CR_BOUNDS_MAX bounds, each remaining >= 0 and within
 *   in [0, CR_FOLLOW_MAX_NS];
 * - reading twice gives the same bounds (no state), and a status that is
 *   neither 429, 503 nor unknown reads no Retry-After;
 * - the follow only tightens: the state never moves earlier (gcra), no cost
 *   of 1 to 3 that the state refuses at the time is admitted after it, and no
 *   probe finds more units; following the same signal again changes nothing.
 */
#include "cellrate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FIELDS 64

#define FAIL(...)                     \
    do {                              \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr);          \
        abort();                      \
    } while (0)

typedef struct {
    const uint8_t *at;
    size_t left;
} reader;

static uint64_t take(reader *r, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && r->left; i++, r->left--)
        v |= (uint64_t)*r->at++ << (8 * i);
    return v;
}

static bool same_signal(const cr_signal *a, const cr_signal *b)
{
    if (a->count != b->count)
        return false;
    for (int i = 0; i < a->count; i++)
        if (a->bound[i].remaining != b->bound[i].remaining ||
            a->bound[i].within_ns != b->bound[i].within_ns)
            return false;
    return true;
}

static const int64_t statuses[] = {0, 200, 301, 429, 503, 500};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    const int64_t status = statuses[take(&r, 1) % 6];
    const cr_quota quota = (cr_quota)(take(&r, 1) & 1);
    const int64_t realtime = (int64_t)(take(&r, 8) % (uint64_t)CR_HORIZON_NS);
    const cr_algorithm algorithm = (cr_algorithm)(take(&r, 1) % 4);
    const int64_t emission = 1 + (int64_t)(take(&r, 4) % 4000000000u);
    const int64_t burst = 1 + (int64_t)(take(&r, 1) % 40);
    const int64_t now = (int64_t)(take(&r, 6) % ((uint64_t)1 << 46)) + ((int64_t)1 << 50);
    const int64_t state_offset = (int64_t)(take(&r, 5) % ((uint64_t)1 << 38));

    cr_limit limit;
    cr_limit_args args = {
        .rate = algorithm >= CR_ALGORITHM_FIXED_WINDOW ? (double)burst : 1.0,
        .period_s = (double)emission *
                    (algorithm >= CR_ALGORITHM_FIXED_WINDOW ? (double)burst : 1.0) / 1e9,
        .has_period = true,
        .burst = burst,
        .has_burst = algorithm < CR_ALGORITHM_FIXED_WINDOW,
        .algorithm = cr_algorithm_name(algorithm),
        .algorithm_len = strlen(cr_algorithm_name(algorithm))};
    if (cr_limit_init(&limit, &args) != CR_OK)
        return 0;

    /* the fields: "name: value" lines, each in a buffer of its own length */
    cr_field fields[MAX_FIELDS];
    char *buffers[2 * MAX_FIELDS];
    size_t count = 0, buffers_used = 0;
    const char *text = (const char *)r.at;
    size_t left = r.left;
    while (left > 0 && count < MAX_FIELDS) {
        const char *end = memchr(text, '\n', left);
        const size_t line = end ? (size_t)(end - text) : left;
        const char *colon = memchr(text, ':', line);
        const size_t name_len = colon ? (size_t)(colon - text) : line;
        const size_t value_len = colon ? line - name_len - 1 : 0;
        char *name = malloc(name_len ? name_len : 1), *value = malloc(value_len ? value_len : 1);
        memcpy(name, text, name_len);
        if (value_len)
            memcpy(value, colon + 1, value_len);
        buffers[buffers_used++] = name;
        buffers[buffers_used++] = value;
        fields[count++] = (cr_field){name, name_len, value, value_len};
        text += line + (end ? 1 : 0);
        left -= line + (end ? 1 : 0);
    }

    cr_signal signal, again;
    if (cr_signal_read(&signal, fields, count, status, quota, realtime) != CR_OK)
        FAIL("the reading failed on fields it must take");
    if (cr_signal_read(&again, fields, count, status, quota, realtime) != CR_OK ||
        !same_signal(&signal, &again))
        FAIL("two readings differ");
    if (signal.count < 0 || signal.count > CR_BOUNDS_MAX)
        FAIL("count %d", signal.count);
    for (int i = 0; i < signal.count; i++)
        if (signal.bound[i].remaining < 0 || signal.bound[i].within_ns < 0 ||
            signal.bound[i].within_ns > CR_FOLLOW_MAX_NS)
            FAIL("bound %d: %lld within %lld", i, (long long)signal.bound[i].remaining,
                 (long long)signal.bound[i].within_ns);
    if (status != 0 && status != 429 && status != 503) {
        /* without those fields no wait can be read */
        size_t kept = 0;
        cr_field others[MAX_FIELDS];
        for (size_t i = 0; i < count; i++) {
            const bool retry = fields[i].name_len >= 11 &&
                               strncmp(fields[i].name, "retry-after", 11) == 0;
            if (!retry)
                others[kept++] = fields[i];
        }
        if (cr_signal_read(&again, others, kept, status, quota, realtime) != CR_OK ||
            !same_signal(&signal, &again))
            FAIL("a Retry-After read on status %lld", (long long)status);
    }

    /* a state near now: before, at or after it, as a past decision left it */
    int64_t state = 0;
    if (algorithm < CR_ALGORITHM_FIXED_WINDOW) {
        state = now - ((int64_t)1 << 37) + state_offset;
    } else {
        cr_decision ignored;
        for (int i = 0; i < (int)(state_offset % 7); i++)
            state = cr_decide(&limit, state, now - (state_offset >> 3) % limit.tolerance_ns, 1,
                              &ignored);
    }
    const int64_t pending = (int64_t)(state_offset % 3);
    const double share = state_offset % 5 == 0 ? 0.5 : 1.0;
    const int64_t followed = cr_follow(&limit, state, now, &signal, pending, share);
    if (algorithm < CR_ALGORITHM_FIXED_WINDOW && followed < state)
        FAIL("the TAT moved back: %lld -> %lld", (long long)state, (long long)followed);
    if (cr_follow(&limit, followed, now, &signal, pending, share) != followed)
        FAIL("following twice changed the state again");
    for (int64_t cost = 1; cost <= 3; cost++) {
        for (int64_t later = 0; later <= 2; later++) {
            const int64_t at = now + later * limit.tolerance_ns / 2;
            cr_decision before, after;
            cr_decide(&limit, state, at, cost, &before);
            cr_decide(&limit, followed, at, cost, &after);
            if (after.allowed && !before.allowed)
                FAIL("a follow admitted cost %lld at +%lld that was refused", (long long)cost,
                     (long long)(at - now));
        }
    }
    for (int64_t later = 0; later <= 2; later++) {
        const int64_t at = now + later * limit.tolerance_ns / 2;
        cr_decision before, after; /* probes: the units that fit */
        cr_decide(&limit, state, at, 0, &before);
        cr_decide(&limit, followed, at, 0, &after);
        if (after.remaining > before.remaining)
            FAIL("a follow raised remaining at +%lld", (long long)(at - now));
    }
    for (size_t i = 0; i < buffers_used; i++)
        free(buffers[i]);
    return 0;
}
