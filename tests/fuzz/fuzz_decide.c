/*
 * libFuzzer target: the decision against an exact model of its invariants
 * (docs/design.md §1, §13).
 *
 * Input: T and burst, then a sequence of requests (a time step, which may go
 * back, and a cost). Each request is decided by the pure cr_decide, by a
 * cr_limiter and by a cr_keyed (two keys), which must agree to the field.
 * Checked against the model, in 128-bit arithmetic:
 * - admitted exactly when cost * T <= tau and now >= max(TAT, now) + cost * T - tau,
 *   and then the stored TAT is that sum; a refusal or a probe stores nothing;
 * - remaining in [0, burst], retry_after >= 0 (CR_NEVER only when unfittable);
 * - over the admissions, any interval [a, b] holds at most burst + (b - a) / T
 *   units: never more than burst at one instant.
 * Where the core has a time horizon (CR_HORIZON_NS: times and tau end there,
 * docs/design.md §1), times are drawn up to 2^63 - 1: the stores must refuse
 * a `now` past the horizon (CR_E_NOW), and below it no decision may overflow
 * into an admission (the model refuses whatever would pass 2^63 - 1). Without
 * a horizon (a core that saturates), times and tau stay below 2^62, where no
 * sum can overflow; -DFUZZ_FULL_RANGE forces the full range anyway, which
 * finds the saturation at once.
 */
#include "cellrate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__extension__ typedef __int128 wide;

#define MAX_REQUESTS 256

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

#define FAIL(...)                     \
    do {                              \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr);          \
        abort();                      \
    } while (0)

static void same(const cr_decision *a, const cr_decision *b, const char *what)
{
    if (a->allowed != b->allowed || a->remaining != b->remaining || a->limit != b->limit ||
        a->retry_after_ns != b->retry_after_ns || a->reset_after_ns != b->reset_after_ns)
        FAIL("%s differs from cr_decide", what);
}

#if defined(CR_HORIZON_NS) && !defined(FUZZ_FULL_RANGE)
#define FUZZ_FULL_RANGE 1
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
#ifdef FUZZ_FULL_RANGE
    const int64_t horizon = INT64_MAX; /* times drawn */
#else
    const int64_t horizon = ((int64_t)1 << 62) - 1;
#endif
#ifdef CR_HORIZON_NS
    const int64_t tau_limit = CR_HORIZON_NS; /* what cr_limit_init lets through */
#else
    const int64_t tau_limit = horizon;
#endif
    int64_t T = (int64_t)(take(&r, 8) % (uint64_t)tau_limit) + 1;
    int64_t burst = (int64_t)(take(&r, 4) % 1000) + 1;
    int64_t tau;
    if (__builtin_mul_overflow(T, burst, &tau) || tau > tau_limit)
        return 0;
    cr_limit limit;
    memset(&limit, 0, sizeof limit);
    limit.emission_ns = T;
    limit.burst = burst;
    limit.tolerance_ns = tau;
    limit.rate = 1;
    limit.period_s = (double)T / 1e9;
    limit.max_debt = burst; /* cr_limit_init's default */

    cr_limiter *limiter;
    cr_keyed *keyed;
    if (cr_limiter_new(&limiter, &limit) != CR_OK || cr_keyed_new(&keyed, &limit, 4) != CR_OK)
        abort();

    int64_t now = (int64_t)(take(&r, 8) % (uint64_t)horizon);
    int64_t tat = 0;
    int64_t times[MAX_REQUESTS], costs[MAX_REQUESTS];
    int admitted = 0;
    for (int i = 0; i < MAX_REQUESTS && r.left > 0; i++) {
        uint8_t op = (uint8_t)take(&r, 1);
        /* a step forward of any size, or back a little */
        uint64_t step = take(&r, 1 + (op & 7));
        if (op & 0x80)
            now = now >= (int64_t)(step % 1000000) ? now - (int64_t)(step % 1000000) : 0;
        else
            now = (wide)now + (wide)(step % (uint64_t)horizon) > (wide)horizon
                      ? horizon
                      : now + (int64_t)(step % (uint64_t)horizon);
        int64_t cost = (op & 0x40) ? (int64_t)take(&r, 8) & INT64_MAX : (int64_t)(op >> 3 & 7);
        bool commit = !(op & 0x20); /* else a peek: decides, stores nothing */

        cr_decision d, dl, dk;
        cr_status sl = cr_limiter_check(limiter, now, cost, commit, &dl);
        cr_status sk = cr_keyed_check(keyed, "k", 1, now, cost, commit, &dk);
#ifdef CR_HORIZON_NS
        if (now >= CR_HORIZON_NS) { /* past the horizon: refused, nothing decided */
            if (sl != CR_E_NOW || sk != CR_E_NOW)
                FAIL("now %lld past the horizon: statuses %d %d", (long long)now, (int)sl, (int)sk);
            continue;
        }
#endif
        if (sl != CR_OK || sk != CR_OK)
            FAIL("a store refused valid arguments: %d %d", (int)sl, (int)sk);
        int64_t new_tat = cr_decide(&limit, tat, now, cost, &d);
        same(&dl, &d, "cr_limiter");
        same(&dk, &d, "cr_keyed");

        /* The exact model. */
        wide base = tat > now ? tat : now;
        wide increment = (wide)cost * T;
        wide model_tat = base + increment;
        bool fits = increment <= tau;
        bool model_allowed = cost == 0 || (fits && (wide)now >= model_tat - tau);
#ifdef FUZZ_FULL_RANGE
        if (model_tat > INT64_MAX && cost != 0)
            model_allowed = false; /* an overflow never admits */
#endif
        if (d.allowed != model_allowed)
            FAIL("T=%lld burst=%lld tat=%lld now=%lld cost=%lld: allowed=%d, model says %d",
                 (long long)T, (long long)burst, (long long)tat, (long long)now, (long long)cost,
                 d.allowed, model_allowed);
        if (!d.allowed || cost == 0) {
            if (new_tat != tat)
                FAIL("a refusal or a probe stored a new TAT");
        } else if ((wide)new_tat != model_tat) {
            FAIL("stored TAT %lld, model %lld", (long long)new_tat, (long long)model_tat);
        }
        if (d.remaining < 0 || d.remaining > burst || d.limit != burst)
            FAIL("remaining %lld outside [0, %lld]", (long long)d.remaining, (long long)burst);
        if (d.retry_after_ns < 0 || (d.retry_after_ns == CR_NEVER) != (cost != 0 && !fits) ||
            (d.allowed && d.retry_after_ns != 0))
            FAIL("retry_after %lld", (long long)d.retry_after_ns);
        if (commit && d.allowed && cost > 0) {
            times[admitted] = now;
            costs[admitted] = cost;
            admitted++;
        }
        if (commit)
            tat = new_tat;
    }

    /* Any interval [a, b] of admission times: at most burst + (b - a) / T.
     * Sorted by time, every run i..j is checked (ties included). */
    for (int i = 1; i < admitted; i++) {
        for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
            int64_t t = times[j], c = costs[j];
            times[j] = times[j - 1];
            costs[j] = costs[j - 1];
            times[j - 1] = t;
            costs[j - 1] = c;
        }
    }
    for (int i = 0; i < admitted; i++) {
        wide total = 0;
        for (int j = i; j < admitted; j++) {
            total += costs[j];
            if (total > (wide)burst + (times[j] - times[i]) / T)
                FAIL("%lld units admitted in [%lld, %lld]: bound %lld", (long long)total,
                     (long long)times[i], (long long)times[j],
                     (long long)(burst + (times[j] - times[i]) / T));
        }
    }
    cr_limiter_free(limiter);
    cr_keyed_free(keyed);
    return 0;
}
