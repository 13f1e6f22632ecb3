/*
 * cellrate/follow.h: following a provider (docs/design.md §18): what a
 * response says of the limit it met (Retry-After, the IETF RateLimit fields,
 * x-ratelimit-*, anthropic-ratelimit-*), read here once for every face, and
 * the store operation that pulls a limiter into line with it; when to retry
 * a request the provider refused.
 *
 * A part of cellrate.h (include <cellrate.h>).
 */
#ifndef CELLRATE_FOLLOW_H
#define CELLRATE_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"
#include "status.h"
#include "stores.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* One field of a response, as the face received it (name and value need not
 * be NUL-terminated; the name in any case). */
typedef struct cr_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} cr_field;

/* The quota a limiter counts: the provider's requests, or its tokens. */
typedef enum cr_quota { CR_QUOTA_REQUESTS = 0, CR_QUOTA_TOKENS = 1 } cr_quota;

/* Parses "requests" or "tokens" (CR_E_QUOTA otherwise); NULL is "requests". */
cr_status cr_parse_quota(const char *name, size_t len, cr_quota *out);
/* "requests", "tokens" ("" out of range). */
const char *cr_quota_name(cr_quota quota);

/* The longest a response may hold a limiter: one hour. A Retry-After, a reset
 * or a window further away is read as this; a value that does not fit 63
 * bits of nanoseconds (or units) is no value and is ignored. */
#define CR_FOLLOW_MAX_NS ((int64_t)3600 * 1000000000)

/* The bounds a signal keeps; more are merged into the last (the fewest
 * remaining over the longest time: stricter than each). */
#define CR_BOUNDS_MAX 8

/* "At most `remaining` more units in [now, now + within_ns)", within_ns in
 * [0, CR_FOLLOW_MAX_NS] (0: now): what a response says of one quota. A wait
 * (a 429's Retry-After) is remaining 0 within the wait. (cr_follow reads a
 * remaining above 0 as "at most that many now".) */
typedef struct cr_bound {
    int64_t remaining;
    int64_t within_ns;
} cr_bound;

typedef struct cr_signal {
    int count; /* bounds filled; 0: the response said nothing of the quota */
    cr_bound bound[CR_BOUNDS_MAX];
} cr_signal;

/*
 * Reads what the response (its `status`, 0 when unknown, else 100..599:
 * CR_E_STATUS_CODE, and its `count` fields) says of `quota`, into `out`:
 *
 *   Retry-After (delay-seconds, with a fraction, or an HTTP-date) or, in its
 *     place when valid, retry-after-ms (the same wait to the millisecond), on
 *     a 429, a 503 or an unknown status: remaining 0 within the wait, for
 *     every quota;
 *   RateLimit: "policy";r=R;t=T (draft-ietf-httpapi-ratelimit-headers-08 to
 *     -11; the policy's quota unit from RateLimit-Policy's qu, "requests" when
 *     absent), RateLimit: limit=L, remaining=R, reset=T (draft 07), and
 *     RateLimit-Remaining / RateLimit-Reset (drafts up to 06): requests;
 *   x-ratelimit-remaining-{requests,tokens} with x-ratelimit-reset-{...}
 *     (durations such as "6m0s", "1.5s", "20ms"), and x-ratelimit-remaining
 *     with x-ratelimit-reset (seconds; a number >= 10^9 is a Unix time in
 *     seconds, >= 10^12 in milliseconds): requests, tokens;
 *   anthropic-ratelimit-{requests,tokens}-remaining with -reset (RFC 3339).
 *
 * A remaining without a reset is remaining within 0 (now). A 429 that carries
 * none of these fields, valid or not, is remaining 0 now, for requests. A
 * value that is not a number of its field's syntax, negative, past, or
 * beyond 63 bits is ignored (a
 * Structured Field that does not parse: the whole field); waits beyond
 * CR_FOLLOW_MAX_NS are capped at it; repeated fields each count (of one
 * family, the fewest remaining and the longest reset). The bounds come in
 * this order: RateLimit's as its fields come, the wait, the families above
 * in their order, a bare 429's; past CR_BOUNDS_MAX they merge. Absolute times are
 * read against `realtime_ns` (the Unix time in ns, below CR_HORIZON_NS, else
 * CR_E_NOW; CR_CLOCK reads CLOCK_REALTIME, only when such a time is met).
 * CR_E_HEADERS for fields NULL with a count, or a field NULL with a length.
 * Pure with an explicit `realtime_ns`; thread-safe; reads nothing beyond the
 * lengths given.
 */
cr_status cr_signal_read(cr_signal *out, const cr_field *fields, size_t count, int64_t status,
                         cr_quota quota, int64_t realtime_ns);

/* The checks of a follow's own arguments: CR_E_PENDING unless pending >= 0,
 * CR_E_SHARE unless 0 < share <= 1. */
cr_status cr_follow_check(int64_t pending, double share);

/*
 * A follow, pure: the state of a key pulled into line with `signal` at
 * `now_ns`. Each bound is first made this process's: remaining scaled by
 * `share` (a fleet member's part, floor) less `pending` (units sent that the
 * response cannot count yet), at least 0. A remaining above 0 spends the
 * difference: no more than it left now (gcra, token_bucket: TAT' = max(TAT,
 * now + tau - remaining * T), the next unit one T after them; windows: the
 * count raised to rate - remaining). A wait (remaining 0: a 429's
 * Retry-After, a remaining of 0 with its reset) holds the key until its end:
 * gcra TAT' = max(TAT, now + tau + max(0, within - T)), at most now +
 * CR_DEBT_MAX_NS; windows fill every window up to the one holding its last
 * instant (a window's state cannot stop part-way). Only ever stricter: never
 * a unit more than before, whatever the signal. Returns the state to store
 * (equal to `state`: nothing to write).
 */
int64_t cr_follow(const cr_limit *limit, int64_t state, int64_t now_ns, const cr_signal *signal,
                  int64_t pending, double share);

/* CR_OK when retries >= 0 (CR_E_RETRIES) and 0 < backoff_ns <= max_backoff_ns
 * (CR_E_BACKOFF): the settings of cr_retry_wait. */
cr_status cr_retry_check(int64_t retries, int64_t backoff_ns, int64_t max_backoff_ns);

/*
 * Whether to retry a request that a provider answered with `status`, as try
 * `attempt` after it (1: the first retry), and how long to wait first
 * (*wait_ns): a 429 or a 503, while attempt <= retries. The wait is the
 * back-off backoff_ns * 2^(attempt - 1), at most max_backoff_ns, half of it
 * fixed and half spread by `random` (uniform over 64 bits): clients refused
 * at once come back apart. A Retry-After is followed into the limiter (a
 * 429's holds it until then), which the retry waits on after this. Pure.
 */
bool cr_retry_wait(int64_t status, int64_t attempt, int64_t retries, int64_t backoff_ns,
                   int64_t max_backoff_ns, uint64_t random, int64_t *wait_ns);

/* cr_follow on the limiter's state, by compare-and-swap (lock-free); *pulled
 * says whether it changed. Counts nothing. CR_E_NOW, CR_E_PENDING, CR_E_SHARE. */
cr_status cr_limiter_follow(cr_limiter *limiter, int64_t now_ns, const cr_signal *signal,
                            int64_t pending, double share, bool *pulled);

/* As cr_limiter_follow, for `key` (an absent key takes a slot when pulled). */
cr_status cr_keyed_follow(cr_keyed *keyed, const void *key, size_t key_len, int64_t now_ns,
                          int32_t plan, const cr_signal *signal, int64_t pending, double share,
                          bool *pulled);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_FOLLOW_H */
